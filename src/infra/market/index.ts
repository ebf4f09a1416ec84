/**
 * Builds the configured market-data provider: the real provider, behind the upstream guard (yahoo
 * only), behind the circuit breaker and health record.
 */
import type { Config } from '../../config.js';
import type { Logger } from '../logger.js';
import type { SharedCounters } from '../../domain/ports.js';
import { RedisSharedCounters } from '../counters/redis-shared-counters.js';
import { createProviderAdapter } from './provider-adapters.js';
import { ResilientMarketDataProvider, type ResilientMarketDataProviderOptions } from './resilient-market-data-provider.js';
import { SimulatedMarketDataProvider } from './simulated-market-data-provider.js';
import { GuardedMarketDataProvider, UpstreamGuard } from './upstream-guard.js';
import { YahooMarketDataProvider } from './yahoo-market-data-provider.js';

export { CircuitOpenError, ResilientMarketDataProvider } from './resilient-market-data-provider.js';
export type { BreakerState, DatasourceHealth, ResilientMarketDataProviderOptions } from './resilient-market-data-provider.js';
export { SIMULATED_DIRECTORY, SimulatedMarketDataProvider } from './simulated-market-data-provider.js';
export type { SimulatedInstrument, SimulatedMarketDataProviderOptions } from './simulated-market-data-provider.js';
export { GuardedMarketDataProvider, UpstreamBusyError, UpstreamGuard, UpstreamRateLimitedError } from './upstream-guard.js';
export type { UpstreamGuardOptions } from './upstream-guard.js';
export { DEFAULT_USER_AGENT, YahooMarketDataProvider } from './yahoo-market-data-provider.js';
export { asProviderAdapter, createProviderAdapter, SIMULATED_CAPABILITIES, YAHOO_CAPABILITIES } from './provider-adapters.js';
export type { ProviderAdapterOptions } from './provider-adapters.js';
export { KeyPool, nextUtcMidnight } from './key-pool.js';
export { AlphaVantageMarketDataProvider } from './alpha-vantage-market-data-provider.js';
export { EcbMarketDataProvider } from './ecb-market-data-provider.js';
export { FmpMarketDataProvider } from './fmp-market-data-provider.js';
export { PolygonMarketDataProvider } from './polygon-market-data-provider.js';
export { TiingoMarketDataProvider } from './tiingo-market-data-provider.js';
export type { YahooMarketDataProviderOptions } from './yahoo-market-data-provider.js';

/** The part of the configuration the market-data adapters read. */
export type MarketConfig = Pick<Config['market'], 'provider' | 'baseUrl' | 'timeoutMs'> &
  Partial<Pick<Config['market'], 'breakerResetMs' | 'upstreamMaxRps' | 'upstreamMaxConcurrency' | 'providerSettings'>>;

/** Defaults of the upstream guard when the configuration leaves them out (as `loadConfig` does not). */
const GUARD_DEFAULTS = { maxRps: 5, maxConcurrency: 4 } as const;

/** Knobs for tests and special deployments; production uses the defaults. */
export interface CreateMarketDataProviderOptions extends Omit<ResilientMarketDataProviderOptions, 'timeoutMs' | 'logger'> {
  /** The fetch implementation the yahoo provider uses (global `fetch` by default). */
  fetch?: typeof fetch;
  /** Where every instance shares the upstream budget and pauses (the service's one `SharedCounters`); absent = this instance alone, in memory. */
  counters?: SharedCounters | undefined;
  /** How long a yahoo call may wait for the upstream budget, in ms (default: `market.timeoutMs`). */
  upstreamMaxWaitMs?: number;
}

/**
 * The provider named by MARKET_DATA_PROVIDER, behind a `ResilientMarketDataProvider`.
 *
 * yahoo: `YahooMarketDataProvider` -> `GuardedMarketDataProvider` (budget, concurrency cap, 429
 * pause) -> breaker. The guard sits inside the breaker so an open breaker fails fast without
 * spending budget; the breaker ignores the guard's refusals and 429s (see
 * `ResilientMarketDataProvider`), and its timeout covers the guard's wait plus the request's.
 *
 * simulated: no guard (no upstream to protect). It logs that the data is demo data and how to switch
 * to live quotes.
 */
export function createMarketDataProvider(
  market: MarketConfig,
  logger: Logger,
  options: CreateMarketDataProviderOptions = {},
): ResilientMarketDataProvider {
  const { fetch: fetchImpl, counters, upstreamMaxWaitMs, ...rest } = options;
  const breaker = { ...(market.breakerResetMs !== undefined ? { resetTimeoutMs: market.breakerResetMs } : {}), ...rest };
  if (market.provider === 'yahoo') {
    const maxWaitMs = upstreamMaxWaitMs ?? market.timeoutMs;
    const maxRps = market.upstreamMaxRps ?? GUARD_DEFAULTS.maxRps;
    const maxConcurrency = market.upstreamMaxConcurrency ?? GUARD_DEFAULTS.maxConcurrency;
    logger.info(
      { provider: 'yahoo', baseUrl: market.baseUrl, timeoutMs: market.timeoutMs, maxRps, maxConcurrency, sharedBudget: counters !== undefined },
      'Market data: live quotes from Yahoo Finance',
    );
    const yahoo = new YahooMarketDataProvider({
      baseUrl: market.baseUrl,
      timeoutMs: market.timeoutMs,
      ...(fetchImpl ? { fetch: fetchImpl } : {}),
    });
    const guard = new UpstreamGuard({ name: 'yahoo', maxRps, maxConcurrency, maxWaitMs, counters: counters ?? new RedisSharedCounters(), logger });
    return new ResilientMarketDataProvider(new GuardedMarketDataProvider(yahoo, guard), {
      ...breaker,
      timeoutMs: market.timeoutMs + maxWaitMs,
      logger,
    });
  }

  if (market.provider !== 'simulated') {
    // Polygon, Alpha Vantage, Tiingo, FMP or ECB first in the chain: that one provider behind the
    // breaker, until the provider router serves the whole chain.
    const settings = market.providerSettings?.[market.provider];
    if (!settings) throw new Error(`No settings for market-data provider '${market.provider}'`);
    logger.info({ provider: market.provider, baseUrl: settings.baseUrl, timeoutMs: settings.timeoutMs, keys: settings.apiKeys.length }, `Market data: live data from ${market.provider}`);
    const adapter = createProviderAdapter(market.provider, settings, fetchImpl ? { fetch: fetchImpl } : {});
    return new ResilientMarketDataProvider(adapter, { ...breaker, timeoutMs: settings.timeoutMs, logger });
  }

  logger.info(
    { provider: 'simulated' },
    'Market data: SIMULATED demo data (a deterministic random walk, not real quotes); set MARKET_DATA_PROVIDER=yahoo for live quotes from Yahoo Finance',
  );
  const simulated = new SimulatedMarketDataProvider({});
  return new ResilientMarketDataProvider(simulated, { ...breaker, timeoutMs: market.timeoutMs, logger });
}
