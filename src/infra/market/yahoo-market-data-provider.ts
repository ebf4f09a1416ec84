/**
 * Quotes, history and search from Yahoo Finance's public APIs: the chart API
 * (`/v8/finance/chart/{symbol}`) for quotes and candles, `/v1/finance/search` for search. Everything
 * that can go wrong upstream becomes a `DataSourceError` at this boundary; an unknown symbol is an
 * answer (`undefined`), never an error.
 */
import { DataSourceError } from '../../domain/errors.js';
import { canonical, isSymbol } from '../../domain/symbols.js';
import type { Candle, History, HistoryInterval, HistoryQuery, InstrumentType, MarketDataProvider, MarketState, Quote, SearchResult } from '../../domain/ports/market-data.js';
import { UpstreamFailureError } from '../../domain/upstream-failure.js';
import { errorCode, finite, isRecord, parseRetryAfter, pathSegment, roundTo } from './provider-http.js';
import { UpstreamRateLimitedError, UpstreamRequestRefusedError } from './upstream-guard-errors.js';

/** Options of `YahooMarketDataProvider`. */
export interface YahooMarketDataProviderOptions {
  /** Scheme and host of the API, e.g. `https://query1.finance.yahoo.com` (a trailing slash is ignored). */
  baseUrl: string;
  /** Limit for each request, body included, in milliseconds. */
  timeoutMs: number;
  /** The fetch implementation; the global `fetch` by default. */
  fetch?: typeof fetch;
  /** User-Agent header; Yahoo refuses many non-browser agents, so a desktop browser's by default. */
  userAgent?: string;
  /** Clock in epoch milliseconds for the market state (default `Date.now`). */
  now?: () => number;
}

/** A desktop browser's User-Agent: Yahoo answers 429 to many library defaults. */
export const DEFAULT_USER_AGENT =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

/** Yahoo's `instrumentType` / `quoteType` values we can name. */
const INSTRUMENT_TYPES: Readonly<Record<string, InstrumentType>> = {
  EQUITY: 'equity',
  ETF: 'etf',
  // A fund is bought and priced like an ETF as far as a quote consumer is concerned.
  MUTUALFUND: 'etf',
  INDEX: 'index',
  CURRENCY: 'currency',
  CRYPTOCURRENCY: 'crypto',
  FUTURE: 'future',
};

/** Our history intervals in Yahoo's spelling. */
const YAHOO_INTERVALS: Readonly<Record<HistoryInterval, string>> = {
  '1m': '1m',
  '5m': '5m',
  '15m': '15m',
  '30m': '30m',
  '1h': '60m',
  '1d': '1d',
  '1wk': '1wk',
  '1mo': '1mo',
};

/**
 * Yahoo Finance behind the `MarketDataProvider` port.
 *
 * Quotes (`?interval=1d&range=1d`, so the chart holds today's session and `chartPreviousClose` is the
 * previous session's close): price `meta.regularMarketPrice`; prev_close `meta.chartPreviousClose`,
 * else `meta.previousClose`; name `meta.longName`, else `meta.shortName`, else the symbol; high, low
 * and volume from `meta.regularMarketDay{High,Low}` / `meta.regularMarketVolume`, else from the
 * session's bars, else null; open is the first bar's non-null open; timestamp `meta.regularMarketTime`;
 * exchange `meta.fullExchangeName`, else `meta.exchangeName`; timezone `meta.exchangeTimezoneName`;
 * market_state from `meta.currentTradingPeriod` at the current time (crypto: always open). Prices of
 * zero or less are Yahoo's placeholders for "unknown" and count as absent. Values from bars (stored by
 * Yahoo as float32) are rounded to `meta.priceHint` decimals.
 *
 * Yahoo's 404 with its chart error body ("No data found, symbol may be delisted") means the symbol
 * is unknown: `undefined`. A 404 without that body (a proxy, a wrong base URL) is a failure like any
 * other. A 429 is an `UpstreamRateLimitedError` carrying Yahoo's `Retry-After`.
 */
export class YahooMarketDataProvider implements MarketDataProvider {
  readonly name = 'yahoo';

  private readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;
  private readonly userAgent: string;
  private readonly now: () => number;

  constructor(options: YahooMarketDataProviderOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
    this.now = options.now ?? Date.now;
  }

