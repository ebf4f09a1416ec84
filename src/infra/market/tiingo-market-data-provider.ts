/**
 * Tiingo behind the provider port: end-of-day prices for US shares and ETFs (with `divCash` and
 * `splitFactor` as events), crypto and FX prices (daily and intraday), and the utilities search. The
 * key is sent as `Authorization: Token <key>` (documented beside `token=`), so it never sits in a URL.
 */
import type { Candle, History, HistoryInterval, HistoryQuery, InstrumentType, Quote, SearchResult } from '../../domain/ports/market-data.js';
import type { ProviderAdapter, ProviderCapabilities, ProviderKey, ProviderKeyPool, ProviderSymbol } from '../../domain/ports/providers.js';
import { assetClassOf, cryptoPairOf, fxPairOf, marketOfSymbol, usTickerOf } from '../../domain/provider-symbols.js';
import {
  changeOf, dailyBarStartMs, finite, inWindow, isoDate, isRecord, lastDateBefore, marketStateOf, nonEmptyString, pathSegment, ProviderHttp, sessionEndMs,
  timezoneOfMarket, windowOf, type ProviderHttpOptions, type ProviderResponse,
} from './provider-http.js';
import { UpstreamRequestRefusedError } from './upstream-guard-errors.js';
import { HOUR_MS, DAY_MS } from '../../domain/durations.js';

/** A ticker as one path segment; throws for one no segment can hold (`.`, `..`). */
function tickerSegment(code: string): string {
  const segment = pathSegment(code);
  if (segment === undefined) throw new UpstreamRequestRefusedError(`Tiingo: '${code}' cannot be named in a request`, { provider: 'tiingo' });
  return segment;
}

export interface TiingoMarketDataProviderOptions extends ProviderHttpOptions {
  keys: ProviderKeyPool;
}

const INTRADAY = { '1m': 30, '5m': 30, '15m': 30, '30m': 30, '1h': 30 } as const;

/** End-of-day shares go back decades; crypto and FX intraday bars about a month on the free plan (documentation). */
export const TIINGO_CAPABILITIES: ProviderCapabilities = {
  quote: ['equity', 'etf', 'fx', 'crypto'],
  history: { equity: { '1d': null }, etf: { '1d': null }, crypto: { ...INTRADAY, '1d': null }, fx: { ...INTRADAY, '1d': null } },
  search: ['equity', 'etf'],
  events: ['equity', 'etf'],
};

/** Our intervals in Tiingo's crypto/FX `resampleFreq` spelling. */
const RESAMPLE: Readonly<Record<HistoryInterval, string | undefined>> = {
  '1m': '1min', '5m': '5min', '15m': '15min', '30m': '30min', '1h': '1hour', '1d': '1day', '1wk': undefined, '1mo': undefined,
};
const SEARCH_TYPES: Readonly<Record<string, InstrumentType>> = { stock: 'equity', etf: 'etf', 'mutual fund': 'etf' };

/**
 * Quotes come from the latest daily bars: Tiingo's documented quote for shares is its end-of-day
 * price (the IEX "real-time" feed covers one exchange's trades and volume only), so the last bar's
 * close is the price and the bar before gives the previous close (shares: raw prices, `/tiingo/daily`;
 * crypto: `/tiingo/crypto/prices`, whose last 1-day bar is the forming day; FX: `/tiingo/fx`).
 *
 * Unknown symbol: 404 `{"detail":"Error: Ticker 'X' not found"}` (shares; with no bar in two weeks, the
 * meta data's 404 `{"detail":"Not found."}`), an empty array (crypto, FX quotes).
 */
export class TiingoMarketDataProvider implements ProviderAdapter {
  readonly name = 'tiingo';
  readonly capabilities = TIINGO_CAPABILITIES;
  readonly keys: ProviderKeyPool;
  readonly #http: ProviderHttp;

  constructor(options: TiingoMarketDataProviderOptions) {
    this.keys = options.keys;
    this.#http = new ProviderHttp({ provider: 'tiingo', label: 'Tiingo' }, options);
  }

