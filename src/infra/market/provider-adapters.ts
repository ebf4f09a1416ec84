/**
 * Builds one provider adapter by name from its settings (`config.market.providerSettings[name]`), and
 * declares what Yahoo and the simulated provider serve, so the router can treat every provider alike.
 */
import type { MarketDataProvider } from '../../domain/ports/market-data.js';
import type { ProviderAdapter, ProviderCapabilities, ProviderKeyPool, ProviderSymbol } from '../../domain/ports/providers.js';
import { assetClassOf } from '../../domain/provider-symbols.js';
import type { ProviderName, ProviderSettings } from '../../config.js';
import { AlphaVantageMarketDataProvider } from './alpha-vantage-market-data-provider.js';
import { EcbMarketDataProvider } from './ecb-market-data-provider.js';
import { FmpMarketDataProvider } from './fmp-market-data-provider.js';
import { KeyPool } from './key-pool.js';
import { PolygonMarketDataProvider } from './polygon-market-data-provider.js';
import { TiingoMarketDataProvider } from './tiingo-market-data-provider.js';

const EVERY_CLASS = ['equity', 'etf', 'index', 'fx', 'crypto'] as const;
const YAHOO_INTERVALS = { '1m': 7, '5m': 60, '15m': 60, '30m': 60, '1h': 730, '1d': null, '1wk': null, '1mo': null } as const;

/** Yahoo's chart API: every class, 1m for 7 days, other intraday for 60 (1h for 730), daily and longer without bound. */
export const YAHOO_CAPABILITIES: ProviderCapabilities = {
  quote: EVERY_CLASS,
  history: Object.fromEntries(EVERY_CLASS.map((c) => [c, YAHOO_INTERVALS])),
  search: EVERY_CLASS,
  events: ['equity', 'etf'],
};

const SIMULATED_INTERVALS = { '1m': 30, '5m': 60, '15m': 60, '30m': 60, '1h': 60, '1d': null, '1wk': null, '1mo': null } as const;

/**
 * The simulated provider's directory covers every class and interval (its data is made up). Its intraday
 * bars reach back as far as the API serves intraday bars (1m: 30 days, others: 60), as a real upstream's
 * would: the demo must not store years of minute bars that no provider would give.
 */
export const SIMULATED_CAPABILITIES: ProviderCapabilities = {
  quote: EVERY_CLASS,
  history: Object.fromEntries(EVERY_CLASS.map((c) => [c, SIMULATED_INTERVALS])),
  search: EVERY_CLASS,
  events: [],
};

/** Knobs for tests. */
export interface ProviderAdapterOptions {
  fetch?: typeof fetch;
  now?: () => number;
  /** The key pool to draw from (the router's fleet-wide one); default a pool of `settings.apiKeys` in memory. */
  keys?: ProviderKeyPool;
}

/** The adapter of one of the five keyed-or-ECB providers, with a key pool of its `apiKeys`. */
export function createProviderAdapter(
  name: Exclude<ProviderName, 'simulated' | 'yahoo'>,
  settings: ProviderSettings,
  options: ProviderAdapterOptions = {},
): ProviderAdapter {
  const http = { baseUrl: settings.baseUrl, timeoutMs: settings.timeoutMs, ...(options.fetch ? { fetch: options.fetch } : {}), ...(options.now ? { now: options.now } : {}) };
  const keys = options.keys ?? new KeyPool(settings.apiKeys, options.now);
  switch (name) {
    case 'polygon':
      return new PolygonMarketDataProvider({ ...http, keys });
    case 'alpha_vantage':
      return new AlphaVantageMarketDataProvider({ ...http, keys });
    case 'tiingo':
      return new TiingoMarketDataProvider({ ...http, keys });
    case 'fmp':
      return new FmpMarketDataProvider({ ...http, keys });
    case 'ecb':
      return new EcbMarketDataProvider(http);
  }
}

/**
 * Yahoo or the simulated provider as a `ProviderAdapter`: both take Yahoo-style symbols as they are,
 * need no key, and declare the capabilities above.
 */
export function asProviderAdapter(provider: MarketDataProvider, capabilities: ProviderCapabilities): ProviderAdapter {
  return {
    name: provider.name,
    capabilities,
    keys: new KeyPool([]),
    express: (symbol: string): ProviderSymbol => ({ code: symbol.toUpperCase(), assetClass: assetClassOf(symbol) }),
    getQuote: (symbol) => provider.getQuote(symbol),
    getHistory: (query) => provider.getHistory(query),
    search: (query, limit) => provider.search(query, limit),
  };
}
