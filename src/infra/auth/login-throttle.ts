/**
 * Login throttling with rate-limiter-flexible: failed logins are counted per username and per client
 * address; past the limit the username (or address) is blocked for a while. Counters live in Redis so
 * every instance sees them, with process memory as insurance when Redis fails or is absent.
 */
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { TooManyRequestsError } from '../../errors.js';
import type { Metrics } from '../../ports.js';

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
  /** A connected (or connecting) ioredis client to share counters through; absent = memory only. */
  redis?: Redis | undefined;
  /** Counts every refused attempt as a rejection of the `login` policy. */
  metrics?: Pick<Metrics, 'rateLimitRejected'>;
}

/** Whole seconds for rate-limiter-flexible, never zero (zero would mean "forever"). */
function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** One counter family (usernames or addresses) with its limit. */
class FailureCounter {
  readonly #limiter: RateLimiterAbstract;
  readonly #max: number;
  readonly #blockSeconds: number;

  constructor(options: { kind: 'user' | 'ip'; max: number; windowMs: number; blockMs: number; redis: Redis | undefined }) {
    this.#max = options.max;
    this.#blockSeconds = seconds(options.blockMs);
    const limits = {
      keyPrefix: `${THROTTLE_KEY_PREFIX}${options.kind}`,
      points: options.max,
      duration: seconds(options.windowMs),
      blockDuration: this.#blockSeconds,
    };
    const memory = new RateLimiterMemory(limits);
    this.#limiter = options.redis
      ? new RateLimiterRedis({
          ...limits,
          storeClient: options.redis,
          // Straight to memory while Redis is down, instead of waiting for a command to fail.
          rejectIfRedisNotReady: true,
          insuranceLimiter: memory,
        })
      : memory;
  }

  /** Milliseconds the key stays blocked, or 0 when it may try. */
  async blockedForMs(key: string): Promise<number> {
    const res = await this.#limiter.get(key);
    if (!res || res.consumedPoints < this.#max) return 0;
    return res.msBeforeNext > 0 ? res.msBeforeNext : this.#blockSeconds * 1000;
  }

  /** Counts one failure; the one that reaches the limit blocks the key for the block duration. */
  async fail(key: string): Promise<void> {
    let res: RateLimiterRes;
    try {
      res = await this.#limiter.consume(key);
    } catch (err) {
      // A RateLimiterRes rejection means the key is already over its limit (and blocked): nothing to add.
      if (err instanceof RateLimiterRes) return;
      throw err;
    }
    if (res.consumedPoints === this.#max) await this.#limiter.block(key, this.#blockSeconds);
  }

  /** Forgets the key's failures. */
  async reset(key: string): Promise<void> {
    await this.#limiter.delete(key);
  }
}

/** Counts failed logins and refuses attempts from blocked usernames or addresses. */
export class LoginThrottle {
  readonly #users: FailureCounter;
  readonly #ips: FailureCounter;
  readonly #metrics: Pick<Metrics, 'rateLimitRejected'> | undefined;

  constructor(options: LoginThrottleOptions) {
    if (!Number.isInteger(options.maxFailures) || options.maxFailures < 1) {
      throw new RangeError(`maxFailures must be a whole number of at least 1 (got ${options.maxFailures})`);
    }
    const windowMs = options.windowMs ?? options.blockMs;
    const common = { windowMs, blockMs: options.blockMs, redis: options.redis };
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
