/**
 * Polygon.io (also sold as Massive) behind the provider port: aggregates for quotes and history,
 * reference tickers for search, reference dividends and splits for events. Key sent as a bearer
 * token (Polygon documents the header beside `apiKey=`), so it never sits in a URL.
 */
import type { Candle, History, HistoryInterval, HistoryQuery, InstrumentType, Quote, SearchResult } from '../../domain/ports/market-data.js';
import type { ProviderAdapter, ProviderCapabilities, ProviderKey, ProviderKeyPool, ProviderSymbol } from '../../domain/ports/providers.js';
import { assetClassOf, cryptoPairOf, fxPairOf, marketOfSymbol, usTickerOf } from '../../domain/provider-symbols.js';
import { isSymbol } from '../../domain/symbols.js';
import {
  changeOf, dailyBarStartMs, finite, sessionEndMs, inWindow, isoDate, isRecord, lastDateBefore, marketStateOf, nonEmptyString, pathSegment, ProviderHttp,
  timezoneOfMarket, windowOf, type ProviderHttpOptions, type ProviderResponse,
} from './provider-http.js';
import { UpstreamRequestRefusedError } from './upstream-guard-errors.js';
import { DAY_MS } from '../../domain/durations.js';

/** Options of `PolygonMarketDataProvider`. */
export interface PolygonMarketDataProviderOptions extends ProviderHttpOptions {
  /** The API keys, used in turn. */
  keys: ProviderKeyPool;
}

const INTRADAY_RETENTION_DAYS = 730;
const ALL_INTERVALS = { '1m': INTRADAY_RETENTION_DAYS, '5m': INTRADAY_RETENTION_DAYS, '15m': INTRADAY_RETENTION_DAYS, '30m': INTRADAY_RETENTION_DAYS, '1h': INTRADAY_RETENTION_DAYS, '1d': 730, '1wk': 730, '1mo': 730 } as const;

/** Free ("Basic") plan: two years of history of every asset class. Paid plans reach further. */
export const POLYGON_CAPABILITIES: ProviderCapabilities = {
  quote: ['equity', 'etf', 'index', 'fx', 'crypto'],
  history: { equity: ALL_INTERVALS, etf: ALL_INTERVALS, index: ALL_INTERVALS, fx: ALL_INTERVALS, crypto: ALL_INTERVALS },
  search: ['equity', 'etf', 'index', 'fx', 'crypto'],
  events: ['equity', 'etf'],
};

/** Yahoo index symbols whose Polygon code differs from the Yahoo name. */
const INDEX_CODES: Readonly<Record<string, string>> = { '^GSPC': 'I:SPX', '^IXIC': 'I:COMP', '^DJI': 'I:DJI', '^NDX': 'I:NDX', '^RUT': 'I:RUT', '^VIX': 'I:VIX' };
const INDEX_SYMBOLS: Readonly<Record<string, string>> = Object.fromEntries(Object.entries(INDEX_CODES).map(([yahoo, code]) => [code, yahoo]));

/** Our intervals as Polygon's multiplier and timespan. */
const TIMESPANS: Readonly<Record<HistoryInterval, [number, string]>> = {
  '1m': [1, 'minute'], '5m': [5, 'minute'], '15m': [15, 'minute'], '30m': [30, 'minute'], '1h': [1, 'hour'], '1d': [1, 'day'], '1wk': [1, 'week'], '1mo': [1, 'month'],
};
const INTRADAY = new Set<HistoryInterval>(['1m', '5m', '15m', '30m', '1h']);
/** How far back a quote looks for the last bar of a ticker with none in two weeks: the reach of every plan (Basic's two years). */
const LAST_BAR_LOOKBACK_DAYS = 730;

/** Polygon's ticker `type`s we can name (reference tickers). */
const TICKER_TYPES: Readonly<Record<string, InstrumentType>> = { CS: 'equity', ADRC: 'equity', PFD: 'equity', ETF: 'etf', ETN: 'etf', ETV: 'etf', FUND: 'etf', INDEX: 'index' };

