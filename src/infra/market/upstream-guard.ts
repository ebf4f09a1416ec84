/**
 * Upstream protection: a fleet-wide budget of upstream requests per second, a per-instance cap on
 * concurrent upstream requests, and a fleet-wide pause after the upstream answers 429. Yahoo's 429
 * is what its users meet first; staying under its radar beats recovering from its blocks.
 *
 * The budget and the pause live in the shared counters (every instance shares them); while the
 * shared store is away each instance keeps them in memory (then every instance has the whole budget
 * to itself).
 */
import type { Logger } from '../logger.js';
import { isBackground } from '../../domain/background-work.js';
import { keys, utcDay } from '../../domain/key-space.js';
import type { CounterWindow, SharedCounters } from '../../domain/ports/counters.js';
import { UpstreamBusyError, UpstreamRateLimitedError } from './upstream-guard-errors.js';

export { UpstreamBusyError, UpstreamRateLimitedError } from './upstream-guard-errors.js';

/** Options of `UpstreamGuard`. */
export interface UpstreamGuardOptions {
  /** The upstream's name (`yahoo`), part of every key of its budget and pause (`keys.upstream`). */
  name: string;
  /**
   * Upstream requests per second for the whole fleet (UPSTREAM_MAX_RPS, `<P>_MAX_RPS`); 0 = no budget.
   * A fraction is counted over a longer window: 5/60 (5 a minute) allows 5 calls per minute.
   */
  maxRps: number;
  /**
   * The share (0 to 1) of the budget, and of `dailyLimit`, that background work (`inBackground`) may
   * use; default 1. Background calls never wait: without room they are refused at once.
   */
  backgroundShare?: number;
  /** Calls per UTC day with all the provider's keys (0 = no limit): what the background share of a day is taken of. */
  dailyLimit?: number;
  /** Upstream requests in flight at once from this instance (UPSTREAM_MAX_CONCURRENCY), at least 1. */
  maxConcurrency: number;
  /** How long a call may wait for room before failing with `UpstreamBusyError`, in milliseconds. */
  maxWaitMs: number;
  /**
   * Refuse at once, instead of waiting, when every concurrent slot is taken or spoken for: with another provider to
   * ask, a slot freed by a hanging call (after its whole timeout) is not worth waiting for.
   */
  refuseWhenFull?: boolean;
  /** Where the budget and the pause are shared between instances. */
  counters: SharedCounters;
  /** Where pauses are logged. */
  logger?: Logger | undefined;
  /** Clock in epoch milliseconds (default `Date.now`). */
  now?: () => number;
}

/**
 * How long before the end of each second no call is admitted: the time between admission and the
 * request's arrival upstream (connection, event-loop lag on a busy host) must not carry a call
 * counted in one second into the next.
 */
const SECOND_END_MARGIN_MS = 100;

/** A call waiting for its turn. */
interface Waiter {
  deadline: number;
  admit: () => void;
  refuse: (error: UpstreamBusyError) => void;
}

/**
 * Admits upstream calls in arrival order (FIFO) when three things allow it: a free concurrency slot
 * on this instance, no pause in force, and room in the current second's budget.
 *
 * The budget counts calls per wall-clock second (one counter per epoch second, shared by the
 * instances), so at most `maxRps` calls start in any calendar second across the fleet; none is admitted
 * in the last 100 ms of a second, so a call also arrives upstream in the second it was counted in.
 * Within a second the calls are spread evenly (the k-th at (k-1)/maxRps of the usable 900 ms), which
 * keeps the upstream's view smooth: about `maxRps` in any sliding second, not twice that at a boundary. A call that finds
 * no room waits for the next second; a call that cannot be admitted within `maxWaitMs` (or that a
 * pause outlasts) fails with `UpstreamBusyError` at once, carrying when to retry.
 *
 * When a call ends with `UpstreamRateLimitedError` (the upstream's 429), every instance holds its
 * calls until `Retry-After` has passed: the end of the pause is shared and read before each admission.
 */
