/**
 * A circuit breaker and a health record around any market-data provider: a dead upstream is not
 * hammered, callers get a `DataSourceError` at once while the breaker is open, and the admin status
 * can say whether the source answered its last request.
 */
import CircuitBreaker from 'opossum';
import type { components } from '../../generated/api.js';
import { DataSourceError } from '../../domain/errors.js';
import { UpstreamHeldBackError } from '../../domain/upstream-failure.js';
import type { Logger } from '../logger.js';
import type { History, HistoryQuery, MarketDataProvider, Quote, SearchResult } from '../../domain/ports/market-data.js';
import type { Metrics, UpstreamOutcome } from '../../domain/ports/metrics.js';
import { UpstreamBusyError, UpstreamRateLimitedError, UpstreamRequestRefusedError } from './upstream-guard-errors.js';
import type { UpstreamGuard } from './upstream-guard.js';

/** The provider's health as the admin status reports it. */
export type DatasourceHealth = components['schemas']['DatasourceStatus'];

/** The breaker's state: `closed` lets calls through, `open` fails fast, `half-open` lets one probe through. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** A provider that may declare it needs no network (and so is healthy before its first call). */
export type WrappableMarketDataProvider = MarketDataProvider & { readonly local?: boolean };

/** Options of `ResilientMarketDataProvider`. */
export interface ResilientMarketDataProviderOptions {
  /**
   * The longest the inner provider may take by itself, in milliseconds (its request timeout); the
   * breaker gives up `timeoutMarginMs` later. The guard's wait for admission comes before and is not in it.
   */
  timeoutMs: number;
  /**
   * What admits each call to the upstream (its fleet-wide budget, concurrency cap and 429 pause).
   * Admission happens before the breaker is fired, so a call the guard refuses is no call of the
   * breaker's at all: neither a failure nor a success.
   */
  guard?: Pick<UpstreamGuard, 'run'>;
  /** Extra time before the breaker abandons a call the provider did not end itself (default 1000 ms). */
  timeoutMarginMs?: number;
  /** Failure percentage within the rolling window that opens the breaker (default 50). */
  errorThresholdPercentage?: number;
  /** Calls within the rolling window before the failure percentage counts (default 3). */
  volumeThreshold?: number;
  /** How long the breaker stays open before letting a probe through, in milliseconds (default 10 000). */
  resetTimeoutMs?: number;
  /**
   * Length of the statistics window in milliseconds (default 60 000). Upstream calls are rare (the
   * cache and single-flight absorb traffic), so a short window would never gather `volumeThreshold` calls.
   */
  rollingWindowMs?: number;
  /** Where breaker transitions and health changes are logged, once per change. */
  logger?: Logger;
  /** Called after every breaker transition. */
  onStateChange?: (state: BreakerState) => void;
  /** Times every call and counts its outcome, refusals by the open breaker included. */
  metrics?: Pick<Metrics, 'upstreamRequest'>;
  /** Clock in epoch milliseconds (default `Date.now`). */
  now?: () => number;
}

/** Thrown instead of calling the provider while the breaker is open. */
export class CircuitOpenError extends UpstreamHeldBackError {
  constructor(retryAfterSeconds: number) {
    super('breaker_open', 'Market data source is failing; circuit breaker is open', retryAfterSeconds);
  }
}