  /** The quote of `symbol`, or `undefined` when Yahoo does not know it. Throws `DataSourceError`. */
  async getQuote(symbol: string): Promise<Quote | undefined> {
    const body = await this.chart(symbol, new URLSearchParams({ interval: '1d', range: '1d' }));
    return body === undefined ? undefined : parseQuote(symbol, body, this.now());
  }

  /**
   * Candles of `query.symbol` with its dividends and splits, or `undefined` when Yahoo does not know
   * the symbol. A chart without bars (a weekend's minutes) is an empty candle list. Throws `DataSourceError`.
   */
  async getHistory(query: HistoryQuery): Promise<History | undefined> {
    const params = new URLSearchParams({ interval: YAHOO_INTERVALS[query.interval] });
    if (query.range !== undefined) {
      params.set('range', query.range);
    } else {
      params.set('period1', String(Math.floor((query.startMs ?? 0) / 1000)));
      params.set('period2', String(Math.ceil((query.endMs ?? this.now()) / 1000)));
    }
    params.set('events', 'div|split');
    const body = await this.chart(query.symbol, params);
    return body === undefined ? undefined : parseHistory(query, body);
  }

  /**
   * Instruments matching `query`, in Yahoo's order, at most `limit`. Options and kinds outside
   * `InstrumentType` are left out (see `searchResult`). Throws `DataSourceError`.
   */
  async search(query: string, limit: number): Promise<SearchResult[]> {
    const params = new URLSearchParams({ q: query, quotesCount: String(limit), newsCount: '0' });
    const { status, text, retryAfter } = await this.request(`/v1/finance/search?${params.toString()}`, `search '${query}'`);
    if (status !== 200) throw this.statusError(`search '${query}'`, status, text, retryAfter);
    const body = parseJson(text, `search '${query}'`);
    const quotes = isRecord(body) ? body.quotes : undefined;
    if (!Array.isArray(quotes)) throw new UpstreamFailureError('garbage', `Yahoo Finance search '${query}': unexpected response shape: no "quotes" list`, { provider: 'yahoo' });
    const results: SearchResult[] = [];
    for (const entry of quotes) {
      const result = searchResult(entry);
      if (result && !results.some((r) => r.symbol === result.symbol)) results.push(result);
      if (results.length >= limit) break;
    }
    return results;
  }

  /** The parsed chart body, or `undefined` for Yahoo's "no data found" 404. */
  private async chart(symbol: string, params: URLSearchParams): Promise<Record<string, unknown> | undefined> {
    const what = `chart of ${symbol}`;
    const segment = pathSegment(symbol);
    // No request can name it: no such symbol, without asking (and without a failure to count).
    if (segment === undefined) return undefined;
    // `|` in `events` is sent percent-encoded, as Yahoo's own clients do.
    const { status, text, retryAfter } = await this.request(`/v8/finance/chart/${segment}?${params.toString()}`, what);
    if (status === 404 && isChartError(text)) return undefined;
    if (status !== 200) throw this.statusError(what, status, text, retryAfter);
    const body = parseJson(text, what);
    const chart = isRecord(body) ? body.chart : undefined;
    if (!isRecord(chart)) throw new UpstreamFailureError('garbage', `Yahoo Finance ${what}: unexpected response shape: no "chart" object`, { provider: 'yahoo' });
    const result: unknown = Array.isArray(chart.result) ? chart.result[0] : undefined;
    if (!isRecord(result)) {
      const detail = upstreamErrorDescription(chart.error);
      if (detail?.startsWith('Not Found')) return undefined;
      throw new UpstreamFailureError('garbage', `Yahoo Finance ${what}: ${detail ? `upstream error (${detail})` : 'unexpected response shape: no chart result'}`);
    }
    if (!isRecord(result.meta)) throw new UpstreamFailureError('garbage', `Yahoo Finance ${what}: unexpected response shape: no chart meta`, { provider: 'yahoo' });
    return result;
  }

