/**
 * Login throttling with rate-limiter-flexible: failed logins are counted per username and per client
 * address (the caller passes an IPv6 address's /64, see `addressGroup`); past the limit the username
 * (or address) is blocked for a while. Counters live in Redis so every instance sees them, with process memory as insurance when Redis fails or is absent.
 */
import type { Cluster, Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { TooManyRequestsError } from '../../domain/errors.js';
import type { LoginAttempts, Metrics } from '../../domain/ports.js';

/** Every throttle key starts with this (`mds:v1:throttle:user:<name>`, `mds:v1:throttle:ip:<address>`). */
export const THROTTLE_KEY_PREFIX = 'mds:v1:throttle:';

export interface LoginThrottleOptions {
  /** Failed logins allowed per username within `windowMs`; the next attempt is refused (LOGIN_MAX_FAILURES). */
  maxFailures: number;
  /** How long a username or address stays blocked once over its limit, in ms (LOGIN_BLOCK_SECONDS). */
  blockMs: number;
  /** The window failures are counted in, in ms. Default: `blockMs`. */
  windowMs?: number;
  /**
   * Failed logins allowed per client address within `windowMs`. Default: 4 × `maxFailures`, so one
   * address cannot spray many usernames, while a few people behind one NAT mistyping do not lock
   * each other out.
   */
  maxFailuresPerIp?: number;
  /** A connected (or connecting) ioredis client or cluster to share counters through; absent = memory only. */
  redis?: Redis | Cluster | undefined;
  /**
   * Whether the counters should go to Redis now (the cache's own verdict, e.g. "in Redis mode").
   * While false they go straight to memory, so a Redis that half answers (a cluster with a dead
   * master, a failing-over Sentinel master) costs a login no failed round trips. Default: always.
   */
  redisAvailable?: () => boolean;
  /** Told of every Redis failure, so the cache can fall back to memory at once for everyone. */
  onRedisError?: (cause: unknown) => void;
  /** Counts every refused attempt as a rejection of the `login` policy. */
  metrics?: Pick<Metrics, 'rateLimitRejected'>;
}

/** Whole seconds for rate-limiter-flexible, never zero (zero would mean "forever"). */
function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** One counter family (usernames or addresses) with its limit. */
class FailureCounter {
  readonly #shared: RateLimiterAbstract | undefined;
  readonly #memory: RateLimiterAbstract;
  readonly #redisAvailable: () => boolean;
  readonly #onRedisError: (cause: unknown) => void;
  readonly #max: number;
  readonly #blockSeconds: number;

  constructor(options: {
    kind: 'user' | 'ip';
    max: number;
    windowMs: number;
    blockMs: number;
    redis: Redis | Cluster | undefined;
    redisAvailable: () => boolean;
    onRedisError: (cause: unknown) => void;
  }) {
    this.#max = options.max;
    this.#blockSeconds = seconds(options.blockMs);
    const limits = {
      keyPrefix: `${THROTTLE_KEY_PREFIX}${options.kind}`,
      points: options.max,
      duration: seconds(options.windowMs),
      blockDuration: this.#blockSeconds,
    };
    const memory = new RateLimiterMemory(limits);
    this.#memory = memory;
    this.#redisAvailable = options.redisAvailable;
    this.#onRedisError = options.onRedisError;
    this.#shared = options.redis
      ? new RateLimiterRedis({
          ...limits,
          storeClient: options.redis,
          // Straight to memory while Redis is down, instead of waiting for a command to fail.
          rejectIfRedisNotReady: true,
        })
      : undefined;
  }

  /**
   * Runs `op` on the Redis limiter while Redis is available, else (or when it fails) on the memory
   * one. This replaces rate-limiter-flexible's insuranceLimiter, which would hide the failure from
   * `onRedisError`. A `RateLimiterRes` rejection is an answer (over the limit), not a failure.
   */
  async #run<T>(op: (limiter: RateLimiterAbstract) => Promise<T>): Promise<T> {
    if (this.#shared && this.#redisAvailable()) {
      try {
        return await op(this.#shared);
      } catch (err) {
        if (err instanceof RateLimiterRes) throw err;
        this.#onRedisError(err);
      }
    }
    return op(this.#memory);
  }

  /** Milliseconds the key stays blocked, or 0 when it may try. */
  async blockedForMs(key: string): Promise<number> {
    const res = await this.#run((limiter) => limiter.get(key));
    if (!res || res.consumedPoints < this.#max) return 0;
    return res.msBeforeNext > 0 ? res.msBeforeNext : this.#blockSeconds * 1000;
  }

  /** Counts one failure; the one that reaches the limit blocks the key for the block duration. */
  async fail(key: string): Promise<void> {
    let res: RateLimiterRes;
    try {
      res = await this.#run((limiter) => limiter.consume(key));
    } catch (err) {
      // A RateLimiterRes rejection means the key is already over its limit (and blocked): nothing to add.
      if (err instanceof RateLimiterRes) return;
      throw err;
    }
    if (res.consumedPoints === this.#max) await this.#run((limiter) => limiter.block(key, this.#blockSeconds));
  }

  /** Forgets the key's failures. */
  async reset(key: string): Promise<void> {
    await this.#run((limiter) => limiter.delete(key));
  }
}

/** Counts failed logins and refuses attempts from blocked usernames or addresses. */
export class LoginThrottle implements LoginAttempts {
  readonly #users: FailureCounter;
  readonly #ips: FailureCounter;
  readonly #metrics: Pick<Metrics, 'rateLimitRejected'> | undefined;

  constructor(options: LoginThrottleOptions) {
    if (!Number.isInteger(options.maxFailures) || options.maxFailures < 1) {
      throw new RangeError(`maxFailures must be a whole number of at least 1 (got ${options.maxFailures})`);
    }
    const windowMs = options.windowMs ?? options.blockMs;
    const common = {
      windowMs,
      blockMs: options.blockMs,
      redis: options.redis,
      redisAvailable: options.redisAvailable ?? (() => true),
      onRedisError: options.onRedisError ?? (() => undefined),
    };
    this.#users = new FailureCounter({ kind: 'user', max: options.maxFailures, ...common });
    this.#ips = new FailureCounter({ kind: 'ip', max: options.maxFailuresPerIp ?? options.maxFailures * 4, ...common });
    this.#metrics = options.metrics;
  }

  /**
   * Resolves when `username` may try to log in from `ip`. Throws `TooManyRequestsError` (with
   * `retryAfterSeconds`, the longer of the two blocks) when either is blocked.
   */
  async check(username: string, ip: string): Promise<void> {
    const [userMs, ipMs] = await Promise.all([this.#users.blockedForMs(username), this.#ips.blockedForMs(ip)]);
    const waitMs = Math.max(userMs, ipMs);
    if (waitMs > 0) {
      const retryAfterSeconds = Math.ceil(waitMs / 1000);
      this.#metrics?.rateLimitRejected('login');
      throw new TooManyRequestsError(`Too many failed login attempts: retry in ${retryAfterSeconds} seconds`, retryAfterSeconds);
    }
  }

  /** Counts a failed login against both the username and the address. */
  async recordFailure(username: string, ip: string): Promise<void> {
    await Promise.all([this.#users.fail(username), this.#ips.fail(ip)]);
  }

  /**
   * Clears the username's failures after a correct login. The address's count is kept, so one valid
   * account cannot wipe the record of an address that is guessing other users' passwords.
   */
  async recordSuccess(username: string, _ip: string): Promise<void> {
    await this.#users.reset(username);
  }
}
