/**
 * Builds the configured market-data provider, wrapped in the circuit breaker and health record.
 */
import type { Config } from '../../config.js';
import type { Logger } from '../../logger.js';
import { ResilientMarketDataProvider, type ResilientMarketDataProviderOptions } from './resilient-market-data-provider.js';
import { SimulatedMarketDataProvider } from './simulated-market-data-provider.js';
import { YahooMarketDataProvider } from './yahoo-market-data-provider.js';

export { CircuitOpenError, ResilientMarketDataProvider } from './resilient-market-data-provider.js';
export type { BreakerState, DatasourceHealth, ResilientMarketDataProviderOptions } from './resilient-market-data-provider.js';
export { SIMULATED_DIRECTORY, SimulatedMarketDataProvider } from './simulated-market-data-provider.js';
export type { SimulatedInstrument, SimulatedMarketDataProviderOptions } from './simulated-market-data-provider.js';
export { DEFAULT_USER_AGENT, YahooMarketDataProvider } from './yahoo-market-data-provider.js';
export type { YahooMarketDataProviderOptions } from './yahoo-market-data-provider.js';

/** The part of the configuration the market-data adapters read. */
export type MarketConfig = Pick<Config['market'], 'provider' | 'baseUrl' | 'symbols' | 'timeoutMs'> & Partial<Pick<Config['market'], 'breakerResetMs'>>;

/** Knobs for tests and special deployments; production uses the defaults. */
export interface CreateMarketDataProviderOptions extends Omit<ResilientMarketDataProviderOptions, 'timeoutMs' | 'logger'> {
  /** The fetch implementation the yahoo provider uses (global `fetch` by default). */
  fetch?: typeof fetch;
}

/**
 * The provider named by MARKET_DATA_PROVIDER, behind a `ResilientMarketDataProvider`.
 * For `simulated` it logs that the data is demo data and how to switch to live quotes.
 */
export function createMarketDataProvider(
  market: MarketConfig,
  logger: Logger,
  options: CreateMarketDataProviderOptions = {},
): ResilientMarketDataProvider {
  const { fetch: fetchImpl, ...rest } = options;
  const breaker = { ...(market.breakerResetMs !== undefined ? { resetTimeoutMs: market.breakerResetMs } : {}), ...rest };
  if (market.provider === 'yahoo') {
    logger.info(
      { provider: 'yahoo', baseUrl: market.baseUrl, symbols: market.symbols, timeoutMs: market.timeoutMs },
      'Market data: live quotes from Yahoo Finance',
    );
    const yahoo = new YahooMarketDataProvider({
      baseUrl: market.baseUrl,
      symbols: market.symbols,
      timeoutMs: market.timeoutMs,
      ...(fetchImpl ? { fetch: fetchImpl } : {}),
    });
    return new ResilientMarketDataProvider(yahoo, { ...breaker, timeoutMs: market.timeoutMs, logger });
  }

  logger.info(
    { provider: 'simulated', symbols: market.symbols },
    'Market data: SIMULATED demo data (a deterministic random walk, not real quotes); set MARKET_DATA_PROVIDER=yahoo for live quotes from Yahoo Finance',
  );
  const simulated = new SimulatedMarketDataProvider({});
  return new ResilientMarketDataProvider(simulated, { ...breaker, timeoutMs: market.timeoutMs, logger });
}
