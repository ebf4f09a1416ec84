/**
 * Login throttling over the shared counters. Every attempt takes its failure slot before the password
 * is checked (so N parallel guesses get at most the limit of 401s), and gives it back when the password
 * was right or the check never ran. Failures are counted three ways:
 *
 * - per username and address group (`keys.throttle.pair`): past LOGIN_MAX_FAILURES that address may no
 *   longer try that username for LOGIN_BLOCK_SECONDS;
 * - per address group (`keys.throttle.ip`): past LOGIN_MAX_FAILURES_PER_ADDRESS the address may try no
 *   username (one address spraying many names);
 * - per username (`keys.throttle.user`), from every address: this never refuses an address that has not
 *   failed for the username, so nobody can lock another person out; it slows every attempt at the
 *   username by a delay that doubles with each failure past LOGIN_MAX_FAILURES (at most `maxDelayMs`),
 *   and past ten times LOGIN_MAX_FAILURES refuses the addresses that have failed for it.
 *
 * The counters are shared by every instance (in memory while the shared store is away).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { TooManyRequestsError } from '../../domain/errors.js';
import { keys } from '../../domain/key-space.js';
import type { CounterWindow, SharedCounters } from '../../domain/ports/counters.js';
import type { LoginAttempts, LoginSlot } from '../../domain/ports/accounts.js';
import type { Metrics } from '../../domain/ports/metrics.js';
import { RedisSharedCounters } from '../counters/redis-shared-counters.js';

export interface LoginThrottleOptions {
  /**
   * Where failures are counted (`keys.throttle.pair`, `.ip`, `.user`);
   * absent = this process alone, in memory (the CLI).
   */
  counters?: SharedCounters | undefined;
  /** Failed logins allowed per username and address within `windowMs`; the next attempt is refused (LOGIN_MAX_FAILURES). */
  maxFailures: number;
  /** How long a username and address (or an address) stays blocked once over its limit, in ms (LOGIN_BLOCK_SECONDS). */
  blockMs: number;
  /** The window failures are counted in, in ms. Default: `blockMs`. */
  windowMs?: number;
  /**
   * Failed logins allowed per client address within `windowMs`. Default: 4 × `maxFailures`, so one
   * address cannot spray many usernames, while a few people behind one NAT mistyping do not lock
   * each other out.
   */
  maxFailuresPerIp?: number;
  /** The longest delay a username's failures from elsewhere add to an attempt, in ms. Default 1000. */
  maxDelayMs?: number;
  /** Counts every refused attempt as a rejection of the `login` policy. */
  metrics?: Pick<Metrics, 'rateLimitRejected'>;
}

/** The delay of the first attempt past the limit, in ms; each further failure doubles it. */
const FIRST_DELAY_MS = 50;

/** A username's failures from every address past this multiple of the limit refuse the addresses that failed for it. */
const USER_BOUND_FACTOR = 10;

/** Counts failed logins before the password is checked and refuses attempts from blocked addresses. */
export class LoginThrottle implements LoginAttempts {
  readonly #counters: SharedCounters;
  readonly #pair: CounterWindow;
  readonly #ip: CounterWindow;
  readonly #user: CounterWindow;
  readonly #maxFailures: number;
  readonly #maxDelayMs: number;
  readonly #metrics: Pick<Metrics, 'rateLimitRejected'> | undefined;

  constructor(options: LoginThrottleOptions) {
    if (!Number.isInteger(options.maxFailures) || options.maxFailures < 1) {
      throw new RangeError(`maxFailures must be a whole number of at least 1 (got ${options.maxFailures})`);
    }
    const windowMs = options.windowMs ?? options.blockMs;
    const { blockMs } = options;
    this.#counters = options.counters ?? new RedisSharedCounters();
    this.#maxFailures = options.maxFailures;
    this.#pair = { limit: options.maxFailures, windowMs, blockMs };
    this.#ip = { limit: options.maxFailuresPerIp ?? options.maxFailures * 4, windowMs, blockMs };
    // Counted, never refused on its own: the bound is applied to addresses that failed (see `begin`).
    this.#user = { limit: Number.MAX_SAFE_INTEGER, windowMs };
    this.#maxDelayMs = options.maxDelayMs ?? 1000;
    this.#metrics = options.metrics;
  }

