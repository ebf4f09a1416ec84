/**
 * `SharedCounters` in Redis while the cache is in Redis mode, in process memory otherwise: the one
 * adapter that counts for quotas, login throttling and upstream budgets, so none of them holds a
 * Redis client. Fixed windows are rate-limiter-flexible's (one Lua call per count in Redis, the same
 * counting in memory); pauses are one key each.
 *
 * Which store answers follows the cache's verdict (`useRedis`), so a Redis that half answers (a
 * cluster with a dead master, a Sentinel master failing over) costs no failed round trips once the
 * cache has seen it. Every Redis call gives up after the command timeout, reports the failure (the
 * cache then falls back for every caller at once) and is answered from memory instead.
 */
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { CounterUsage, CounterWindow, SharedCounters } from '../../domain/ports/counters.js';
import { within } from '../cache/redis-connection.js';
import type { RedisClient } from '../cache/redis-options.js';
import { DAY_MS } from '../../domain/durations.js';

export interface RedisSharedCountersOptions {
  /** The cache's ioredis client (any topology); absent = memory only. */
  redis?: RedisClient | undefined;
  /**
   * Whether counters should go to Redis now: the cache's own verdict ("in Redis mode"). Default:
   * always (every call tries Redis, and a client that is not connected fails at once).
   */
  useRedis?: () => boolean;
  /** Told of every failed or late Redis call, so the cache falls back to memory for everyone. */
  onRedisError?: (cause: unknown) => void;
  /** How long one Redis call may take before memory answers instead, in ms. Default 500 (the cache's). */
  commandTimeoutMs?: number;
  /** Clock in epoch ms (default `Date.now`); used for pauses and UTC days. */
  now?: () => number;
}

/** A day counter's lifetime: its day, plus an hour for clocks that disagree, then it is garbage. */
const DAY_KEY_SECONDS = (DAY_MS + 60 * 60 * 1000) / 1000;

// Raises the pause, never shortens it: a second instance's shorter Retry-After must not end a longer pause.
const RAISE_PAUSE_LUA = `local current = tonumber(redis.call('get', KEYS[1]) or '0')
if tonumber(ARGV[1]) > current then redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
return 0`;

/** Whole seconds for rate-limiter-flexible, never zero (zero means "forever" there). */
function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** A rate-limiter-flexible answer (resolved or the "over the limit" rejection) as a usage. */
function usageOf(res: RateLimiterRes, limit: number, allowed: boolean): CounterUsage {
  // A refusal this instance answers by itself (the key is over its limit until the window ends) carries no count.
  const used = allowed ? res.consumedPoints : Math.max(res.consumedPoints ?? 0, limit + 1);
  return { allowed, used, remaining: allowed ? Math.max(0, res.remainingPoints) : 0, resetMs: Math.max(0, res.msBeforeNext) };
}

/** How long rate-limiter-flexible's in-memory block of `key` still lasts (0 when none); its store limiters have it. */
function inMemoryBlockMs(limiter: RateLimiterAbstract, key: string): number {
  const store = limiter as RateLimiterAbstract & { getKey?(key: string): string; getInMemoryBlockMsBeforeExpire?(rlKey: string): number };
  return store.getInMemoryBlockMsBeforeExpire && store.getKey ? store.getInMemoryBlockMsBeforeExpire(store.getKey(key)) : 0;
}

/** The two limiters (Redis, memory) of one window shape. */
interface Limiters {
  shared: RateLimiterAbstract | undefined;
  memory: RateLimiterAbstract;
  blockSeconds: number | undefined;
}

/** See the module comment. */
export class RedisSharedCounters implements SharedCounters {
  readonly #redis: RedisClient | undefined;
  readonly #useRedis: () => boolean;
  readonly #onRedisError: (cause: unknown) => void;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  /** One pair per window shape (rate-limiter-flexible fixes points and durations per limiter). */
  readonly #limiters = new Map<string, Limiters>();
  readonly #byWindow = new WeakMap<CounterWindow, Limiters>();
  /** Pauses as this instance knows them: a copy of every pause it recorded, the only record in memory mode. */
  readonly #pauses = new Map<string, number>();

  constructor(options: RedisSharedCountersOptions = {}) {
    this.#redis = options.redis;
    this.#useRedis = options.useRedis ?? (() => true);
    this.#onRedisError = options.onRedisError ?? (() => undefined);
    this.#timeoutMs = options.commandTimeoutMs ?? 500;
    this.#now = options.now ?? Date.now;
  }