/**
 * Quotes come from the daily aggregates of the last two weeks: the last bar is the price (its close)
 * and the day's open, high, low and volume, the bar before it gives the previous close. Polygon's
 * snapshot endpoint needs a paid plan and `/prev` gives one bar without its own previous close, so
 * the aggregates serve every plan in one call (the recorded shape). Daily bars are stamped at the
 * session's open (`dailyBarStartMs`); Polygon's `t` is midnight in New York (stocks), Chicago
 * (indices) or UTC (FX, crypto), whose UTC date is the session date in every recording.
 *
 * Unknown symbol: a 404 with `status: "NOT_FOUND"`, or no bar in the quote's two weeks or in a history
 * window and no reference ticker of that name (`/v3/reference/tickers/{ticker}`: 404 `NOT_FOUND`, or no
 * `results`).
 */
export class PolygonMarketDataProvider implements ProviderAdapter {
  readonly name = 'polygon';
  readonly capabilities = POLYGON_CAPABILITIES;
  readonly keys: ProviderKeyPool;
  readonly #http: ProviderHttp;

  constructor(options: PolygonMarketDataProviderOptions) {
    this.keys = options.keys;
    this.#http = new ProviderHttp({ provider: 'polygon', label: 'Polygon' }, options);
  }

  express(symbol: string): ProviderSymbol | undefined {
    const upper = symbol.toUpperCase();
    const assetClass = assetClassOf(upper);
    if (assetClass === 'index') {
      const code = INDEX_CODES[upper] ?? (marketOfSymbol(upper) === 'US' && /^\^[A-Z0-9]{1,10}$/.test(upper) ? `I:${upper.slice(1)}` : undefined);
      return code === undefined ? undefined : { code, assetClass };
    }
    if (assetClass === 'fx') {
      const pair = fxPairOf(upper);
      return pair && { code: `C:${pair.base}${pair.quote}`, assetClass };
    }
    if (assetClass === 'crypto') {
      const pair = cryptoPairOf(upper);
      return pair && { code: `X:${pair.base}${pair.quote}`, assetClass };
    }
    const ticker = usTickerOf(upper);
    return ticker && { code: ticker.shareClass === undefined ? ticker.base : `${ticker.base}.${ticker.shareClass}`, assetClass };
  }

