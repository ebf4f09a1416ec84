/**
 * Financial Modeling Prep (the `stable` API) behind the provider port: `quote`, end-of-day history
 * (`historical-price-eod/full`), `dividends` and `splits` for events, `search-symbol` for search. The
 * key goes in `apikey=`, as FMP documents and as the recordings show.
 */
import type { Candle, History, HistoryQuery, Quote, SearchResult } from '../../domain/ports/market-data.js';
import type { ProviderAdapter, ProviderCapabilities, ProviderKey, ProviderKeyPool, ProviderSymbol } from '../../domain/ports/providers.js';
import { assetClassOf, cryptoPairOf, fxPairOf, marketOfSymbol, usTickerOf } from '../../domain/provider-symbols.js';
import {
  changeOf, dailyBarStartMs, finite, inWindow, isoDate, isRecord, lastDateBefore, marketStateOf, nonEmptyString, ProviderHttp, timezoneOfMarket,
  windowOf, type ProviderHttpOptions, type ProviderResponse,
} from './provider-http.js';

export interface FmpMarketDataProviderOptions extends ProviderHttpOptions {
  keys: ProviderKeyPool;
}

/** The free plan reaches five years back. */
const DAILY = { '1d': 1827 } as const;

export const FMP_CAPABILITIES: ProviderCapabilities = {
  quote: ['equity', 'etf', 'index', 'fx', 'crypto'],
  history: { equity: DAILY, etf: DAILY, index: DAILY, fx: DAILY, crypto: DAILY },
  search: ['equity', 'etf'],
  events: ['equity', 'etf'],
};

/** FMP's exchange codes of US listings (search keeps those: prices in USD, Yahoo spells them bare). */
const US_EXCHANGES = new Set(['NASDAQ', 'NYSE', 'AMEX', 'NYSEARCA', 'BATS', 'CBOE', 'OTC', 'PNK']);

/**
 * Quote: FMP's own `quote` (price, open, day range, volume, previous close, `timestamp` in seconds).
 * History: daily bars, newest first on the wire, dividend-unadjusted OHLC (FMP adjusts them for
 * splits), no adjusted close. Unknown symbol: an empty array (a history window that is empty is
 * told apart by asking for the quote).
 */
export class FmpMarketDataProvider implements ProviderAdapter {
  readonly name = 'fmp';
  readonly capabilities = FMP_CAPABILITIES;
  readonly keys: ProviderKeyPool;
  readonly #http: ProviderHttp;

  constructor(options: FmpMarketDataProviderOptions) {
    this.keys = options.keys;
    this.#http = new ProviderHttp({ provider: 'fmp', label: 'FMP' }, options);
  }

  express(symbol: string): ProviderSymbol | undefined {
    const upper = symbol.toUpperCase();
    const assetClass = assetClassOf(upper);
    if (assetClass === 'index') return /^\^[A-Z0-9]{1,10}$/.test(upper) ? { code: upper, assetClass } : undefined;
    if (assetClass === 'fx') {
      const pair = fxPairOf(upper);
      return pair && { code: `${pair.base}${pair.quote}`, assetClass };
    }
    if (assetClass === 'crypto') {
      const pair = cryptoPairOf(upper);
      return pair && { code: `${pair.base}${pair.quote}`, assetClass };
    }
    return usTickerOf(upper) && { code: upper, assetClass };
  }