export class UpstreamGuard {
  readonly #maxRps: number;
  readonly #maxConcurrency: number;
  readonly #maxWaitMs: number;
  readonly #refuseWhenFull: boolean;
  readonly #counters: SharedCounters;
  readonly #logger: Logger | undefined;
  readonly #now: () => number;
  readonly #name: string;
  /** Each counter serves one epoch second; two seconds of life outlast any clock skew between instances. */
  readonly #secondWindow: CounterWindow;
  /** The budget's window in seconds: 1, or a minute or an hour for rates under one a second. */
  readonly #windowS: number;
  /** Calls allowed per window. */
  readonly #perWindow: number;
  readonly #pauseKey: string;
  /** Background calls allowed per window and per UTC day (`Infinity`: no limit of their own). */
  readonly #backgroundPerWindow: number;
  readonly #backgroundPerDay: number;
  readonly #queue: Waiter[] = [];
  #active = 0;
  #pumping = false;
  #pausedUntil = 0;

  constructor(options: UpstreamGuardOptions) {
    if (!Number.isInteger(options.maxConcurrency) || options.maxConcurrency < 1) {
      throw new RangeError(`maxConcurrency must be a whole number of at least 1 (got ${options.maxConcurrency})`);
    }
    if (!Number.isFinite(options.maxRps) || options.maxRps < 0) throw new RangeError(`maxRps must be a number of at least 0 (got ${options.maxRps})`);
    this.#maxRps = options.maxRps;
    // Free tiers speak in calls a minute or an hour (Polygon 5/min, Tiingo 50/hour): count in that window.
    this.#windowS = options.maxRps === 0 || Number.isInteger(options.maxRps) ? 1 : options.maxRps * 60 >= 1 ? 60 : 3600;
    this.#perWindow = Math.max(1, Math.floor(options.maxRps * this.#windowS + 1e-9));
    this.#maxConcurrency = options.maxConcurrency;
    this.#maxWaitMs = options.maxWaitMs;
    this.#refuseWhenFull = options.refuseWhenFull ?? false;
    this.#counters = options.counters;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#name = options.name;
    this.#secondWindow = { limit: this.#perWindow, windowMs: 2000 * this.#windowS };
    this.#pauseKey = keys.upstream.pauseUntil(options.name);
    const share = Math.min(1, Math.max(0, options.backgroundShare ?? 1));
    this.#backgroundPerWindow = options.maxRps === 0 ? Infinity : Math.floor(this.#perWindow * share + 1e-9);
    this.#backgroundPerDay = (options.dailyLimit ?? 0) === 0 ? Infinity : Math.floor((options.dailyLimit ?? 0) * share + 1e-9);
  }

