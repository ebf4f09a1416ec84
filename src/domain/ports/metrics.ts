/**
 * The metrics ports: what the services record and what a scrape reads.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
/** What a cache read answered with: the cached entry, a fresh fetch, or an expired copy standing in for a failed upstream. */
export type CacheResult = 'hit' | 'miss' | 'stale';

/**
 * How a call to the upstream provider ended: answered, failed, abandoned by the circuit breaker's
 * timeout, or refused by the open breaker without being sent.
 */
export type UpstreamOutcome = 'success' | 'failure' | 'timeout' | 'rejected';

/** The route of a request that matched no operation of the contract: one fixed label, never the raw URL. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * Operational measurements. Every method is cheap, synchronous and never throws, so callers on the
 * hot path record without awaiting or guarding. Label values must come from a small fixed set
 * (route templates, policy names): never a raw URL, a username or a key.
 */
export interface Metrics {
  /** One HTTP response: `route` is the contract's path template, or `UNMATCHED_ROUTE`, `seconds` from arrival to the last byte handed to the socket. */
  httpRequest(method: string, route: string, status: number, seconds: number): void;
  /** One read of a cached representation; `kind` names what was read (`indices`, ...). */
  cacheRequest(kind: string, result: CacheResult): void;
  /** One call to the upstream provider and how long it took, in seconds. */
  upstreamRequest(outcome: UpstreamOutcome, seconds: number): void;
  /**
   * One read the provider router put to `provider` and how it ended: `success`, `unknown` (it does not
   * know the symbol), or the reason it could not answer (`timeout`, `throttled`, `breaker_open`, ...).
   */
  upstreamCall(provider: string, outcome: string): void;
  /** A read `from` could not answer moved on to `to` (`none` when no provider was left). */
  failover(from: string, to: string): void;
  /** One request refused by the rate limit named `policy` (`login`, ...). */
  rateLimitRejected(policy: string): void;
  /** A stream client connected (`+1`) or went away (`-1`). */
  streamClients(delta: number): void;
  /** One event written to a stream client. */
  streamEvent(): void;
  /**
   * One refresh run of the live-quote streams' subscribed symbols: `poll` when it loaded any of them
   * from the upstream ahead of expiry, `push` when connected push upstreams priced them all and it
   * only compared what the cache holds.
   */
  streamRefresh(mode: 'poll' | 'push'): void;
}

/** Metrics that record nothing: the default of every service, and what runs when metrics are off. */
export const NO_METRICS: Metrics = Object.freeze({
  httpRequest() {},
  cacheRequest() {},
  upstreamRequest() {},
  upstreamCall() {},
  failover() {},
  rateLimitRejected() {},
  streamClients() {},
  streamEvent() {},
  streamRefresh() {},
});

/** The text a scrape answers and its content type. */
export interface MetricsSource {
  contentType: string;
  /** The metrics in the Prometheus text format. Rejects when a cluster worker does not answer in time. */
  render(): Promise<string>;
}