  private async request(path: string, what: string): Promise<{ status: number; text: string; retryAfter: number | undefined }> {
    try {
      const response = await this.fetch(`${this.baseUrl}${path}`, {
        headers: { 'User-Agent': this.userAgent, Accept: 'application/json' },
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      // Read the body even for error statuses: it frees the connection and may explain the failure.
      const text = await response.text();
      const retryAfter = response.status === 429 ? parseRetryAfter(response.headers.get('retry-after'), this.now()) : undefined;
      return { status: response.status, text, retryAfter };
    } catch (err) {
      const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
      throw new UpstreamFailureError(timedOut ? 'timeout' : 'refused', `Yahoo Finance ${what}: ${describeFetchError(err, this.timeoutMs)}`, { provider: 'yahoo', cause: err });
    }
  }

  private statusError(what: string, status: number, text: string, retryAfter: number | undefined): DataSourceError {
    const detail = upstreamErrorDescription(text);
    const message = `Yahoo Finance ${what}: HTTP ${status}${detail ? ` (${detail})` : ''}`;
    if (status === 429) return new UpstreamRateLimitedError(message, retryAfter, { provider: 'yahoo' });
    if (status === 401 || status === 403) return new UpstreamFailureError('unauthorized', message, { provider: 'yahoo' });
    if (status >= 500) return new UpstreamFailureError('server_error', message, { provider: 'yahoo' });
    // Another 4xx refuses this one request, not the service: the breaker does not count it.
    return new UpstreamRequestRefusedError(message, { provider: 'yahoo' });
  }
}

/** Turns a chart result into a quote, or throws `DataSourceError` describing what is missing. */
function parseQuote(symbol: string, result: Record<string, unknown>, nowMs: number): Quote {
  const unexpected = (what: string) => new UpstreamFailureError('garbage', `Yahoo Finance chart of ${symbol}: unexpected response shape: ${what}`, { provider: 'yahoo' });
  const meta = result.meta as Record<string, unknown>;

  const rawPrice = positive(meta.regularMarketPrice);
  if (rawPrice === undefined) throw unexpected('no valid meta.regularMarketPrice');
  const rawPrevClose = positive(meta.chartPreviousClose) ?? positive(meta.previousClose);
  if (rawPrevClose === undefined) throw unexpected('no valid previous close');
  const currency = nonEmptyString(meta.currency);
  if (currency === undefined) throw unexpected('no meta.currency');

  const bars = sessionBars(result.indicators);
  const timestamps = Array.isArray(result.timestamp) ? result.timestamp : [];
  const marketTime = finite(meta.regularMarketTime) ?? finite(timestamps[timestamps.length - 1]);
  if (marketTime === undefined) throw unexpected('no market time');

  // Every price, from `meta` or from the bars, to the price hint (Yahoo sends some as float32).
  const decimals = priceDecimals(meta.priceHint);
  const rounded = (value: number | undefined) => (value === undefined ? null : roundTo(value, decimals));
  const price = roundTo(rawPrice, decimals);
  const prevClose = roundTo(rawPrevClose, decimals);
  const high = rounded(positive(meta.regularMarketDayHigh)) ?? rounded(max(bars.high));
  const low = rounded(positive(meta.regularMarketDayLow)) ?? rounded(min(bars.low));
  const open = rounded(bars.open.find((v) => v !== undefined));
  const metaVolume = finite(meta.regularMarketVolume);
  const volume = metaVolume !== undefined && metaVolume >= 0 ? Math.round(metaVolume) : sum(bars.volume);
  const instrumentType = instrumentTypeOf(meta.instrumentType) ?? 'equity';

  const change = price - prevClose;
  return {
    symbol,
    name: nonEmptyString(meta.longName) ?? nonEmptyString(meta.shortName) ?? symbol,
    price,
    change: roundTo(change, decimals),
    change_percent: roundTo((change / prevClose) * 100, 2),
    open,
    high,
    low,
    prev_close: prevClose,
    volume,
    currency,
    timestamp: new Date(marketTime * 1000).toISOString(),
    exchange: (nonEmptyString(meta.fullExchangeName) ?? nonEmptyString(meta.exchangeName) ?? '').slice(0, 64),
    instrument_type: instrumentType,
    timezone: timezoneOf(meta),
    market_state: instrumentType === 'crypto' ? 'open' : marketState(meta.currentTradingPeriod, nowMs),
  };
}

/** Turns a chart result into history: bars with a missing price are dropped, prices rounded to the price hint. */
function parseHistory(query: HistoryQuery, result: Record<string, unknown>): History {
  const meta = result.meta as Record<string, unknown>;
  const currency = nonEmptyString(meta.currency);
  if (currency === undefined) throw new UpstreamFailureError('garbage', `Yahoo Finance chart of ${query.symbol}: unexpected response shape: no meta.currency`, { provider: 'yahoo' });
  const decimals = priceDecimals(meta.priceHint);
  const inWindow = (epochS: number) =>
    (query.startMs === undefined || epochS * 1000 >= query.startMs) && (query.endMs === undefined || epochS * 1000 < query.endMs);

  const timestamps = Array.isArray(result.timestamp) ? result.timestamp : [];
  const indicators = isRecord(result.indicators) ? result.indicators : {};
  const quote: unknown = Array.isArray(indicators.quote) ? indicators.quote[0] : undefined;
  const adjclose: unknown = Array.isArray(indicators.adjclose) && isRecord(indicators.adjclose[0]) ? indicators.adjclose[0].adjclose : undefined;
  const column = (source: unknown, key: string): unknown[] => {
    const values = isRecord(source) ? source[key] : undefined;
    return Array.isArray(values) ? values : [];
  };
  const [opens, highs, lows, closes, volumes] = ['open', 'high', 'low', 'close', 'volume'].map((key) => column(quote, key)) as [unknown[], unknown[], unknown[], unknown[], unknown[]];
  const adjCloses = Array.isArray(adjclose) ? adjclose : [];

  // Keyed by time: Yahoo repeats the live bar at the end of an intraday chart; the later copy wins.
  const candles = new Map<number, Candle>();
  timestamps.forEach((t: unknown, i) => {
    const time = finite(t);
    const [open, high, low, close] = [opens[i], highs[i], lows[i], closes[i]].map(finite);
    if (time === undefined || open === undefined || high === undefined || low === undefined || close === undefined || !inWindow(time)) return;
    const adj = finite(adjCloses[i]);
    const volume = finite(volumes[i]);
    candles.set(time, {
      time: new Date(time * 1000).toISOString(),
      open: roundTo(open, decimals),
      high: roundTo(high, decimals),
      low: roundTo(low, decimals),
      close: roundTo(close, decimals),
      adj_close: adj === undefined ? null : roundTo(adj, decimals),
      volume: volume === undefined || volume < 0 ? null : Math.round(volume),
    });
  });

  const events = isRecord(result.events) ? result.events : {};
  const eventList = (kind: string) =>
    (isRecord(events[kind]) ? Object.values(events[kind]) : [])
      .filter(isRecord)
      .map((e) => ({ e, date: finite(e.date) }))
      .filter((x): x is { e: Record<string, unknown>; date: number } => x.date !== undefined && inWindow(x.date))
      .sort((a, b) => a.date - b.date);
  const dividends = eventList('dividends').flatMap(({ e, date }) => {
    const amount = finite(e.amount);
    return amount === undefined ? [] : [{ time: new Date(date * 1000).toISOString(), amount }];
  });
  const splits = eventList('splits').flatMap(({ e, date }) => {
    const numerator = positive(e.numerator);
    const denominator = positive(e.denominator);
    return numerator === undefined || denominator === undefined ? [] : [{ time: new Date(date * 1000).toISOString(), numerator, denominator }];
  });

  return {
    symbol: query.symbol,
    currency,
    timezone: timezoneOf(meta),
    interval: query.interval,
    candles: [...candles.entries()].sort(([a], [b]) => a - b).map(([, candle]) => candle),
    events: { dividends, splits },
  };
}

/**
 * One search hit, or `undefined` to leave it out: entries without a usable symbol, options (not an
 * instrument our quote and history endpoints describe, and they flood ticker searches: `AAPL` gives
 * four option contracts among six hits) and kinds we cannot name (rather than mislabel them).
 */
function searchResult(entry: unknown): SearchResult | undefined {
  if (!isRecord(entry)) return undefined;
  const symbol = nonEmptyString(entry.symbol);
  // A search result outside the symbol rule could not be asked for again.
  if (symbol === undefined || !isSymbol(symbol)) return undefined;
  const instrumentType = instrumentTypeOf(entry.quoteType);
  if (instrumentType === undefined) return undefined;
  return {
    symbol: canonical(symbol),
    name: (nonEmptyString(entry.longname) ?? nonEmptyString(entry.shortname) ?? symbol).trim().slice(0, 200),
    exchange: (nonEmptyString(entry.exchDisp) ?? nonEmptyString(entry.exchange) ?? '').slice(0, 64),
    instrument_type: instrumentType,
  };
}

function instrumentTypeOf(value: unknown): InstrumentType | undefined {
  return typeof value === 'string' ? INSTRUMENT_TYPES[value.toUpperCase()] : undefined;
}

/** The exchange's IANA zone; UTC when Yahoo names none (its older chart bodies). */
function timezoneOf(meta: Record<string, unknown>): string {
  return (nonEmptyString(meta.exchangeTimezoneName) ?? 'UTC').slice(0, 64);
}

/** Which of today's sessions (`meta.currentTradingPeriod`) `nowMs` falls in. */
function marketState(period: unknown, nowMs: number): MarketState {
  if (!isRecord(period)) return 'closed';
  const nowS = nowMs / 1000;
  const within = (session: unknown) => {
    if (!isRecord(session)) return false;
    const start = finite(session.start);
    const end = finite(session.end);
    return start !== undefined && end !== undefined && nowS >= start && nowS < end;
  };
  if (within(period.regular)) return 'open';
  if (within(period.pre)) return 'pre';
  if (within(period.post)) return 'post';
  return 'closed';
}

interface SessionBars {
  open: Array<number | undefined>;
  high: Array<number | undefined>;
  low: Array<number | undefined>;
  volume: Array<number | undefined>;
}

/** The bars of `indicators.quote[0]`, with nulls and placeholders turned into `undefined`. */
function sessionBars(indicators: unknown): SessionBars {
  const quote = isRecord(indicators) && Array.isArray(indicators.quote) ? indicators.quote[0] : undefined;
  const series = (key: string, accept: (v: unknown) => number | undefined) => {
    const values = isRecord(quote) ? quote[key] : undefined;
    return Array.isArray(values) ? values.map(accept) : [];
  };
  const nonNegative = (v: unknown) => {
    const n = finite(v);
    return n !== undefined && n >= 0 ? n : undefined;
  };
  return { open: series('open', positive), high: series('high', positive), low: series('low', positive), volume: series('volume', nonNegative) };
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UpstreamFailureError('garbage', `Yahoo Finance ${what}: unparsable response body (not JSON)`, { provider: 'yahoo', cause: err });
  }
}

/** True when `text` is Yahoo's chart error envelope (what its 404 for an unknown symbol carries). */
function isChartError(text: string): boolean {
  try {
    const body: unknown = JSON.parse(text);
    return isRecord(body) && isRecord(body.chart) && isRecord(body.chart.error);
  } catch {
    return false;
  }
}

function describeFetchError(err: unknown, timeoutMs: number): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return `timed out after ${timeoutMs} ms`;
  const code = errorCode(err);
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `host not found (${code})`;
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return `connection closed by upstream (${code})`;
  if (code) return `network error (${code})`;
  return `network error (${err instanceof Error ? err.message : String(err)})`;
}


