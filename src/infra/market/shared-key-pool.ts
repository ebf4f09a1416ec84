/**
 * A provider's key pool whose daily use is counted fleet-wide: every key handed out counts one call
 * against `<P>_DAILY_LIMIT` for that key and UTC day in the shared counters (Redis, or memory while
 * it is away), and a key whose day is used up is set aside until the next UTC midnight.
 */
import { createHash } from 'node:crypto';
import { keys as keySpace, utcDay } from '../../domain/key-space.js';
import type { CounterWindow, SharedCounters } from '../../domain/ports/counters.js';
import type { KeySetAsideReason, ProviderKey, ProviderKeyPool, ProviderKeyStatus } from '../../domain/ports/providers.js';
import { KeyPool, nextUtcMidnight } from './key-pool.js';

/** A count with no real limit, so a provider without `<P>_DAILY_LIMIT` still shows its keys' use. */
const UNLIMITED = 1_000_000_000;

/** Options of `SharedKeyPool`. */
export interface SharedKeyPoolOptions {
  /** The provider's short name, part of every counter key. */
  provider: string;
  /** `<P>_API_KEYS`, in order. */
  keys: readonly string[];
  /** Calls per key per UTC day across the fleet; 0 = no limit (the use is still counted). */
  dailyLimit: number;
  counters: SharedCounters;
  now?: () => number;
}

/** `ProviderKeyPool` over a `KeyPool`, counting each key's daily use in the shared counters. */
export class SharedKeyPool implements ProviderKeyPool {
  readonly #inner: KeyPool;
  readonly #provider: string;
  readonly #counters: SharedCounters;
  readonly #window: CounterWindow;
  readonly #now: () => number;
  /** Per key, a name for the counters that does not reveal it (a short digest: two keys may share their last four characters). */
  readonly #accounts: string[];

  constructor(options: SharedKeyPoolOptions) {
    this.#now = options.now ?? Date.now;
    this.#inner = new KeyPool(options.keys, this.#now);
    this.#provider = options.provider;
    this.#counters = options.counters;
    this.#window = { limit: options.dailyLimit > 0 ? options.dailyLimit : UNLIMITED, windowMs: 'utc-day' };
    this.#accounts = options.keys.map((key) => createHash('sha256').update(key).digest('hex').slice(0, 12));
  }

  get size(): number {
    return this.#inner.size;
  }

  /** The next active key whose day is not used up fleet-wide; keys found used up are set aside until midnight UTC. */
  async take(): Promise<ProviderKey | undefined> {
    for (let tried = 0; tried < this.#inner.size; tried++) {
      const key = this.#inner.takeNow();
      if (key === undefined) return undefined;
      const usage = await this.#counters.consume(this.#dailyKey(key.index), this.#window);
      if (usage.allowed) return key;
      this.#inner.setAside(key.index, 'limit_reached', nextUtcMidnight(this.#now()));
    }
    return undefined;
  }

  setAside(index: number, reason: KeySetAsideReason, untilMs?: number): void {
    this.#inner.setAside(index, reason, untilMs);
  }

  /** Every key's state, `usedToday` as this instance counted it (see `fleetStatus` for the fleet's). */
  status(): ProviderKeyStatus[] {
    return this.#inner.status();
  }

  exhaustedReason(): KeySetAsideReason | undefined {
    return this.#inner.exhaustedReason();
  }

  /** Every key's state with `usedToday` counted by the whole fleet. Never rejects. */
  async fleetStatus(): Promise<ProviderKeyStatus[]> {
    const local = this.#inner.status();
    return Promise.all(
      local.map(async (status) => {
        const usage = await this.#counters.peek(this.#dailyKey(status.index), this.#window);
        // Refused takes count in the window too: a key's use is at most its limit.
        return { ...status, usedToday: Math.min(usage.used, this.#window.limit) };
      }),
    );
  }

  #dailyKey(index: number): string {
    return keySpace.upstream.daily(this.#provider, this.#accounts[index] as string, utcDay(this.#now()));
  }
}