  /** FMP's quote of `symbol`, or `undefined` when it answers an empty list. Throws `UpstreamFailureError`. */
  async getQuote(symbol: string): Promise<Quote | undefined> {
    const target = this.express(symbol);
    if (!target) return undefined;
    const what = `quote of ${symbol}`;
    const row = await this.#quoteRow(target, what);
    if (row === undefined) return undefined;
    const price = finite(row.price);
    const prevClose = finite(row.previousClose);
    const timestampS = finite(row.timestamp);
    if (price === undefined || prevClose === undefined || timestampS === undefined) throw this.#http.shape(what, 'no price, previousClose or timestamp');
    const market = marketOfSymbol(symbol);
    const volume = finite(row.volume);
    return {
      symbol,
      name: (nonEmptyString(row.name) ?? symbol).slice(0, 200),
      price,
      ...changeOf(price, prevClose),
      open: finite(row.open) ?? null,
      high: finite(row.dayHigh) ?? null,
      low: finite(row.dayLow) ?? null,
      prev_close: prevClose,
      volume: volume === undefined ? null : Math.round(volume),
      currency: currencyOf(symbol),
      timestamp: new Date(timestampS * 1000).toISOString(),
      exchange: (nonEmptyString(row.exchange) ?? '').slice(0, 64),
      instrument_type: target.assetClass === 'fx' ? 'currency' : target.assetClass,
      timezone: timezoneOfMarket(market),
      market_state: marketStateOf(market, this.#http.now()),
    };
  }

  /** Daily bars in ascending time with the dividends and splits inside the window. Throws `UpstreamFailureError`. */
  async getHistory(query: HistoryQuery): Promise<History | undefined> {
    const target = this.express(query.symbol);
    if (!target) return undefined;
    const what = `history of ${query.symbol}`;
    if (query.interval !== '1d') throw this.#http.failure('garbage', what, `interval ${query.interval} is not served`);
    const window = windowOf(query, this.#http.now());
    const range = { from: isoDate(window.startMs), to: lastDateBefore(window.endMs) };
    const withEvents = this.capabilities.events.includes(target.assetClass);
    const [rows, dividendRows, splitRows] = await Promise.all([
      this.#list(`/stable/historical-price-eod/full?${new URLSearchParams({ symbol: target.code, ...range }).toString()}`, what),
      withEvents ? this.#list(`/stable/dividends?${new URLSearchParams({ symbol: target.code }).toString()}`, `dividends of ${query.symbol}`) : Promise.resolve([]),
      withEvents ? this.#list(`/stable/splits?${new URLSearchParams({ symbol: target.code }).toString()}`, `splits of ${query.symbol}`) : Promise.resolve([]),
    ]);
    if (rows.length === 0 && (await this.#quoteRow(target, what)) === undefined) return undefined;
    const market = marketOfSymbol(query.symbol);
    const candles: Candle[] = [];
    for (const row of rows) {
      const date = nonEmptyString(row.date);
      const [open, high, low, close] = [row.open, row.high, row.low, row.close].map(finite);
      if (date === undefined || !/^\d{4}-\d{2}-\d{2}$/.test(date) || open === undefined || high === undefined || low === undefined || close === undefined) {
        throw this.#http.shape(what, 'a bar lacks date/open/high/low/close');
      }
      const time = dailyBarStartMs(market, date);
      if (!inWindow(time, window)) continue;
      const volume = finite(row.volume);
      candles.push({ time: new Date(time).toISOString(), open, high, low, close, adj_close: null, volume: volume === undefined ? null : Math.round(volume) });
    }
    candles.sort((a, b) => a.time.localeCompare(b.time));
    // Event dates are whole days; the window is compared by date so an event on the first day counts.
    const inDates = (date: string) => date >= range.from && date <= range.to;
    const dividends = dividendRows.flatMap((row) => {
      const date = nonEmptyString(row.date);
      const amount = finite(row.adjDividend) ?? finite(row.dividend);
      return date === undefined || amount === undefined || !inDates(date) ? [] : [{ time: `${date}T00:00:00.000Z`, amount }];
    });
    const splits = splitRows.flatMap((row) => {
      const date = nonEmptyString(row.date);
      const numerator = finite(row.numerator);
      const denominator = finite(row.denominator);
      if (date === undefined || !numerator || !denominator || !inDates(date)) return [];
      if (nonEmptyString(row.symbol) !== undefined && row.symbol !== target.code) return [];
      return [{ time: `${date}T00:00:00.000Z`, numerator, denominator }];
    });
    const byTime = (a: { time: string }, b: { time: string }) => a.time.localeCompare(b.time);
    return {
      symbol: query.symbol,
      currency: currencyOf(query.symbol),
      timezone: timezoneOfMarket(market),
      interval: query.interval,
      candles,
      events: { dividends: dividends.sort(byTime), splits: splits.sort(byTime) },
    };
  }

  /** `search-symbol`: US listings, in FMP's order. Built from documentation. */
  async search(query: string, limit: number): Promise<SearchResult[]> {
    const what = `search '${query}'`;
    const rows = await this.#list(`/stable/search-symbol?${new URLSearchParams({ query, limit: String(Math.min(100, limit * 3)) }).toString()}`, what);
    const found: SearchResult[] = [];
    for (const row of rows) {
      const symbol = nonEmptyString(row.symbol)?.toUpperCase();
      const exchange = nonEmptyString(row.exchange)?.toUpperCase();
      if (symbol === undefined || exchange === undefined || !US_EXCHANGES.has(exchange) || !usTickerOf(symbol)) continue;
      if (found.some((r) => r.symbol === symbol)) continue;
      found.push({
        symbol,
        name: (nonEmptyString(row.name) ?? symbol).slice(0, 200),
        exchange: (nonEmptyString(row.exchangeFullName) ?? exchange).slice(0, 64),
        // FMP's symbol search does not say which listings are funds.
        instrument_type: 'equity',
      });
      if (found.length >= limit) break;
    }
    return found;
  }

  async #quoteRow(target: ProviderSymbol, what: string): Promise<Record<string, unknown> | undefined> {
    const rows = await this.#list(`/stable/quote?${new URLSearchParams({ symbol: target.code }).toString()}`, what);
    return rows.find((row) => nonEmptyString(row.symbol)?.toUpperCase() === target.code) ?? rows[0];
  }

  /** A GET whose answer is an array of objects (FMP's every answer); a refusal in any status becomes its failure. */
  async #list(path: string, what: string): Promise<Array<Record<string, unknown>>> {
    const key = await this.#http.key(this.keys, what);
    const separator = path.includes('?') ? '&' : '?';
    const response = await this.#http.get(`${path}${separator}apikey=${encodeURIComponent(key.value)}`, what, {}, key.index);
    if (response.status !== 200) throw this.#failure(what, response, key);
    const body = this.#http.json(response, what);
    if (isRecord(body) && nonEmptyString(body['Error Message']) !== undefined) throw this.#failure(what, response, key);
    if (!Array.isArray(body)) throw this.#http.shape(what, 'not a list');
    return body.filter(isRecord);
  }

  #failure(what: string, response: ProviderResponse, key: ProviderKey) {
    const message = errorMessageOf(response);
    if (message !== undefined && /limit reach/i.test(message)) return this.#http.statusFailure(what, response, key, 'daily limit reached');
    // A 402 (or a 403 naming the plan) refuses the endpoint on this subscription, not the key.
    if (response.status === 402 || (message !== undefined && /subscription|upgrade|exclusive|restricted|premium/i.test(message) && !/invalid api key/i.test(message))) {
      return this.#http.failure('unauthorized', what, `HTTP ${response.status} (not available on this plan)`);
    }
    if (response.status === 200) return this.#http.failure('unauthorized', what, `key #${key.index} refused`, { keyIndex: key.index });
    return this.#http.statusFailure(what, response, key);
  }
}

function errorMessageOf(response: ProviderResponse): string | undefined {
  try {
    const body: unknown = JSON.parse(response.text);
    if (isRecord(body)) return nonEmptyString(body['Error Message']) ?? nonEmptyString(body.message) ?? nonEmptyString(body.error);
  } catch {
    // Not JSON: an HTML error page, described by its status alone.
  }
  return /limit reach/i.test(response.text) ? 'Limit Reach' : undefined;
}

function currencyOf(symbol: string): string {
  return fxPairOf(symbol)?.quote ?? cryptoPairOf(symbol)?.quote ?? 'USD';
}
