/**
 * The `Metrics` port over prom-client: one registry per service (so tests can run several services in
 * one process), Node's default metrics, and the service's own counters, histograms and gauges. Under
 * `serve --workers N` each worker hands its registry to the primary, which sums them into one view.
 */
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { CacheResult, Metrics, MetricsSource, UpstreamOutcome } from '../../domain/ports/metrics.js';
import { SeriesHistogram } from './series-histogram.js';

/**
 * prom-client's defaults that `promtool check metrics` rejects: gauges named `_total`. Each one is the
 * sum of a per-type gauge that stays (`nodejs_active_handles{type}` and so on), so dropping them loses
 * nothing: `sum(nodejs_active_handles)` is the same number.
 */
const DROPPED_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** The methods of RFC 9110 and PATCH; any other becomes `_OTHER`, so a client cannot invent label values. */
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE']);

/** From a cached read in memory (well under a millisecond) to a request that waits out a slow upstream. */
const HTTP_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Upstream calls take tens of milliseconds to the configured timeout (at most 60 s). */
const UPSTREAM_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

const CACHE_MODES = ['redis', 'memory'] as const;
const BREAKER_STATES = ['closed', 'open', 'half-open'] as const;

/** Current states read at scrape time, so a scrape never shows a stale or missed transition. */
export interface WatchedState {
  /** Which store the cache uses right now. */
  cacheMode?: () => (typeof CACHE_MODES)[number];
  /** The upstream circuit breaker's state right now. */
  breakerState?: () => (typeof BREAKER_STATES)[number];
}


/** Prometheus metrics of one service process. */
export class PrometheusMetrics implements Metrics, MetricsSource {
  readonly #registry = new Registry();
  readonly #watched: WatchedState = {};
  readonly #http: SeriesHistogram;
  /** Cache reads by kind, then result, counted in plain numbers on the hot path and handed to prom-client at scrape time. */
  readonly #cacheReads = new Map<string, Map<CacheResult, { labels: { kind: string; result: CacheResult }; count: number }>>();
  readonly #upstream: Histogram<'outcome'>;
  readonly #rateLimited: Counter<'policy'>;
  readonly #providerCalls: Counter<'provider' | 'outcome'>;
  readonly #failovers: Counter<'from' | 'to'>;
  readonly #streamClients: Gauge;
  readonly #streamEvents: Counter;
  readonly #streamRefreshes: Counter<'mode'>;
  readonly #dataIssues: Counter<'rule' | 'action' | 'provider'>;