  async consume(key: string, window: CounterWindow, points = 1): Promise<CounterUsage> {
    const limiters = this.#limitersOf(window);
    // A key this instance already knows to be over its limit is refused here: a flood of refused
    // requests costs neither a Redis call nor the timer that bounds one.
    const blockedMs = limiters.shared === undefined ? 0 : inMemoryBlockMs(limiters.shared, key);
    if (blockedMs > 0 && this.#useRedis()) return this.#dayAware({ allowed: false, used: window.limit + 1, remaining: 0, resetMs: blockedMs }, window);
    let usage = await this.#run(limiters, async (limiter) => {
      try {
        return usageOf(await limiter.consume(key, points), window.limit, true);
      } catch (err) {
        // Rejected with a RateLimiterRes: over the limit, an answer and not a failure.
        if (err instanceof RateLimiterRes) return usageOf(err, window.limit, false);
        throw err;
      }
    });
    if (usage.allowed && limiters.blockSeconds !== undefined && usage.used >= window.limit && usage.used - points < window.limit) {
      // The point that reaches the limit starts the block; later ones find it (and the limiter's own blockDuration).
      const blockSeconds = limiters.blockSeconds;
      const blocked = await this.#run(limiters, (limiter) => limiter.block(key, blockSeconds));
      usage = { ...usage, resetMs: Math.max(0, blocked.msBeforeNext) };
    }
    return this.#dayAware(usage, window);
  }

  async peek(key: string, window: CounterWindow): Promise<CounterUsage> {
    const limiters = this.#limitersOf(window);
    const res = await this.#run(limiters, (limiter) => limiter.get(key));
    if (!res) return { allowed: true, used: 0, remaining: window.limit, resetMs: 0 };
    const used = res.consumedPoints ?? 0;
    const usage = { allowed: used < window.limit, used, remaining: Math.max(0, window.limit - used), resetMs: Math.max(0, res.msBeforeNext) };
    return this.#dayAware(usage, window);
  }

  async reset(key: string, window: CounterWindow): Promise<void> {
    await this.#run(this.#limitersOf(window), (limiter) => limiter.delete(key));
  }

  async release(key: string, window: CounterWindow, points = 1): Promise<void> {
    await this.#run(this.#limitersOf(window), (limiter) => limiter.reward(key, points));
  }

  async pausedUntil(key: string): Promise<number> {
    let until = this.#pauses.get(key) ?? 0;
    const redis = this.#redis;
    if (redis && this.#useRedis()) {
      try {
        const shared = Number((await this.#within(redis.get(key))) ?? 0);
        if (Number.isFinite(shared)) until = Math.max(until, shared);
      } catch (err) {
        this.#onRedisError(err);
      }
    }
    if (until > this.#now()) return until;
    this.#pauses.delete(key);
    return 0;
  }

  async pauseUntil(key: string, untilMs: number): Promise<void> {
    const now = this.#now();
    if (untilMs <= now) return;
    if (untilMs > (this.#pauses.get(key) ?? 0)) this.#pauses.set(key, untilMs);
    const redis = this.#redis;
    if (!redis || !this.#useRedis()) return;
    try {
      await this.#within(redis.eval(RAISE_PAUSE_LUA, 1, key, String(untilMs), String(Math.max(1, Math.ceil(untilMs - now)))));
    } catch (err) {
      this.#onRedisError(err);
    }
  }

  /** A UTC day's count resets at the next midnight, whatever its key's lifetime. */
  #dayAware(usage: CounterUsage, window: CounterWindow): CounterUsage {
    if (window.windowMs !== 'utc-day') return usage;
    const now = this.#now();
    return { ...usage, resetMs: (Math.floor(now / DAY_MS) + 1) * DAY_MS - now };
  }

  #limitersOf(window: CounterWindow): Limiters {
    // Callers keep their window objects: one lookup by identity, no key string per call.
    const known = this.#byWindow.get(window);
    if (known) return known;
    const id = `${window.limit}:${window.windowMs}:${window.blockMs ?? ''}`;
    let limiters = this.#limiters.get(id);
    if (limiters) {
      this.#byWindow.set(window, limiters);
      return limiters;
    }
    if (!Number.isInteger(window.limit) || window.limit < 1) throw new RangeError(`limit must be a whole number of at least 1 (got ${window.limit})`);
    const blockSeconds = window.blockMs === undefined ? undefined : seconds(window.blockMs);
    // Keys come whole from the key space: no prefix of rate-limiter-flexible's own.
    const shape = {
      keyPrefix: '',
      points: window.limit,
      duration: window.windowMs === 'utc-day' ? DAY_KEY_SECONDS : seconds(window.windowMs),
      ...(blockSeconds !== undefined ? { blockDuration: blockSeconds } : {}),
    };
    const shared = this.#redis
      ? new RateLimiterRedis({
          ...shape,
          storeClient: this.#redis,
          // A client that is not connected fails at once instead of waiting for a command to fail.
          rejectIfRedisNotReady: true,
          // Once a key is over its limit, this instance refuses it until the window ends without asking
          // Redis again: a flood of refused requests costs no round trips. Not with a block, which a
          // reset on another instance may lift.
          ...(blockSeconds === undefined ? { inMemoryBlockOnConsumed: window.limit + 1 } : {}),
        })
      : undefined;
    limiters = { shared, memory: new RateLimiterMemory(shape), blockSeconds };
    this.#limiters.set(id, limiters);
    this.#byWindow.set(window, limiters);
    return limiters;
  }

  /**
   * Runs `op` on the Redis limiter while Redis is to be used, else (or when it fails or is late) on
   * the memory one. rate-limiter-flexible's own insurance limiter is not used: it would hide the
   * failure from the cache, and it waits for a command as long as the client lets it.
   */
  async #run<T>(limiters: Limiters, op: (limiter: RateLimiterAbstract) => Promise<T>): Promise<T> {
    if (limiters.shared && this.#useRedis()) {
      try {
        return await this.#within(op(limiters.shared));
      } catch (err) {
        this.#onRedisError(err);
      }
    }
    return op(limiters.memory);
  }

  /**
   * `promise`, or a rejection once the command timeout has passed: a cluster call may be redirected
   * and retried across nodes, and a script may be sent twice (EVALSHA, then EVAL), each with a
   * timeout of its own; the caller waits for one. A call that answers later has been answered from
   * memory already; its outcome is dropped.
   */
  #within<T>(promise: Promise<T>): Promise<T> {
    return within(promise, this.#timeoutMs, 'Redis counter call');
  }
}