/**
 * Decorates a `MarketDataProvider` with an opossum circuit breaker and health tracking. One breaker
 * covers all three methods: they share one upstream, and a dead upstream is dead for all of them.
 *
 * - Closed: calls go to the inner provider. Once `volumeThreshold` calls within the rolling window
 *   have failed more than `errorThresholdPercentage` of the time, the breaker opens.
 * - Open: every method rejects with `CircuitOpenError` (a `DataSourceError` whose
 *   `retryAfterSeconds` is the time left until the next probe) without calling the provider.
 * - Half-open (after `resetTimeoutMs`): one call goes through; success closes the breaker, failure
 *   opens it again. Concurrent calls meanwhile fail fast.
 *
 * What counts: an unknown symbol (`undefined`) and an empty search are answers, so successes. Throttling
 * is not an outage and never counts as a failure. A call the upstream guard refused
 * (`UpstreamBusyError`) never reached the upstream, so it is not counted at all: the guard admits a
 * call before the breaker is fired (and a breaker that would refuse the call, open or half-open with
 * its probe out, is asked first, so it fails fast without spending budget). It must not count as a
 * success either: opossum counts an error its filter ignores as a success, and with every slot held
 * by a hanging upstream, each refusal of the calls behind them would lower the failure rate until the
 * breaker never opened. A 429 (`UpstreamRateLimitedError`) is
 * answered by the guard's fleet-wide pause; opening the breaker as well would only stretch the outage,
 * so the filter ignores it (as a success, so one that ends a half-open probe closes the breaker; the
 * next call that reaches the upstream is then the real probe).
 *
 * Health: `healthy` is true when the last call that reached the provider succeeded, false after a
 * failure until the next success. Before the first call it is true only for a provider that declares
 * itself `local` (the simulated one needs no network); a remote provider is not called healthy
 * before it has answered. `last_error` is cleared by a success. A 429 makes the source unhealthy
 * (it is not serving us); a guard refusal changes nothing (the upstream was not asked).
 */
export class ResilientMarketDataProvider implements MarketDataProvider {
  readonly name: string;

  private readonly breaker: CircuitBreaker<[() => Promise<unknown>], unknown>;
  private readonly resetTimeoutMs: number;
  private readonly breakerTimeoutMs: number;
  private readonly logger: Logger | undefined;
  private readonly now: () => number;
  private readonly metrics: Pick<Metrics, 'upstreamRequest'> | undefined;
  private readonly guard: Pick<UpstreamGuard, 'run'> | undefined;
  private healthy: boolean;
  private lastSuccessAt: string | null = null;
  private lastError: string | null = null;
  private openedAt = 0;

  constructor(
    private readonly inner: WrappableMarketDataProvider,
    options: ResilientMarketDataProviderOptions,
  ) {
    this.name = inner.name;
    this.resetTimeoutMs = options.resetTimeoutMs ?? 10_000;
    this.logger = options.logger;
    this.now = options.now ?? Date.now;
    this.metrics = options.metrics;
    this.guard = options.guard;
    this.healthy = inner.local === true;
    this.breakerTimeoutMs = options.timeoutMs + (options.timeoutMarginMs ?? 1000);

    this.breaker = new CircuitBreaker((call: () => Promise<unknown>) => this.callInner(call), {
      name: `market-data-${inner.name}`,
      // Not the upstream's own failures: throttled calls, and a request the upstream refused alone.
      errorFilter: (err: unknown) => err instanceof UpstreamRateLimitedError || err instanceof UpstreamRequestRefusedError,
      timeout: this.breakerTimeoutMs,
      errorThresholdPercentage: options.errorThresholdPercentage ?? 50,
      volumeThreshold: options.volumeThreshold ?? 3,
      resetTimeout: this.resetTimeoutMs,
      rollingCountTimeout: options.rollingWindowMs ?? 60_000,
    });

    const transition = (state: BreakerState, log: () => void) => {
      log();
      options.onStateChange?.(state);
    };
    this.breaker.on('open', () => {
      this.openedAt = this.now();
      transition('open', () =>
        this.logger?.warn(
          { provider: this.name, resetTimeoutMs: this.resetTimeoutMs },
          'Market data circuit breaker opened: failing fast until the next probe',
        ),
      );
    });
    this.breaker.on('halfOpen', () =>
      transition('half-open', () => this.logger?.info({ provider: this.name }, 'Market data circuit breaker half-open: probing the source')),
    );
    this.breaker.on('close', () =>
      transition('closed', () => this.logger?.info({ provider: this.name }, 'Market data circuit breaker closed: the source answers again')),
    );
  }

  /**
   * The inner provider's quote. Rejects only with `DataSourceError`: the provider's own, one for a
   * call the breaker abandoned after its timeout, or `CircuitOpenError` while the breaker is open.
   */
  getQuote(symbol: string): Promise<Quote | undefined> {
    return this.fire(() => this.inner.getQuote(symbol));
  }

