/**
 * Why a call to an upstream market-data provider failed, in a closed set the provider router can act
 * on (fail over, pause, set a key aside), and the error that carries it. "Unknown symbol" is never a
 * failure: adapters answer it with `undefined`.
 */
import { DataSourceError } from './errors.js';

/**
 * - `timeout`: no complete answer within the provider's timeout.
 * - `refused`: the connection could not be made or was cut (refused, reset, host not found).
 * - `server_error`: the provider answered 5xx.
 * - `throttled`: the provider answered 429 (per-second or per-minute throttling); `retryAfterSeconds` says when to retry.
 * - `unauthorized`: 401/403. With `keyIndex` the key at that index of the pool was refused (set it aside);
 *   without one the plan or the endpoint was refused (keep the key), or the pool had no usable key.
 * - `limit_reached`: the provider's own "daily limit / quota used up" answer, whatever its status
 *   (Alpha Vantage says it with 200 and a `Note`/`Information` body); `keyIndex` names the key that used it up.
 * - `garbage`: an answer that cannot be used: not parsable, an unexpected shape, or an unexpected status.
 */
export const UPSTREAM_FAILURE_REASONS = ['timeout', 'refused', 'server_error', 'throttled', 'unauthorized', 'limit_reached', 'garbage'] as const;

/** One of `UPSTREAM_FAILURE_REASONS`. */
export type UpstreamFailureReason = (typeof UPSTREAM_FAILURE_REASONS)[number];

/** Options of `UpstreamFailureError`. */
export interface UpstreamFailureOptions {
  /** The provider's short name (`polygon`, `tiingo`, ...). */
  provider?: string;
  /** Index in the provider's key pool of the key the failing call used; never the key itself. */
  keyIndex?: number;
  /** When a retry may succeed, in seconds (the provider's `Retry-After` for `throttled`). */
  retryAfterSeconds?: number;
  cause?: unknown;
}

/**
 * An upstream call failed for `reason`. A `DataSourceError`, so everything that handles upstream
 * failures today handles it unchanged. Its message never holds a key or a URL with a key in it.
 */
export class UpstreamFailureError extends DataSourceError {
  readonly reason: UpstreamFailureReason;
  readonly provider: string | undefined;
  readonly keyIndex: number | undefined;

  constructor(reason: UpstreamFailureReason, message: string, options: UpstreamFailureOptions = {}) {
    super(message, {
      ...(options.cause !== undefined ? { cause: options.cause } : {}),
      ...(options.retryAfterSeconds !== undefined ? { retryAfterSeconds: options.retryAfterSeconds } : {}),
    });
    this.reason = reason;
    this.provider = options.provider;
    this.keyIndex = options.keyIndex;
  }
}

/** The failure reason of `err`, or `undefined` when it is not an upstream failure this module classifies. */
export function upstreamFailureReason(err: unknown): UpstreamFailureReason | undefined {
  return err instanceof UpstreamFailureError ? err.reason : undefined;
}

/**
 * Why a provider was not asked at all: its circuit breaker is open, it is paused after a 429 (every
 * instance honours the pause), or its fleet-wide request budget had no room in time.
 */
export type UpstreamHoldReason = 'breaker_open' | 'paused' | 'budget';

/**
 * A call that never reached the provider (see `UpstreamHoldReason`). A `DataSourceError` with the
 * time when the provider is expected to take calls again, so the router can skip it at no cost and
 * name the soonest recovery.
 */
export class UpstreamHeldBackError extends DataSourceError {
  readonly holdReason: UpstreamHoldReason;

  constructor(holdReason: UpstreamHoldReason, message: string, retryAfterSeconds: number) {
    super(message, { retryAfterSeconds });
    this.holdReason = holdReason;
  }
}