  constructor() {
    const registers = [this.#registry];
    collectDefaultMetrics({ register: this.#registry });
    for (const name of DROPPED_DEFAULTS) this.#registry.removeSingleMetric(name);

    this.#http = new SeriesHistogram(
      'http_server_request_duration_seconds',
      'Duration of HTTP server requests, by method, route template and status (fast path included).',
      HTTP_BUCKETS_S,
      ['http_request_method', 'http_route', 'http_response_status_code'],
    );
    // The registry formats any metric with prom-client's `get()` shape; its types list only its own classes.
    this.#registry.registerMetric(this.#http as unknown as Histogram);
    const cacheReads = this.#cacheReads;
    new Counter({
      name: 'mds_cache_requests_total',
      help: 'Reads of cached representations, by kind (indices, ...) and result (hit, miss, stale).',
      labelNames: ['kind', 'result'],
      registers,
      collect() {
        this.reset();
        for (const results of cacheReads.values()) for (const { labels, count } of results.values()) this.inc(labels, count);
      },
    });
    this.#upstream = new Histogram({
      name: 'mds_upstream_request_duration_seconds',
      help: 'Calls to the market-data provider, by outcome (success, failure, timeout, rejected by the open breaker).',
      labelNames: ['outcome'],
      buckets: UPSTREAM_BUCKETS_S,
      registers,
    });
    this.#rateLimited = new Counter({
      name: 'mds_rate_limit_rejections_total',
      help: 'Requests refused with 429 by a rate limit, by policy.',
      labelNames: ['policy'],
      registers,
    });
    this.#providerCalls = new Counter({
      name: 'mds_upstream_calls_total',
      help: 'Reads the provider router put to each provider, by provider and outcome (success, unknown, timeout, refused, server_error, throttled, unauthorized, limit_reached, garbage, breaker_open, paused, budget, error).',
      labelNames: ['provider', 'outcome'],
      registers,
    });
    this.#failovers = new Counter({
      name: 'mds_upstream_failovers_total',
      help: 'Reads one provider could not answer that moved on to the next, by from and to provider (to="none" when none was left).',
      labelNames: ['from', 'to'],
      registers,
    });
    this.#streamClients = new Gauge({ name: 'mds_stream_clients', help: 'Connected stream (Server-Sent Events) clients.', registers });
    this.#streamEvents = new Counter({ name: 'mds_stream_events_total', help: 'Events written to stream clients.', registers });
    this.#streamRefreshes = new Counter({
      name: 'mds_stream_refresh_runs_total',
      help: 'Refresh runs of the streamed symbols, by mode: poll (loaded some from the upstream ahead of expiry) or push (connected push upstreams priced them all: only the cache was compared).',
      labelNames: ['mode'],
      registers,
    });
    this.#dataIssues = new Counter({
      name: 'mds_data_issues_total',
      help: 'Bars of upstream history answers the data-quality checks repaired, dropped or suspect, by rule, action and the provider that gave them.',
      labelNames: ['rule', 'action', 'provider'],
      registers,
    });

    const watched = this.#watched;
    new Gauge({
      name: 'mds_cache_mode',
      help: 'Which store the cache uses: 1 for the current mode (redis or memory), else 0; summed over workers.',
      labelNames: ['mode'],
      registers,
      collect() {
        const current = watched.cacheMode?.();
        if (current === undefined) return;
        for (const mode of CACHE_MODES) this.set({ mode }, mode === current ? 1 : 0);
      },
    });
    new Gauge({
      name: 'mds_upstream_breaker_state',
      help: 'The upstream circuit breaker: 1 for the current state (closed, open, half-open), else 0; summed over workers.',
      labelNames: ['state'],
      registers,
      collect() {
        const current = watched.breakerState?.();
        if (current === undefined) return;
        for (const state of BREAKER_STATES) this.set({ state }, state === current ? 1 : 0);
      },
    });
    // Summed by the primary under `--workers N`, it tells how many workers answered this scrape.
    new Gauge({ name: 'mds_processes', help: 'Service processes whose measurements this scrape includes.', registers }).set(1);
  }

  /** Registers the state read at every scrape (the cache mode, the breaker state). */
  watch(state: WatchedState): void {
    Object.assign(this.#watched, state);
  }

  get contentType(): string {
    return this.#registry.contentType;
  }

  render(): Promise<string> {
    return this.#registry.metrics();
  }

  /** In a cluster worker: answer the primary's scrapes with this registry (see `clusterMetricsSource`). */
  shareWithClusterPrimary(): void {
    answerClusterScrapes();
    AggregatorRegistry.setRegistries([this.#registry]);
  }

  httpRequest(method: string, route: string, status: number, seconds: number): void {
    this.#http.observe(seconds, KNOWN_METHODS.has(method) ? method : '_OTHER', route, status);
  }

  cacheRequest(kind: string, result: CacheResult): void {
    let results = this.#cacheReads.get(kind);
    if (results === undefined) this.#cacheReads.set(kind, (results = new Map()));
    const entry = results.get(result);
    if (entry) entry.count += 1;
    else results.set(result, { labels: { kind, result }, count: 1 });
  }

  upstreamRequest(outcome: UpstreamOutcome, seconds: number): void {
    this.#upstream.observe({ outcome }, seconds);
  }

  upstreamCall(provider: string, outcome: string): void {
    this.#providerCalls.inc({ provider, outcome });
  }

  failover(from: string, to: string): void {
    this.#failovers.inc({ from, to });
  }

  /** One finding of the data-quality checks (DESIGN 20). */
  dataIssue(rule: string, action: string, provider: string): void {
    this.#dataIssues.inc({ rule, action, provider });
  }

  rateLimitRejected(policy: string): void {
    this.#rateLimited.inc({ policy });
  }

  streamClients(delta: number): void {
    this.#streamClients.inc(delta);
  }

  streamEvent(): void {
    this.#streamEvents.inc();
  }

  streamRefresh(mode: 'poll' | 'push'): void {
    this.#streamRefreshes.inc({ mode });
  }
}

/**
 * In a cluster worker, as early as possible: answer the primary's scrapes from now on (with nothing
 * until `shareWithClusterPrimary`). A worker that does not answer makes the whole scrape wait for
 * prom-client's 5 s timeout and fail, which is what a starting or restarted worker would do.
 */
export function answerClusterScrapes(): void {
  // prom-client installs its worker-side listener when the first AggregatorRegistry is made.
  new AggregatorRegistry();
}

/**
 * For the primary of `serve --workers N`: every scrape asks each worker for its registry and answers
 * their sum (counters and histograms add up; prom-client's defaults say how their gauges combine).
 */
export function clusterMetricsSource(): MetricsSource {
  const aggregator = new AggregatorRegistry();
  return { contentType: aggregator.contentType, render: () => aggregator.clusterMetrics() };
}
