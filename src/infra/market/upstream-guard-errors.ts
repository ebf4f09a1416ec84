/**
 * The two ways an upstream call can be held back for throttling, told apart from real outages so the
 * circuit breaker does not count them: the upstream said 429, or our own budget had no room in time.
 */
import { UpstreamFailureError, UpstreamHeldBackError } from '../../domain/upstream-failure.js';

/**
 * The upstream answered 429; `retryAfterSeconds` is its `Retry-After` (5 s when it sent none). An
 * upstream failure of reason `throttled`, so the provider router classifies it like any other.
 */
export class UpstreamRateLimitedError extends UpstreamFailureError {
  /** True when the upstream sent a usable `Retry-After`. */
  readonly retryAfterGiven: boolean;

  constructor(message: string, retryAfterSeconds: number | undefined, options?: { cause?: unknown; provider?: string; keyIndex?: number }) {
    super('throttled', message, { ...options, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) });
    this.retryAfterGiven = retryAfterSeconds !== undefined;
  }
}

/**
 * The call never reached the upstream: the fleet's request budget, the concurrency cap or a pause
 * after a 429 left no room within the wait bound. `retryAfterSeconds` is when room is expected.
 */
export class UpstreamBusyError extends UpstreamHeldBackError {
  /** `holdReason`: `paused` when a pause after a 429 held the call, `budget` otherwise. */
  constructor(message: string, retryAfterSeconds: number, holdReason: 'budget' | 'paused' = 'budget') {
    super(holdReason, message, retryAfterSeconds);
  }
}

/**
 * The upstream refused this one request (a 4xx other than 401, 403 and 429): an unusable answer about
 * what was asked, not an outage. An upstream failure of reason `garbage` (the router fails over as
 * before), which the circuit breaker does not count, so one caller's symbol cannot open it for everyone.
 */
export class UpstreamRequestRefusedError extends UpstreamFailureError {
  constructor(message: string, options?: { cause?: unknown; provider?: string; keyIndex?: number }) {
    super('garbage', message, options);
  }
}