  express(symbol: string): ProviderSymbol | undefined {
    const upper = symbol.toUpperCase();
    const assetClass = assetClassOf(upper);
    if (assetClass === 'crypto') {
      const pair = cryptoPairOf(upper);
      return pair && { code: `${pair.base}${pair.quote}`.toLowerCase(), assetClass };
    }
    if (assetClass === 'fx') {
      const pair = fxPairOf(upper);
      return pair && { code: `${pair.base}${pair.quote}`.toLowerCase(), assetClass };
    }
    if (assetClass === 'index') return undefined;
    return usTickerOf(upper) && { code: upper, assetClass };
  }

  /**
   * The latest daily bar as a quote (see the class), or `undefined` for an unknown symbol. Throws
   * `UpstreamFailureError`. A share with no bar in two weeks (a long halt) is not "unknown": its meta
   * data is asked, and a ticker Tiingo knows is quoted from its last bar (`endDate`; the answer's
   * `timestamp` says how old), or, with none, refused for this one read (a 503 the breaker does not count).
   */
  async getQuote(symbol: string): Promise<Quote | undefined> {
    const target = this.express(symbol);
    if (!target) return undefined;
    const now = this.#http.now();
    const what = `quote of ${symbol}`;
    const from = now - (target.assetClass === 'equity' ? 14 : 5) * DAY_MS;
    let bars = await this.#bars(target, what, '1d', from, now);
    if (bars === undefined) return undefined;
    if (bars.length === 0) {
      if (target.assetClass !== 'equity') return undefined;
      const lastDate = await this.#lastDate(target.code, what);
      if (lastDate === undefined) return undefined;
      const lastMs = lastDate === null ? Number.NaN : Date.parse(`${lastDate}T00:00:00Z`);
      bars = Number.isFinite(lastMs) && lastMs < from ? ((await this.#bars(target, what, '1d', lastMs - 14 * DAY_MS, lastMs + DAY_MS)) ?? []) : [];
      if (bars.length === 0) throw new UpstreamRequestRefusedError(`Tiingo ${what}: the ticker exists but has no recent daily bar`, { provider: 'tiingo' });
    }
    const market = marketOfSymbol(symbol);
    const last = bars[bars.length - 1] as Bar;
    const prevClose = bars[bars.length - 2]?.close ?? last.open;
    return {
      symbol,
      name: symbol,
      price: last.close,
      ...changeOf(last.close, prevClose),
      open: last.open,
      high: last.high,
      low: last.low,
      prev_close: prevClose,
      volume: last.volume,
      currency: currencyOf(symbol),
      timestamp: new Date(Math.min(now, target.assetClass === 'equity' ? sessionEndMs(market, isoDate(last.timeMs)) : last.timeMs + DAY_MS)).toISOString(),
      exchange: '',
      instrument_type: target.assetClass === 'fx' ? 'currency' : target.assetClass,
      timezone: timezoneOfMarket(market),
      market_state: marketStateOf(market, now),
    };
  }

  /**
   * Daily bars of shares with `adjClose` and their `divCash`/`splitFactor` events; daily or intraday bars of
   * crypto and FX. `undefined` for an unknown symbol. Throws `UpstreamFailureError`.
   */
  async getHistory(query: HistoryQuery): Promise<History | undefined> {
    const target = this.express(query.symbol);
    if (!target) return undefined;
    const what = `history of ${query.symbol}`;
    const window = windowOf(query, this.#http.now());
    const bars = await this.#bars(target, what, query.interval, window.startMs, window.endMs);
    if (bars === undefined) return undefined;
    const market = marketOfSymbol(query.symbol);
    const intraday = query.interval !== '1d';
    const candles: Candle[] = [];
    const dividends: History['events']['dividends'] = [];
    const splits: History['events']['splits'] = [];
    for (const bar of bars) {
      const time = intraday ? bar.timeMs : dailyBarStartMs(market, isoDate(bar.timeMs));
      if (!inWindow(time, window)) continue;
      candles.push({ time: new Date(time).toISOString(), open: bar.open, high: bar.high, low: bar.low, close: bar.close, adj_close: bar.adjClose ?? null, volume: bar.volume });
      // Events are stamped at midnight UTC of their date, as Yahoo's and every provider's event dates are.
      const eventTime = `${isoDate(bar.timeMs)}T00:00:00.000Z`;
      if (bar.divCash !== undefined && bar.divCash > 0) dividends.push({ time: eventTime, amount: bar.divCash });
      if (bar.splitFactor !== undefined && bar.splitFactor > 0 && bar.splitFactor !== 1) splits.push({ time: eventTime, ...ratioOf(bar.splitFactor) });
    }
    return { symbol: query.symbol, currency: currencyOf(query.symbol), timezone: timezoneOfMarket(market), interval: query.interval, candles, events: { dividends, splits } };
  }

  /** `/tiingo/utilities/search`: active US shares and ETFs, in Tiingo's order. Built from documentation. */
  async search(query: string, limit: number): Promise<SearchResult[]> {
    const what = `search '${query}'`;
    const body = await this.#getJson(`/tiingo/utilities/search?${new URLSearchParams({ query, limit: String(Math.min(100, limit * 2)) }).toString()}`, what);
    if (!Array.isArray(body)) throw this.#http.shape(what, 'not a list');
    const found: SearchResult[] = [];
    for (const entry of body) {
      if (!isRecord(entry) || entry.isActive === false) continue;
      const symbol = nonEmptyString(entry.ticker)?.toUpperCase();
      const type = SEARCH_TYPES[(nonEmptyString(entry.assetType) ?? '').toLowerCase()];
      const country = nonEmptyString(entry.countryCode);
      if (symbol === undefined || type === undefined || (country !== undefined && country !== 'US') || !usTickerOf(symbol)) continue;
      if (found.some((r) => r.symbol === symbol)) continue;
      found.push({ symbol, name: (nonEmptyString(entry.name) ?? symbol).slice(0, 200), exchange: '', instrument_type: type });
      if (found.length >= limit) break;
    }
    return found;
  }

  /**
   * The date of a share's last end-of-day price from its meta data (`/tiingo/daily/<ticker>`:
   * `{"ticker","name","exchangeCode","startDate","endDate","description"}`); `null` when Tiingo knows
   * the ticker but gives no date, `undefined` when it answers 404 "Not found.".
   */
  async #lastDate(code: string, what: string): Promise<string | null | undefined> {
    const body = await this.#getJson(`/tiingo/daily/${tickerSegment(code)}`, what);
    if (body === undefined) return undefined;
    if (!isRecord(body)) throw this.#http.shape(what, 'meta data is not an object');
    const endDate = nonEmptyString(body.endDate)?.slice(0, 10);
    return endDate !== undefined && /^\d{4}-\d{2}-\d{2}$/.test(endDate) ? endDate : null;
  }

  /** The bars of `target` in a window, ascending; `undefined` for an unknown symbol. */
  async #bars(target: ProviderSymbol, what: string, interval: HistoryInterval, fromMs: number, toMs: number): Promise<Bar[] | undefined> {
    const dates = { startDate: isoDate(fromMs), endDate: lastDateBefore(toMs) };
    if (target.assetClass === 'equity') {
      if (interval !== '1d') throw this.#http.failure('garbage', what, `interval ${interval} is not served for shares`);
      const body = await this.#getJson(`/tiingo/daily/${tickerSegment(target.code)}/prices?${new URLSearchParams({ ...dates, resampleFreq: 'daily' }).toString()}`, what);
      if (body === undefined) return undefined;
      if (!Array.isArray(body)) throw this.#http.shape(what, 'not a list of bars');
      return this.#rows(body, what);
    }
    const resampleFreq = RESAMPLE[interval];
    if (resampleFreq === undefined) throw this.#http.failure('garbage', what, `interval ${interval} is not served`);
    // Intraday windows are cut by date; a date-time start would be read as UTC midnight anyway.
    if (target.assetClass === 'crypto') {
      const body = await this.#getJson(`/tiingo/crypto/prices?${new URLSearchParams({ tickers: target.code, ...dates, resampleFreq }).toString()}`, what);
      if (!Array.isArray(body)) throw this.#http.shape(what, 'not a list');
      const entry = body.find((e) => isRecord(e) && typeof e.ticker === 'string' && e.ticker.toLowerCase() === target.code);
      if (!isRecord(entry)) return body.length === 0 ? undefined : [];
      if (!Array.isArray(entry.priceData)) throw this.#http.shape(what, 'no "priceData" list');
      return this.#rows(entry.priceData, what, 'volumeNotional');
    }
    const body = await this.#getJson(`/tiingo/fx/${tickerSegment(target.code)}/prices?${new URLSearchParams({ ...dates, resampleFreq }).toString()}`, what);
    if (body === undefined) return undefined;
    if (!Array.isArray(body)) throw this.#http.shape(what, 'not a list of bars');
    return this.#rows(body, what);
  }

  /**
   * Tiingo rows as bars, ascending. Crypto volume is taken in the quote currency (`volumeNotional`), as
   * Yahoo counts a pair's volume; shares' volume is raw shares.
   */
  #rows(rows: unknown[], what: string, volumeField = 'volume'): Bar[] {
    const bars = rows.map((row) => {
      if (!isRecord(row)) throw this.#http.shape(what, 'a bar is not an object');
      const timeMs = typeof row.date === 'string' ? Date.parse(row.date) : Number.NaN;
      const [open, high, low, close] = [row.open, row.high, row.low, row.close].map(finite);
      if (!Number.isFinite(timeMs) || open === undefined || high === undefined || low === undefined || close === undefined) throw this.#http.shape(what, 'a bar lacks date/open/high/low/close');
      const volume = finite(row[volumeField]);
      const bar: Bar = { timeMs, open, high, low, close, volume: volume === undefined || volume < 0 ? null : Math.round(volume) };
      const adjClose = finite(row.adjClose);
      const divCash = finite(row.divCash);
      const splitFactor = finite(row.splitFactor);
      if (adjClose !== undefined) bar.adjClose = adjClose;
      if (divCash !== undefined) bar.divCash = divCash;
      if (splitFactor !== undefined) bar.splitFactor = splitFactor;
      return bar;
    });
    return bars.sort((a, b) => a.timeMs - b.timeMs);
  }