  /**
   * The latest daily bar as a quote, or `undefined` when Polygon says it does not know `symbol`. No bar
   * in two weeks (a long halt) is not "unknown": the reference is asked, and a ticker it knows is quoted
   * from its last bar within `LAST_BAR_LOOKBACK_DAYS` (the answer's `timestamp` says how old), or, with
   * none, refused for this one read (a 503 the breaker does not count).
   */
  async getQuote(symbol: string): Promise<Quote | undefined> {
    const target = this.express(symbol);
    if (!target) return undefined;
    const now = this.#http.now();
    const what = `quote of ${symbol}`;
    let bars = await this.#aggs(target, what, 1, 'day', isoDate(now - 14 * DAY_MS), isoDate(now));
    if (bars === undefined) return undefined;
    if (bars.length === 0) {
      if (!(await this.#exists(target.code, what))) return undefined;
      bars = (await this.#aggs(target, what, 1, 'day', isoDate(now - LAST_BAR_LOOKBACK_DAYS * DAY_MS), isoDate(now))) ?? [];
      if (bars.length === 0) throw new UpstreamRequestRefusedError(`Polygon ${what}: the ticker exists but has no daily bar in ${LAST_BAR_LOOKBACK_DAYS} days`, { provider: 'polygon' });
    }
    const market = marketOfSymbol(symbol);
    const last = bars[bars.length - 1] as Bar;
    const previous = bars[bars.length - 2];
    const prevClose = previous?.c ?? last.o;
    const date = isoDate(last.t);
    return {
      symbol,
      name: symbol,
      price: last.c,
      ...changeOf(last.c, prevClose),
      open: last.o,
      high: last.h,
      low: last.l,
      prev_close: prevClose,
      volume: last.v === undefined ? null : Math.round(last.v),
      currency: currencyOf(symbol),
      timestamp: new Date(Math.min(now, sessionEndMs(market, date))).toISOString(),
      exchange: '',
      instrument_type: instrumentTypeOf(target.assetClass),
      timezone: timezoneOfMarket(market),
      market_state: marketStateOf(market, now),
    };
  }

  /** Candles in ascending time with dividends and splits (shares, daily and longer), or `undefined` for an unknown symbol. */
  async getHistory(query: HistoryQuery): Promise<History | undefined> {
    const target = this.express(query.symbol);
    if (!target) return undefined;
    const window = windowOf(query, this.#http.now());
    const [multiplier, timespan] = TIMESPANS[query.interval];
    const intraday = INTRADAY.has(query.interval);
    const what = `history of ${query.symbol}`;
    // Dates for daily and longer bars (Polygon reads them as whole days), epoch ms for intraday windows.
    const from = intraday ? String(window.startMs) : isoDate(window.startMs);
    const to = intraday ? String(window.endMs - 1) : lastDateBefore(window.endMs);
    const withEvents = !intraday && this.capabilities.events.includes(target.assetClass);
    const [bars, events] = await Promise.all([
      this.#aggs(target, what, multiplier, timespan, from, to),
      withEvents ? this.#events(target.code, what, isoDate(window.startMs), lastDateBefore(window.endMs)) : Promise.resolve({ dividends: [], splits: [] }),
    ]);
    if (bars === undefined) return undefined;
    if (bars.length === 0 && !(await this.#exists(target.code, what))) return undefined;
    const market = marketOfSymbol(query.symbol);
    const candles: Candle[] = [];
    for (const bar of bars) {
      const time = intraday ? bar.t : dailyBarStartMs(market, isoDate(bar.t));
      if (!inWindow(time, window)) continue;
      candles.push({
        time: new Date(time).toISOString(),
        open: bar.o,
        high: bar.h,
        low: bar.l,
        close: bar.c,
        // Polygon's bars are split-adjusted only (`adjusted=true`): there is no dividend-adjusted close.
        adj_close: null,
        volume: bar.v === undefined ? null : Math.round(bar.v),
      });
    }
    return { symbol: query.symbol, currency: currencyOf(query.symbol), timezone: timezoneOfMarket(market), interval: query.interval, candles, events };
  }

  /** Reference tickers matching `query` (name or ticker), active ones, in Polygon's order. */
  async search(query: string, limit: number): Promise<SearchResult[]> {
    const what = `search '${query}'`;
    const params = new URLSearchParams({ search: query, active: 'true', limit: String(Math.min(1000, limit * 2)) });
    const body = await this.#getJson(`/v3/reference/tickers?${params.toString()}`, what);
    const results = isRecord(body) && Array.isArray(body.results) ? body.results : isRecord(body) && body.count === 0 ? [] : undefined;
    if (results === undefined) throw this.#http.shape(what, 'no "results" list');
    const found: SearchResult[] = [];
    for (const entry of results) {
      const result = searchResult(entry);
      if (result && !found.some((r) => r.symbol === result.symbol)) found.push(result);
      if (found.length >= limit) break;
    }
    return found;
  }

  /** The bars of an aggregates request, ascending; `undefined` when Polygon says the ticker does not exist. */
  async #aggs(target: ProviderSymbol, what: string, multiplier: number, timespan: string, from: string, to: string): Promise<Bar[] | undefined> {
    const path = `/v2/aggs/ticker/${tickerPath(target.code)}/range/${multiplier}/${timespan}/${from}/${to}?adjusted=true&sort=asc&limit=50000`;
    const body = await this.#getJson(path, what);
    if (body === undefined) return undefined;
    if (!isRecord(body)) throw this.#http.shape(what, 'not an object');
    if (body.status === 'NOT_FOUND') return undefined;
    if (body.results === undefined && (body.resultsCount === 0 || body.queryCount === 0 || body.count === 0)) return [];
    if (!Array.isArray(body.results)) throw this.#http.shape(what, 'no "results" list');
    const bars: Bar[] = [];
    for (const row of body.results) {
      if (!isRecord(row)) throw this.#http.shape(what, 'a bar is not an object');
      const [o, h, l, c, t] = [row.o, row.h, row.l, row.c, row.t].map(finite);
      if (o === undefined || h === undefined || l === undefined || c === undefined || t === undefined) throw this.#http.shape(what, 'a bar lacks o/h/l/c/t');
      const v = finite(row.v);
      bars.push(v === undefined ? { o, h, l, c, t } : { o, h, l, c, t, v });
    }
    return bars.sort((a, b) => a.t - b.t);
  }

  /** Dividends (ex-dates) and splits (execution dates) of `code` between two dates, inclusive. */
  async #events(code: string, what: string, from: string, to: string): Promise<History['events']> {
    const dividendsPath = `/v3/reference/dividends?${new URLSearchParams({ ticker: code, 'ex_dividend_date.gte': from, 'ex_dividend_date.lte': to, limit: '1000', order: 'asc', sort: 'ex_dividend_date' }).toString()}`;
    const splitsPath = `/v3/reference/splits?${new URLSearchParams({ ticker: code, 'execution_date.gte': from, 'execution_date.lte': to, limit: '1000', order: 'asc', sort: 'execution_date' }).toString()}`;
    const [dividendBody, splitBody] = await Promise.all([this.#getJson(dividendsPath, `dividends of ${code}`), this.#getJson(splitsPath, `splits of ${code}`)]);
    const rows = (body: unknown, kind: string) => {
      if (body === undefined) return [];
      if (!isRecord(body) || (body.results !== undefined && !Array.isArray(body.results))) throw this.#http.shape(what, `no ${kind} "results" list`);
      return (Array.isArray(body.results) ? body.results : []).filter(isRecord);
    };
    const dividends = rows(dividendBody, 'dividends').flatMap((row) => {
      const date = nonEmptyString(row.ex_dividend_date);
      const amount = finite(row.cash_amount);
      return date === undefined || amount === undefined ? [] : [{ time: `${date}T00:00:00.000Z`, amount }];
    });
    const splits = rows(splitBody, 'splits').flatMap((row) => {
      const date = nonEmptyString(row.execution_date);
      const numerator = finite(row.split_to);
      const denominator = finite(row.split_from);
      return date === undefined || !numerator || !denominator ? [] : [{ time: `${date}T00:00:00.000Z`, numerator, denominator }];
    });
    // Polygon filters by date itself; the window is checked again so an answer can never hold events outside it.
    const inDates = (e: { time: string }) => e.time.slice(0, 10) >= from && e.time.slice(0, 10) <= to;
    const byTime = (a: { time: string }, b: { time: string }) => a.time.localeCompare(b.time);
    return { dividends: dividends.filter(inDates).sort(byTime), splits: splits.filter(inDates).sort(byTime) };
  }

  /** True when Polygon's reference knows the ticker `code` (an empty window of a real ticker is not an unknown symbol). */
  async #exists(code: string, what: string): Promise<boolean> {
    const body = await this.#getJson(`/v3/reference/tickers/${tickerPath(code)}`, what);
    return isRecord(body) && isRecord(body.results);
  }

  /** A GET with a key from the pool: the parsed body, or `undefined` for Polygon's 404 `NOT_FOUND`. */
  async #getJson(path: string, what: string): Promise<unknown> {
    const key = await this.#http.key(this.keys, what);
    const response = await this.#http.get(path, what, { Authorization: `Bearer ${key.value}` }, key.index);
    if (response.status === 200) return this.#http.json(response, what);
    if (response.status === 404 && polygonStatus(response) === 'NOT_FOUND') return undefined;
    throw this.#failure(what, response, key);
  }

  #failure(what: string, response: ProviderResponse, key: ProviderKey) {
    const message = polygonMessage(response);
    // 403 NOT_AUTHORIZED is the plan refusing the data, not the key: the key stays in the pool.
    if (response.status === 403 && polygonStatus(response) === 'NOT_AUTHORIZED') {
      return this.#http.failure('unauthorized', what, `HTTP 403 (not entitled on this plan)`);
    }
    if (response.status === 429) {
      if (message !== undefined && /\bday\b|daily/i.test(message)) return this.#http.statusFailure(what, response, key, 'daily request limit reached');
      // Polygon's free plan counts requests per minute and sends no Retry-After: a minute is when room comes back.
      if (response.headers.get('retry-after') === null) return this.#http.failure('throttled', what, 'HTTP 429 (requests per minute)', { keyIndex: key.index, retryAfterSeconds: 60 });
    }
    return this.#http.statusFailure(what, response, key);
  }
}

interface Bar {
  o: number;
  h: number;
  l: number;
  c: number;
  /** Bar start, epoch ms. */
  t: number;
  v?: number;
}

/**
 * A ticker as one path segment: Polygon writes the prefix colon bare (`I:NDX`), as its documentation and
 * recordings do. Throws for a ticker no segment can hold (`.`, `..`): callers only pass mapped codes.
 */
function tickerPath(code: string): string {
  const segment = pathSegment(code);
  if (segment === undefined) throw new UpstreamRequestRefusedError(`Polygon: '${code}' cannot be named in a request`, { provider: 'polygon' });
  return segment.replace(/%3A/gi, ':');
}

function polygonBody(response: ProviderResponse): Record<string, unknown> | undefined {
  try {
    const body: unknown = JSON.parse(response.text);
    return isRecord(body) ? body : undefined;
  } catch {
    return undefined;
  }
}

function polygonStatus(response: ProviderResponse): string | undefined {
  return nonEmptyString(polygonBody(response)?.status);
}

function polygonMessage(response: ProviderResponse): string | undefined {
  const body = polygonBody(response);
  return nonEmptyString(body?.error) ?? nonEmptyString(body?.message);
}

function instrumentTypeOf(assetClass: ProviderSymbol['assetClass']): InstrumentType {
  return assetClass === 'fx' ? 'currency' : assetClass;
}

/** The price currency: the quote currency of a pair, else USD (Polygon serves US listings and US indices). */
function currencyOf(symbol: string): string {
  return fxPairOf(symbol)?.quote ?? cryptoPairOf(symbol)?.quote ?? 'USD';
}

/** A reference ticker as a search hit in Yahoo's spelling, or `undefined` for kinds we cannot name. */
function searchResult(entry: unknown): SearchResult | undefined {
  if (!isRecord(entry)) return undefined;
  const ticker = nonEmptyString(entry.ticker);
  if (ticker === undefined) return undefined;
  const market = nonEmptyString(entry.market);
  let symbol: string | undefined;
  let type: InstrumentType | undefined;
  if (ticker.startsWith('C:') && ticker.length === 8) [symbol, type] = [`${ticker.slice(2)}=X`, 'currency'];
  else if (ticker.startsWith('X:')) {
    const quote = nonEmptyString(entry.currency_symbol) ?? (ticker.endsWith('USD') ? 'USD' : undefined);
    [symbol, type] = quote && ticker.endsWith(quote) ? [`${ticker.slice(2, -quote.length)}-${quote}`, 'crypto'] : [undefined, undefined];
  } else if (ticker.startsWith('I:')) [symbol, type] = [INDEX_SYMBOLS[ticker] ?? `^${ticker.slice(2)}`, 'index'];
  else if (market === 'stocks' || market === 'otc') [symbol, type] = [ticker.replace('.', '-'), TICKER_TYPES[nonEmptyString(entry.type) ?? ''] ?? undefined];
  if (symbol === undefined || type === undefined || !isSymbol(symbol)) return undefined;
  return {
    symbol,
    name: (nonEmptyString(entry.name) ?? symbol).slice(0, 200),
    exchange: (nonEmptyString(entry.primary_exchange) ?? '').slice(0, 64),
    instrument_type: type,
  };
}
