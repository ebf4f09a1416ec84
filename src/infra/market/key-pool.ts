/**
 * The API keys of one provider, handed out in turn (round robin over the active ones), in this
 * process's memory. The router may set keys aside or wrap this pool to count fleet-wide budgets.
 */
import type { KeySetAsideReason, ProviderKey, ProviderKeyPool, ProviderKeyStatus } from '../../domain/ports/providers.js';
import { DAY_MS } from '../../domain/durations.js';

interface Slot {
  value: string;
  setAside?: { reason: KeySetAsideReason; untilMs: number | undefined };
  usedToday: number;
  /** The UTC day (days since the epoch) `usedToday` counts. */
  day: number;
}

/** `ProviderKeyPool` in memory. An empty pool (keyless provider) never hands out a key. */
export class KeyPool implements ProviderKeyPool {
  readonly #slots: Slot[];
  readonly #now: () => number;
  #next = 0;
  #lastReason: KeySetAsideReason | undefined;

  /** `keys` in the order of `<P>_API_KEYS`; `now` (epoch ms) is for tests. */
  constructor(keys: readonly string[], now: () => number = Date.now) {
    this.#now = now;
    const day = Math.floor(now() / DAY_MS);
    this.#slots = keys.map((value) => ({ value, usedToday: 0, day }));
  }

  get size(): number {
    return this.#slots.length;
  }

  take(): Promise<ProviderKey | undefined> {
    return Promise.resolve(this.takeNow());
  }

  /** `take` without the promise, for callers that need no I/O to pick a key. */
  takeNow(): ProviderKey | undefined {
    const now = this.#now();
    for (let tried = 0; tried < this.#slots.length; tried++) {
      const index = (this.#next + tried) % this.#slots.length;
      const slot = this.#slots[index] as Slot;
      if (!this.#usable(slot, now)) continue;
      this.#next = (index + 1) % this.#slots.length;
      const day = Math.floor(now / DAY_MS);
      if (slot.day !== day) {
        slot.day = day;
        slot.usedToday = 0;
      }
      slot.usedToday++;
      return { index, value: slot.value };
    }
    return undefined;
  }

  setAside(index: number, reason: KeySetAsideReason, untilMs?: number): void {
    const slot = this.#slots[index];
    if (!slot) return;
    slot.setAside = { reason, untilMs };
    this.#lastReason = reason;
  }

  status(): ProviderKeyStatus[] {
    const now = this.#now();
    const day = Math.floor(now / DAY_MS);
    return this.#slots.map((slot, index) => {
      const active = this.#usable(slot, now);
      return {
        index,
        lastFour: slot.value.slice(-4),
        state: active ? 'active' : 'set_aside',
        ...(!active && slot.setAside ? { reason: slot.setAside.reason } : {}),
        ...(!active && slot.setAside?.untilMs !== undefined ? { untilMs: slot.setAside.untilMs } : {}),
        usedToday: slot.day === day ? slot.usedToday : 0,
      };
    });
  }

  exhaustedReason(): KeySetAsideReason | undefined {
    const now = this.#now();
    if (this.#slots.some((slot) => this.#usable(slot, now))) return undefined;
    return this.#lastReason ?? 'unauthorized';
  }

  #usable(slot: Slot, now: number): boolean {
    if (!slot.setAside) return true;
    if (slot.setAside.untilMs !== undefined && now >= slot.setAside.untilMs) {
      delete slot.setAside;
      return true;
    }
    return false;
  }
}

/** The next UTC midnight after `nowMs`: when a per-day limit starts afresh. */
export function nextUtcMidnight(nowMs: number): number {
  return (Math.floor(nowMs / DAY_MS) + 1) * DAY_MS;
}