/** Yahoo's `{code, description}` error object, or a body containing one, as a short text. */
function upstreamErrorDescription(source: unknown): string | undefined {
  let value = source;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return undefined;
    }
  }
  if (isRecord(value) && isRecord(value.chart)) value = value.chart.error;
  if (isRecord(value) && isRecord(value.finance)) value = value.finance.error;
  if (!isRecord(value)) return undefined;
  const parts = [nonEmptyString(value.code), nonEmptyString(value.description)].filter((p) => p !== undefined);
  return parts.length > 0 ? parts.join(': ').slice(0, 200) : undefined;
}




function positive(value: unknown): number | undefined {
  const n = finite(value);
  return n !== undefined && n > 0 ? n : undefined;
}

function nonEmptyString(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim().length > 0 ? value : undefined;
}

function priceDecimals(hint: unknown): number {
  const n = finite(hint);
  return n !== undefined && Number.isInteger(n) && n >= 0 && n <= 8 ? n : 2;
}

function max(values: Array<number | undefined>): number | undefined {
  const present = values.filter((v): v is number => v !== undefined);
  return present.length > 0 ? Math.max(...present) : undefined;
}

function min(values: Array<number | undefined>): number | undefined {
  const present = values.filter((v): v is number => v !== undefined);
  return present.length > 0 ? Math.min(...present) : undefined;
}

function sum(values: Array<number | undefined>): number | null {
  const present = values.filter((v): v is number => v !== undefined);
  return present.length > 0 ? Math.round(present.reduce((a, b) => a + b, 0)) : null;
}