  /** What background work may spend: calls per budget window (of `windowS` seconds) and per UTC day (`null`: no limit of its own). */
  get backgroundBudget(): { perWindow: number | null; windowS: number; perDay: number | null } {
    const finite = (n: number) => (Number.isFinite(n) ? n : null);
    return { perWindow: finite(this.#backgroundPerWindow), windowS: this.#windowS, perDay: finite(this.#backgroundPerDay) };
  }

  /**
   * Runs `call` once it is admitted. Rejects with `UpstreamBusyError` when it could not be admitted in
   * time (without running it), else settles as `call` does; a `UpstreamRateLimitedError` from `call`
   * pauses every instance for its `retryAfterSeconds`.
   */
  async run<T>(call: () => Promise<T>): Promise<T> {
    if (isBackground()) await this.#backgroundAdmission();
    else await this.#admission();
    try {
      return await call();
    } catch (err) {
      if (err instanceof UpstreamRateLimitedError) await this.#pause(err.retryAfterSeconds * 1000);
      throw err;
    } finally {
      this.#active--;
      void this.#pump();
    }
  }

  /** Calls waiting for admission and calls in flight on this instance. */
  get load(): { queued: number; active: number } {
    return { queued: this.#queue.length, active: this.#active };
  }

  #admission(): Promise<void> {
    const now = this.#now();
    if (this.#refuseWhenFull && this.#active + this.#queue.length >= this.#maxConcurrency) {
      return Promise.reject(this.#busy(`every one of the ${this.#maxConcurrency} upstream request slots is taken`, 1));
    }
    // A queue longer than the budget can serve within the wait bound: refuse now rather than at the deadline.
    if (this.#maxRps > 0 && Math.floor(this.#queue.length / this.#maxRps) * 1000 > this.#maxWaitMs) {
      return Promise.reject(this.#busy('the upstream request budget is used up for longer than the wait bound', this.#queue.length / this.#maxRps));
    }
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const index = this.#queue.indexOf(waiter);
        if (index >= 0) this.#queue.splice(index, 1);
        reject(this.#busy(`no room for an upstream request within ${this.#maxWaitMs} ms`, this.#retryEstimateSeconds()));
      }, this.#maxWaitMs);
      const waiter: Waiter = {
        deadline: now + this.#maxWaitMs,
        admit: () => {
          clearTimeout(timer);
          this.#active++;
          resolve();
        },
        refuse: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      this.#queue.push(waiter);
      void this.#pump();
    });
  }

  /**
   * Admits a background call at once or refuses it: callers come first, so a background call never
   * waits in the queue (a caller would wait behind it), never takes the last free slot while a caller
   * waits, and spends at most its share of the window's budget and of the day's.
   */
  async #backgroundAdmission(): Promise<void> {
    if (this.#queue.length > 0 || this.#active >= this.#maxConcurrency) throw this.#busy('callers are waiting: background work gives way', 1);
    const now = this.#now();
    const pausedUntil = Math.max(this.#pausedUntil, await this.#sharedPauseUntil());
    if (pausedUntil > now) throw this.#busy('upstream calls are paused after the upstream answered 429', (pausedUntil - now) / 1000, 'paused');
    if (this.#backgroundPerDay !== Infinity) {
      const nextDayMs = (Math.floor(now / 86_400_000) + 1) * 86_400_000;
      const day = this.#backgroundPerDay < 1 ? { allowed: false } : await this.#counters.consume(keys.upstream.background(this.#name, `d${utcDay(now)}`), { limit: this.#backgroundPerDay, windowMs: 'utc-day' });
      if (!day.allowed) throw this.#busy(`background work used its share of the daily limit (${this.#backgroundPerDay})`, (nextDayMs - now) / 1000);
    }
    if (this.#maxRps > 0) {
      const windowMs = this.#windowS * 1000;
      const second = Math.floor(now / windowMs) * this.#windowS;
      const leftS = (second * 1000 + windowMs - now) / 1000;
      const share = this.#backgroundPerWindow < 1 ? { allowed: false } : await this.#counters.consume(keys.upstream.background(this.#name, `w${second}`), { limit: this.#backgroundPerWindow, windowMs: 2000 * this.#windowS });
      if (!share.allowed) throw this.#busy(`background work used its share of the budget (${this.#backgroundPerWindow} of ${this.#perWindow} per ${this.#windowS} s)`, leftS);
      const taken = await this.#counters.consume(keys.upstream.rps(this.#name, second), this.#secondWindow);
      if (!taken.allowed) throw this.#busy('the upstream request budget is used up', leftS);
    }
    this.#active++;
  }

  /** Admits waiters from the head of the queue while slots, the pause and the budget allow. One pump at a time. */
  async #pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#queue.length > 0 && this.#active < this.#maxConcurrency) {
        const waitMs = await this.#waitBeforeNextCall();
        if (waitMs === 0) {
          // When every waiter gave up during the await, the budget point just taken is lost: harmless.
          this.#queue.shift()?.admit();
          continue;
        }
        if (this.#queue.length === 0) break;
        // Waiters this wait outlasts are told now rather than at their deadline: with a next provider
        // to ask, a used-up budget costs nothing.
        const resumeAt = this.#now() + waitMs;
        for (let i = this.#queue.length - 1; i >= 0; i--) {
          const waiter = this.#queue[i];
          if (waiter && waiter.deadline < resumeAt) {
            this.#queue.splice(i, 1);
            waiter.refuse(this.#busy(`the upstream request budget has no room within ${this.#maxWaitMs} ms`, waitMs / 1000));
          }
        }
        if (this.#queue.length === 0) break;
        await sleep(waitMs);
      }
    } catch (err) {
      this.#logger?.error({ err: err instanceof Error ? err.message : String(err) }, 'Upstream guard failed: refusing the waiting calls');
      for (const waiter of this.#queue.splice(0)) waiter.refuse(this.#busy('the upstream guard failed', 1));
    } finally {
      this.#pumping = false;
    }
  }

  /** 0 after taking a budget point for the next call; otherwise how long to wait before trying again (ms). */
  async #waitBeforeNextCall(): Promise<number> {
    const pausedUntil = Math.max(this.#pausedUntil, await this.#sharedPauseUntil());
    const now = this.#now();
    if (pausedUntil > now) {
      const remainingS = (pausedUntil - now) / 1000;
      // Waiters the pause outlasts are told at once, with the pause's end as their Retry-After.
      for (let i = this.#queue.length - 1; i >= 0; i--) {
        const waiter = this.#queue[i];
        if (waiter && waiter.deadline < pausedUntil) {
          this.#queue.splice(i, 1);
          waiter.refuse(this.#busy(`upstream calls are paused for ${Math.ceil(remainingS)} s after the upstream answered 429`, remainingS, 'paused'));
        }
      }
      return pausedUntil - now;
    }
    if (this.#maxRps === 0) return 0;
    const windowMs = this.#windowS * 1000;
    const second = Math.floor(now / windowMs) * this.#windowS;
    const msLeftInSecond = second * 1000 + windowMs - now;
    // A call admitted at the very end of a second reaches the upstream in the next one, which may be
    // full already: the last moments of each second are left unused.
    if (msLeftInSecond <= SECOND_END_MARGIN_MS) return msLeftInSecond + 1;
    const taken = await this.#counters.consume(keys.upstream.rps(this.#name, second), this.#secondWindow);
    if (!taken.allowed) {
      // +1 ms: land inside the next second, not on the last millisecond of this one.
      return Math.max(1, second * 1000 + windowMs - this.#now() + 1);
    }
    // Budgets of a minute or an hour are the provider's own count: their calls go at once.
    if (this.#windowS > 1) return 0;
    // The k-th call of a second starts (k-1)/maxRps of the usable second after its start, so the
    // budget reaches the upstream as an even stream rather than a burst at the top of each second.
    const slotAt = second * 1000 + ((taken.used - 1) * (windowMs - SECOND_END_MARGIN_MS)) / this.#perWindow;
    const early = slotAt - this.#now();
    if (early > 0) await sleep(early);
    return 0;
  }

  /** The end of a pause another instance (or this one) recorded, or 0. */
  #sharedPauseUntil(): Promise<number> {
    return this.#counters.pausedUntil(this.#pauseKey);
  }

  async #pause(durationMs: number): Promise<void> {
    const until = this.#now() + durationMs;
    if (until <= this.#pausedUntil) return;
    this.#pausedUntil = until;
    this.#logger?.warn({ pauseMs: durationMs, until: new Date(until).toISOString() }, 'Upstream answered 429: pausing upstream calls of every instance');
    // While the shared store is away the pause holds this instance only (the counters fall back to memory).
    await this.#counters.pauseUntil(this.#pauseKey, until);
  }

  #retryEstimateSeconds(): number {
    const pausedS = (this.#pausedUntil - this.#now()) / 1000;
    const queueS = this.#maxRps > 0 ? this.#queue.length / this.#maxRps : 0;
    return Math.max(1, pausedS, queueS);
  }

  #busy(reason: string, retryAfterSeconds: number, holdReason: 'budget' | 'paused' = 'budget'): UpstreamBusyError {
    return new UpstreamBusyError(`Market data source is busy: ${reason}`, Math.max(1, retryAfterSeconds), holdReason);
  }
}

function sleep(ms: number): Promise<void> {
  // Unref'd: a call waiting for its turn must not keep a shutting-down process alive.
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
