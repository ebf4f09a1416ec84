/**
 * Login throttling over the shared counters: failed logins are counted per username and per client
 * address (the caller passes an IPv6 address's /64, see `addressGroup`); past the limit the username
 * (or address) is blocked for a while. The counters are shared by every instance (in memory while the
 * shared store is away).
 */
import { TooManyRequestsError } from '../../domain/errors.js';
import { keys } from '../../domain/key-space.js';
import type { CounterWindow, SharedCounters } from '../../domain/ports/counters.js';
import type { LoginAttempts } from '../../domain/ports/accounts.js';
import type { Metrics } from '../../domain/ports/metrics.js';
import { RedisSharedCounters } from '../counters/redis-shared-counters.js';

export interface LoginThrottleOptions {
  /**
   * Where failures are counted (`keys.throttle.user`, `keys.throttle.ip`);
   * absent = this process alone, in memory (the CLI).
   */
  counters?: SharedCounters | undefined;
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
  /** Counts every refused attempt as a rejection of the `login` policy. */
  metrics?: Pick<Metrics, 'rateLimitRejected'>;
}

/** One counter family (usernames or addresses) with its limit. */
class FailureCounter {
  readonly #counters: SharedCounters;
  readonly #keyOf: (name: string) => string;
  readonly #window: CounterWindow;

  constructor(counters: SharedCounters, keyOf: (name: string) => string, window: CounterWindow) {
    this.#counters = counters;
    this.#keyOf = keyOf;
    this.#window = window;
  }

  /** Milliseconds the name stays blocked, or 0 when it may try. */
  async blockedForMs(name: string): Promise<number> {
    const usage = await this.#counters.peek(this.#keyOf(name), this.#window);
    if (usage.used < this.#window.limit) return 0;
    return usage.resetMs > 0 ? usage.resetMs : (this.#window.blockMs ?? 0);
  }

  /** Counts one failure; the one that reaches the limit blocks the name for the block duration. */
  async fail(name: string): Promise<void> {
    await this.#counters.consume(this.#keyOf(name), this.#window);
  }

  /** Forgets the name's failures. */
  async reset(name: string): Promise<void> {
    await this.#counters.reset(this.#keyOf(name), this.#window);
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
    const { blockMs } = options;
    const counters = options.counters ?? new RedisSharedCounters();
    this.#users = new FailureCounter(counters, keys.throttle.user, { limit: options.maxFailures, windowMs, blockMs });
    this.#ips = new FailureCounter(counters, keys.throttle.ip, { limit: options.maxFailuresPerIp ?? options.maxFailures * 4, windowMs, blockMs });
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
