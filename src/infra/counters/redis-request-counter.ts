/**
 * Request quotas with rate-limiter-flexible: one fixed window per caller key, counted in Redis so
 * every instance adds to the same number, with process memory as the insurance limiter while Redis
 * is away (or when none is configured). The same shape as the login throttle.
 */
import type { RedisClient } from '../cache/redis-cache-store.js';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { QuotaUsage, RequestCounter } from '../../domain/ports.js';

/** Every quota counter lives under this prefix: `mds:v1:ratelimit:<caller key>`. */
export const RATE_LIMIT_KEY_PREFIX = 'mds:v1:ratelimit';

export interface RedisRequestCounterOptions {
  /** A connected (or connecting) ioredis client to share counters through; absent = memory only. */
  redis: RedisClient | undefined;
  /** The window length in ms; whole seconds (rate-limiter-flexible counts in seconds). Default 60,000. */
  windowMs?: number;
}

/** Counts requests per key in Redis, or in memory while Redis cannot answer. Never rejects for Redis. */
export class RedisRequestCounter implements RequestCounter {
  readonly windowMs: number;
  readonly #redis: RedisClient | undefined;
  /** One limiter per distinct limit (rate-limiter-flexible fixes `points` per limiter); all share the key space. */
  readonly #limiters = new Map<number, RateLimiterAbstract>();

  constructor(options: RedisRequestCounterOptions) {
    const seconds = Math.max(1, Math.round((options.windowMs ?? 60_000) / 1000));
    this.windowMs = seconds * 1000;
    this.#redis = options.redis;
  }

  /** Counts `points` requests of `key` against `limit` (a whole number of at least 1) per window. */
  async consume(key: string, limit: number, points = 1): Promise<QuotaUsage> {
    try {
      const res = await this.#limiter(limit).consume(key, points);
      return { allowed: true, remaining: res.remainingPoints, resetMs: res.msBeforeNext };
    } catch (err) {
      // A RateLimiterRes rejection is the answer "over the limit"; anything else is a real failure.
      if (err instanceof RateLimiterRes) return { allowed: false, remaining: 0, resetMs: Math.max(0, err.msBeforeNext) };
      throw err;
    }
  }

  #limiter(limit: number): RateLimiterAbstract {
    let limiter = this.#limiters.get(limit);
    if (limiter) return limiter;
    const options = { keyPrefix: RATE_LIMIT_KEY_PREFIX, points: limit, duration: this.windowMs / 1000 };
    const memory = new RateLimiterMemory(options);
    limiter = this.#redis
      ? new RateLimiterRedis({
          ...options,
          storeClient: this.#redis,
          // Straight to memory while Redis is down, instead of waiting for each command to fail.
          rejectIfRedisNotReady: true,
          insuranceLimiter: memory,
          // Once a key is over its limit, this instance refuses it until the window ends without asking
          // Redis again: a flood of refused requests costs no round trips.
          inMemoryBlockOnConsumed: limit + 1,
        })
      : memory;
    this.#limiters.set(limit, limiter);
    return limiter;
  }
}