  /** A GET with a key: the parsed body, or `undefined` for Tiingo's 404 "not found". */
  async #getJson(path: string, what: string): Promise<unknown> {
    const key = await this.#http.key(this.keys, what);
    const response = await this.#http.get(path, what, { Authorization: `Token ${key.value}` }, key.index);
    if (response.status === 200) return this.#http.json(response, what);
    if (response.status === 404 && /not found/i.test(detailOf(response) ?? '')) return undefined;
    throw this.#failure(what, response, key);
  }

  #failure(what: string, response: ProviderResponse, key: ProviderKey) {
    const detail = detailOf(response) ?? response.text.slice(0, 300);
    if (response.status === 429 || /request allocation/i.test(detail)) {
      if (/daily|\bday\b/i.test(detail)) return this.#http.statusFailure(what, response, key, 'daily request allocation used up');
      if (/hour/i.test(detail) && response.headers.get('retry-after') === null) {
        // The hourly allocation comes back at the top of the next hour.
        const now = this.#http.now();
        return this.#http.failure('throttled', what, 'HTTP 429 (hourly request allocation)', { keyIndex: key.index, retryAfterSeconds: Math.ceil((HOUR_MS - (now % HOUR_MS)) / 1000) });
      }
    }
    return this.#http.statusFailure(what, response, key);
  }
}

interface Bar {
  timeMs: number;
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number | null;
  adjClose?: number;
  divCash?: number;
  splitFactor?: number;
}

function detailOf(response: ProviderResponse): string | undefined {
  try {
    const body: unknown = JSON.parse(response.text);
    return isRecord(body) ? nonEmptyString(body.detail) : undefined;
  } catch {
    return undefined;
  }
}

/** Tiingo's split factor (new shares per old share) as a ratio: 4 -> 4/1, 0.5 -> 1/2, 1.5 -> 3/2. */
function ratioOf(factor: number): { numerator: number; denominator: number } {
  for (let denominator = 1; denominator <= 1000; denominator++) {
    const numerator = factor * denominator;
    if (Math.abs(numerator - Math.round(numerator)) < 1e-9) return { numerator: Math.round(numerator), denominator };
  }
  return { numerator: factor, denominator: 1 };
}

function currencyOf(symbol: string): string {
  return fxPairOf(symbol)?.quote ?? cryptoPairOf(symbol)?.quote ?? 'USD';
}