  /** The inner provider's history; rejects like `getQuote`. */
  getHistory(query: HistoryQuery): Promise<History | undefined> {
    return this.fire(() => this.inner.getHistory(query));
  }

  /** The inner provider's search results; rejects like `getQuote`. */
  search(query: string, limit: number): Promise<SearchResult[]> {
    return this.fire(() => this.inner.search(query, limit));
  }

  /** The source's health for the admin status and the health endpoint. */
  health(): DatasourceHealth {
    return { provider: this.name, healthy: this.healthy, last_success_at: this.lastSuccessAt, last_error: this.lastError };
  }

  /** The breaker's current state. */
  get state(): BreakerState {
    if (this.breaker.opened) return 'open';
    if (this.breaker.halfOpen) return 'half-open';
    return 'closed';
  }

  /** Stops the breaker's timers; later calls reject with `DataSourceError`. Call on shutdown. */
  close(): void {
    this.breaker.shutdown();
  }

  private async fire<T>(call: () => Promise<T>): Promise<T> {
    const startedAt = performance.now();
    let value: T;
    const attempt = () => this.breaker.fire(call) as Promise<T>;
    try {
      // A breaker that would refuse the call (open, or half-open with its probe out) answers before
      // admission: failing fast spends none of the upstream's budget.
      const refusesNow = !this.breaker.closed && !this.breaker.pendingClose;
      value = this.guard === undefined || refusesNow ? await attempt() : await this.guard.run(attempt);
    } catch (err) {
      this.metrics?.upstreamRequest(outcomeOf(err), (performance.now() - startedAt) / 1000);
      throw this.onFailure(err);
    }
    this.metrics?.upstreamRequest('success', (performance.now() - startedAt) / 1000);
    this.onSuccess();
    return value;
  }

  private async callInner(call: () => Promise<unknown>): Promise<unknown> {
    try {
      return await call();
    } catch (err) {
      if (err instanceof DataSourceError) throw err;
      // The port promises DataSourceError; anything else is a provider bug, but still an outage.
      throw new DataSourceError(`Market data provider '${this.name}' failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }

  private onSuccess(): void {
    if (!this.healthy && this.lastError !== null) this.logger?.info({ provider: this.name }, 'Market data source recovered');
    this.healthy = true;
    this.lastSuccessAt = new Date(this.now()).toISOString();
    this.lastError = null;
  }

  private onFailure(err: unknown): DataSourceError {
    if (isBreakerError(err, 'EOPENBREAKER')) {
      const remainingMs = this.openedAt + this.resetTimeoutMs - this.now();
      return new CircuitOpenError(Math.max(1, remainingMs / 1000));
    }
    if (isBreakerError(err, 'ESHUTDOWN')) return new DataSourceError('Market data source is shut down', { cause: err });
    if (err instanceof UpstreamBusyError) {
      this.logger?.debug({ provider: this.name, err: err.message }, 'Market data call refused by the upstream guard');
      return err;
    }

    const error =
      err instanceof DataSourceError
        ? err
        : new DataSourceError(
            isBreakerError(err, 'ETIMEDOUT')
              ? `Market data provider '${this.name}' did not answer within ${this.breakerTimeoutMs} ms`
              : `Market data provider '${this.name}' failed: ${err instanceof Error ? err.message : String(err)}`,
            { cause: err },
          );
    if (this.healthy || this.lastError === null) {
      this.logger?.warn({ provider: this.name, err: error.message }, 'Market data source failed');
    } else {
      this.logger?.debug({ provider: this.name, err: error.message }, 'Market data source still failing');
    }
    this.healthy = false;
    this.lastError = error.message;
    return error;
  }
}

function outcomeOf(err: unknown): UpstreamOutcome {
  if (isBreakerError(err, 'EOPENBREAKER') || isBreakerError(err, 'ESHUTDOWN') || err instanceof UpstreamBusyError) return 'rejected';
  return isBreakerError(err, 'ETIMEDOUT') ? 'timeout' : 'failure';
}

function isBreakerError(err: unknown, code: string): boolean {
  return err instanceof Error && CircuitBreaker.isOurError(err) && (err as Error & { code?: string }).code === code;
}