  /**
   * Takes the failure slot of one attempt of `username` from `ip` (an address group), after the delay
   * the username's failures call for. Throws `TooManyRequestsError` (with `retryAfterSeconds`) when the
   * address, or this address for this username, is blocked; nothing is counted then.
   */
  async begin(username: string, ip: string): Promise<LoginSlot> {
    const ipKey = keys.throttle.ip(ip);
    const pairKey = keys.throttle.pair(username, ip);
    const userKey = keys.throttle.user(username);
    const byIp = await this.#counters.consume(ipKey, this.#ip);
    if (!byIp.allowed) throw this.#refuse(byIp.resetMs, this.#ip);
    const byPair = await this.#counters.consume(pairKey, this.#pair);
    if (!byPair.allowed) {
      await this.#counters.release(ipKey, this.#ip);
      throw this.#refuse(byPair.resetMs, this.#pair);
    }
    const byUser = await this.#counters.consume(userKey, this.#user);
    const failedHere = byPair.used - 1;
    const failedEverywhere = byUser.used - 1;
    if (failedHere > 0 && failedEverywhere >= this.#maxFailures * USER_BOUND_FACTOR) {
      await Promise.all([this.#counters.release(ipKey, this.#ip), this.#counters.release(pairKey, this.#pair), this.#counters.release(userKey, this.#user)]);
      throw this.#refuse(byUser.resetMs, this.#pair);
    }
    const excess = failedEverywhere - this.#maxFailures;
    if (excess >= 0) await sleep(Math.min(this.#maxDelayMs, FIRST_DELAY_MS * 2 ** Math.min(excess, 20)));
    return {
      succeeded: async () => {
        // A right password is no guess: the pair starts afresh, the others get their point back.
        await Promise.all([this.#counters.reset(pairKey, this.#pair), this.#counters.release(ipKey, this.#ip), this.#counters.release(userKey, this.#user)]);
      },
      abandoned: async () => {
        await Promise.all([this.#counters.release(pairKey, this.#pair), this.#counters.release(ipKey, this.#ip), this.#counters.release(userKey, this.#user)]);
      },
    };
  }

  /** Counts one failed login of `username` from `ip` without a check (an attempt already decided). */
  async recordFailure(username: string, ip: string): Promise<void> {
    await Promise.all([
      this.#counters.consume(keys.throttle.pair(username, ip), this.#pair),
      this.#counters.consume(keys.throttle.ip(ip), this.#ip),
      this.#counters.consume(keys.throttle.user(username), this.#user),
    ]);
  }

  /**
   * Resolves when `username` may try from `ip` without waiting for a block; throws
   * `TooManyRequestsError` (the longer of the blocks) otherwise. Counts nothing.
   */
  async check(username: string, ip: string): Promise<void> {
    const [pair, byIp] = await Promise.all([this.#counters.peek(keys.throttle.pair(username, ip), this.#pair), this.#counters.peek(keys.throttle.ip(ip), this.#ip)]);
    const waits = [pair.used >= this.#pair.limit ? pair.resetMs || this.#pair.blockMs! : 0, byIp.used >= this.#ip.limit ? byIp.resetMs || this.#ip.blockMs! : 0];
    const waitMs = Math.max(...waits);
    if (waitMs > 0) throw this.#refuse(waitMs, this.#pair);
  }

  #refuse(resetMs: number, window: CounterWindow): TooManyRequestsError {
    const retryAfterSeconds = Math.max(1, Math.ceil((resetMs > 0 ? resetMs : (window.blockMs ?? 1000)) / 1000));
    this.#metrics?.rateLimitRejected('login');
    return new TooManyRequestsError(`Too many failed login attempts: retry in ${retryAfterSeconds} seconds`, retryAfterSeconds);
  }
}
