/**
 * Request quotas over the shared counters: one fixed window per caller, counted where every
 * instance adds to the same number (memory while the shared store is away). `BatchedRequestCounter`
 * keeps most requests off it.
 */
import { keys } from '../../domain/key-space.js';
import type { CounterWindow, QuotaUsage, RequestCounter, SharedCounters } from '../../domain/ports/counters.js';

export interface QuotaCounterOptions {
  counters: SharedCounters;
  /** The window length in ms; whole seconds (the counters count in seconds). Default 60,000. */
  windowMs?: number;
}

/** Counts requests per caller under `keys.quota(caller)`. Never rejects for the store. */
export class QuotaCounter implements RequestCounter {
  readonly windowMs: number;
  readonly #counters: SharedCounters;
  /** One window per distinct limit, built once: the shared path allocates nothing per request for it. */
  readonly #windows = new Map<number, CounterWindow>();

  constructor(options: QuotaCounterOptions) {
    this.windowMs = Math.max(1, Math.round((options.windowMs ?? 60_000) / 1000)) * 1000;
    this.#counters = options.counters;
  }

  /** Counts `points` requests of `caller` against `limit` (a whole number of at least 1) per window. */
  async consume(caller: string, limit: number, points = 1): Promise<QuotaUsage> {
    let window = this.#windows.get(limit);
    if (!window) {
      window = { limit, windowMs: this.windowMs };
      this.#windows.set(limit, window);
    }
    const { allowed, remaining, resetMs } = await this.#counters.consume(keys.quota(caller), window, points);
    return { allowed, remaining, resetMs };
  }
}
