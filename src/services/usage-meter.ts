/**
 * Usage metering (DESIGN.md section 17): requests and quota refusals (429) per API key and per user
 * per UTC day. `record` only adds to a map in memory, so the request path never waits; every few
 * seconds `flush` adds the batch to the shared counters (one call per caller and day, fleet-wide
 * totals in Redis, or this instance's own in memory mode) and writes the totals they answer to the
 * database, where any instance may raise them and they are kept 90 days.
 */
import { keys, utcDay } from '../domain/key-space.js';
import type { CounterWindow, SharedCounters } from '../domain/ports/counters.js';
import type { Logger } from '../domain/ports/logger.js';
import type { Principal } from '../domain/ports/accounts.js';
import type { UsageAction, UsageCallerKind, UsageRecorder, UsageRow, UsageStore } from '../domain/ports/usage.js';

export interface UsageMeterOptions {
  counters: SharedCounters;
  store: UsageStore;
  logger: Logger;
  /** How often counts are written, in ms. Default 5,000. */
  flushMs?: number;
  /** Days of usage kept in the database. Default 90. */
  retentionDays?: number;
  /** Epoch ms; `Date.now` by default. */
  now?: () => number;
}

interface Pending {
  day: string;
  callerKind: UsageCallerKind;
  caller: string;
  requests: number;
  limited: number;
}

const DAY_MS = 86_400_000;
/** The counters need a limit; usage is never refused, so it is one no day reaches. */
const USAGE_WINDOW: CounterWindow = { limit: 2_000_000_000, windowMs: 'utc-day' };
/** How often old rows are deleted. */
const PRUNE_EVERY_MS = 3_600_000;

/** The usage-report identity of a principal: a key by its id, a user by name. */
export function usageCallerOf(principal: Principal): { callerKind: UsageCallerKind; caller: string } {
  if (principal.kind === 'api-key') {
    const id = principal.id ?? '';
    return { callerKind: 'api-key', caller: id.startsWith('key:') ? id.slice('key:'.length) : id };
  }
  return { callerKind: 'user', caller: principal.username };
}

export class UsageMeter implements UsageRecorder {
  readonly #counters: SharedCounters;
  readonly #store: UsageStore;
  readonly #logger: Logger;
  readonly #flushMs: number;
  readonly #retentionDays: number;
  readonly #now: () => number;
  #pending = new Map<string, Pending>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #prunedAt = 0;
  /** The UTC day of now, and when it ends: one Date per day rather than per request. */
  #day = { name: '', endsAt: 0 };

  constructor(options: UsageMeterOptions) {
    this.#counters = options.counters;
    this.#store = options.store;
    this.#logger = options.logger;
    this.#flushMs = options.flushMs ?? 5000;
    this.#retentionDays = options.retentionDays ?? 90;
    this.#now = options.now ?? Date.now;
  }

  record(principal: Principal, action: UsageAction): void {
    const limited = action.limited;
    const { callerKind, caller } = usageCallerOf(principal);
    const day = this.#today();
    const id = `${day} ${callerKind} ${caller}`;
    let entry = this.#pending.get(id);
    if (entry === undefined) {
      entry = { day, callerKind, caller, requests: 0, limited: 0 };
      this.#pending.set(id, entry);
    }
    entry.requests += 1;
    if (limited) entry.limited += 1;
  }

  #today(): string {
    const now = this.#now();
    if (now >= this.#day.endsAt || now < this.#day.endsAt - DAY_MS) this.#day = { name: utcDay(now), endsAt: Math.floor(now / DAY_MS) * DAY_MS + DAY_MS };
    return this.#day.name;
  }

  /** Writes every `flushMs` until `close`. */
  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.flush(), this.#flushMs);
    this.#timer.unref();
  }

  /**
   * Adds what was recorded since the last flush to the shared counters and writes the totals to the
   * database. Counts that could not be added are kept for the next flush; never rejects.
   */
  flush(): Promise<void> {
    // One flush at a time: a second one would read totals the first has not written yet.
    this.#flushing ??= this.#flushOnce().finally(() => {
      this.#flushing = undefined;
    });
    return this.#flushing;
  }

  /** The rows of the last `days` UTC days, today included, newest first; counts not yet flushed are written first. */
  async report(days: number): Promise<UsageRow[]> {
    await this.flush();
    return this.#store.list(utcDay(this.#now() - (days - 1) * DAY_MS));
  }

  /** Stops the timer and writes what is left. */
  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }

  async #flushOnce(): Promise<void> {
    const batch = this.#pending;
    this.#pending = new Map();
    const totals: UsageRow[] = [];
    for (const [id, entry] of batch) {
      try {
        const requests = await this.#counters.consume(keys.usage(entry.day, entry.callerKind, entry.caller, 'requests'), USAGE_WINDOW, entry.requests);
        // Once added, the requests must not be added again, whatever happens to the refusals.
        entry.requests = 0;
        const limitedKey = keys.usage(entry.day, entry.callerKind, entry.caller, 'limited');
        const limited = entry.limited > 0 ? await this.#counters.consume(limitedKey, USAGE_WINDOW, entry.limited) : await this.#counters.peek(limitedKey, USAGE_WINDOW);
        entry.limited = 0;
        totals.push({ day: entry.day, callerKind: entry.callerKind, caller: entry.caller, requests: requests.used, rateLimited: limited.used });
      } catch (err) {
        this.#keep(id, entry);
        this.#logger.warn({ err }, 'usage counts could not be added to the shared counters; kept for the next flush');
      }
    }
    try {
      if (totals.length > 0) await this.#store.raiseTotals(totals);
      const now = this.#now();
      if (now - this.#prunedAt >= PRUNE_EVERY_MS) {
        this.#prunedAt = now;
        await this.#store.deleteBefore(utcDay(now - (this.#retentionDays - 1) * DAY_MS));
      }
    } catch (err) {
      // The counters hold the totals: the next flush of the same callers writes them again.
      this.#logger.warn({ err }, 'usage totals could not be written to the database');
    }
  }

  /** Puts counts back for the next flush, added to any recorded meanwhile. */
  #keep(id: string, entry: Pending): void {
    if (entry.requests === 0 && entry.limited === 0) return;
    const current = this.#pending.get(id);
    if (current === undefined) this.#pending.set(id, entry);
    else {
      current.requests += entry.requests;
      current.limited += entry.limited;
    }
  }
}
