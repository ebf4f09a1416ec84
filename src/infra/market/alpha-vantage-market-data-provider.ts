/**
 * Alpha Vantage behind the provider port: `GLOBAL_QUOTE` for quotes, `TIME_SERIES_INTRADAY` (CSV, a
 * month per call) and `TIME_SERIES_DAILY` (CSV) for history, `SYMBOL_SEARCH` for search. US-listed
 * shares and ETFs only. The key goes in `apikey=` (the only way Alpha Vantage takes it).
 *
 * Alpha Vantage answers most refusals with 200: a JSON `Note` or `Information` about the request
 * rate (the daily allowance: `limit_reached`; the per-second burst: `throttled`; a premium-only
 * request: `unauthorized` for the plan), an `Error Message` for an unknown symbol (an answer) or a
 * bad key (`unauthorized`, naming the key), and `{"Global Quote": {}}` for a quote of an unknown symbol.
 */
import { DateTime } from 'luxon';
import type { Candle, History, HistoryInterval, HistoryQuery, InstrumentType, Quote, SearchResult } from '../../domain/ports/market-data.js';
import type { ProviderAdapter, ProviderCapabilities, ProviderKey, ProviderKeyPool, ProviderSymbol } from '../../domain/ports/providers.js';
import { tradingSessions } from '../../domain/market-calendar.js';
import { usTickerOf } from '../../domain/provider-symbols.js';
import { type UpstreamFailureError } from '../../domain/upstream-failure.js';
import {
  changeOf, dailyBarStartMs, inWindow, isRecord, marketStateOf, nonEmptyString, numeric, ProviderHttp, sessionEndMs, timezoneOfMarket,
  windowOf, type ProviderHttpOptions, type ProviderResponse,
} from './provider-http.js';
import { DAY_MS } from '../../domain/durations.js';

/** Options of `AlphaVantageMarketDataProvider`. */
export interface AlphaVantageMarketDataProviderOptions extends ProviderHttpOptions {
  keys: ProviderKeyPool;
}

/** Intraday months go back to 2000-01; daily bars as far as the listing. */
const INTRADAY_RETENTION_DAYS = 9500;
const HISTORY = { '1m': INTRADAY_RETENTION_DAYS, '5m': INTRADAY_RETENTION_DAYS, '15m': INTRADAY_RETENTION_DAYS, '30m': INTRADAY_RETENTION_DAYS, '1h': INTRADAY_RETENTION_DAYS, '1d': null } as const;

export const ALPHA_VANTAGE_CAPABILITIES: ProviderCapabilities = {
  quote: ['equity', 'etf'],
  history: { equity: HISTORY, etf: HISTORY },
  search: ['equity', 'etf'],
  // Dividends and splits come only with TIME_SERIES_DAILY_ADJUSTED, a premium function.
  events: [],
};

const AV_INTERVALS: Partial<Record<HistoryInterval, string>> = { '1m': '1min', '5m': '5min', '15m': '15min', '30m': '30min', '1h': '60min' };
const MARKET = 'US' as const;
const ZONE = 'America/New_York';
/** `outputsize=compact` holds the last 100 sessions: about 140 calendar days. */
const COMPACT_DAYS = 140;
/** The most months one history call may fetch (intraday windows are at most 60 days: 3 months). */
const MAX_MONTHS = 3;

const SEARCH_TYPES: Readonly<Record<string, InstrumentType>> = { equity: 'equity', etf: 'etf', 'mutual fund': 'etf' };

export class AlphaVantageMarketDataProvider implements ProviderAdapter {
  readonly name = 'alpha_vantage';
  readonly capabilities = ALPHA_VANTAGE_CAPABILITIES;
  readonly keys: ProviderKeyPool;
  readonly #http: ProviderHttp;

  constructor(options: AlphaVantageMarketDataProviderOptions) {
    this.keys = options.keys;
    this.#http = new ProviderHttp({ provider: 'alpha_vantage', label: 'Alpha Vantage' }, options);
  }

  express(symbol: string): ProviderSymbol | undefined {
    const ticker = usTickerOf(symbol);
    return ticker && { code: symbol.toUpperCase(), assetClass: 'equity' };
  }

  /**
   * `GLOBAL_QUOTE`: the latest session's price, open, high, low, volume and previous close, as the
   * documentation spells it (decimal strings with 4 places). Built from documentation: no recording.
   */
  async getQuote(symbol: string): Promise<Quote | undefined> {
    const target = this.express(symbol);
    if (!target) return undefined;
    const what = `quote of ${symbol}`;
    const body = await this.#json({ function: 'GLOBAL_QUOTE', symbol: target.code }, what);
    if (body === undefined) return undefined;
    const quote = body['Global Quote'];
    if (!isRecord(quote)) throw this.#http.shape(what, 'no "Global Quote" object');
    if (Object.keys(quote).length === 0) return undefined;
    const [open, high, low, price, volume, prevClose] = ['02. open', '03. high', '04. low', '05. price', '06. volume', '08. previous close'].map((k) => numeric(quote[k]));
    const day = nonEmptyString(quote['07. latest trading day']);
    if (price === undefined || prevClose === undefined || day === undefined || !/^\d{4}-\d{2}-\d{2}$/.test(day)) throw this.#http.shape(what, 'no price, previous close or trading day');
    const now = this.#http.now();
    return {
      symbol,
      name: symbol,
      price,
      ...changeOf(price, prevClose),
      open: open ?? null,
      high: high ?? null,
      low: low ?? null,
      prev_close: prevClose,
      volume: volume === undefined ? null : Math.round(volume),
      currency: 'USD',
      timestamp: new Date(Math.min(now, sessionEndMs(MARKET, day))).toISOString(),
      exchange: '',
      instrument_type: 'equity',
      timezone: ZONE,
      market_state: marketStateOf(MARKET, now),
    };
  }

  /**
   * Intraday: `TIME_SERIES_INTRADAY` month by month (`month=YYYY-MM`, regular hours only, prices
   * adjusted for splits and dividends as Alpha Vantage gives them by default). Daily:
   * `TIME_SERIES_DAILY` (raw prices), compact when the window fits in its last 100 sessions.
   */
  async getHistory(query: HistoryQuery): Promise<History | undefined> {
    const target = this.express(query.symbol);
    if (!target) return undefined;
    const now = this.#http.now();
    const window = windowOf(query, now);
    const what = `history of ${query.symbol}`;
    const interval = AV_INTERVALS[query.interval];
    const rows: CsvRow[] = [];
    if (interval !== undefined) {
      for (const month of monthsOf(window.startMs, window.endMs)) {
        const csv = await this.#csv({ function: 'TIME_SERIES_INTRADAY', symbol: target.code, interval, month, outputsize: 'full', adjusted: 'true', extended_hours: 'false', datatype: 'csv' }, what);
        if (csv === undefined) return undefined;
        rows.push(...csv);
      }
    } else if (query.interval === '1d') {
      const outputsize = window.startMs >= now - COMPACT_DAYS * DAY_MS ? 'compact' : 'full';
      const csv = await this.#csv({ function: 'TIME_SERIES_DAILY', symbol: target.code, outputsize, datatype: 'csv' }, what);
      if (csv === undefined) return undefined;
      rows.push(...csv);
    } else {
      throw this.#http.failure('garbage', what, `interval ${query.interval} is not served`);
    }
    const candles = new Map<number, Candle>();
    for (const row of rows) {
      const time = row.date.length === 10 ? dailyBarStartMs(MARKET, row.date) : DateTime.fromSQL(row.date, { zone: ZONE }).toMillis();
      if (!Number.isFinite(time) || !inWindow(time, window)) continue;
      candles.set(time, { time: new Date(time).toISOString(), open: row.open, high: row.high, low: row.low, close: row.close, adj_close: null, volume: row.volume });
    }
    return {
      symbol: query.symbol,
      currency: 'USD',
      timezone: ZONE,
      interval: query.interval,
      candles: [...candles.entries()].sort(([a], [b]) => a - b).map(([, candle]) => candle),
      events: { dividends: [], splits: [] },
    };
  }

  /** `SYMBOL_SEARCH` best matches listed in the US, in Alpha Vantage's order (by match score). Built from documentation. */
  async search(query: string, limit: number): Promise<SearchResult[]> {
    const what = `search '${query}'`;
    const body = await this.#json({ function: 'SYMBOL_SEARCH', keywords: query }, what);
    const matches = body?.bestMatches;
    if (!Array.isArray(matches)) throw this.#http.shape(what, 'no "bestMatches" list');
    const found: SearchResult[] = [];
    for (const match of matches) {
      if (!isRecord(match)) continue;
      const symbol = nonEmptyString(match['1. symbol'])?.toUpperCase();
      const type = SEARCH_TYPES[(nonEmptyString(match['3. type']) ?? '').toLowerCase()];
      if (symbol === undefined || type === undefined || match['4. region'] !== 'United States' || !usTickerOf(symbol)) continue;
      if (found.some((r) => r.symbol === symbol)) continue;
      found.push({ symbol, name: (nonEmptyString(match['2. name']) ?? symbol).slice(0, 200), exchange: '', instrument_type: type });
      if (found.length >= limit) break;
    }
    return found;
  }

  /** A JSON call: the body, or `undefined` for Alpha Vantage's "invalid API call" on a symbol it does not know. */
  async #json(params: Record<string, string>, what: string): Promise<Record<string, unknown> | undefined> {
    const { response, key } = await this.#call(params, what);
    const body = this.#http.json(response, what);
    if (!isRecord(body)) throw this.#http.shape(what, 'not an object');
    this.#refusal(body, what, key);
    if (body['Error Message'] !== undefined) return undefined;
    return body;
  }

  /** A CSV call: its rows, or `undefined` when Alpha Vantage answers that the symbol is unknown. */
  async #csv(params: Record<string, string>, what: string): Promise<CsvRow[] | undefined> {
    const { response, key } = await this.#call(params, what);
    // With datatype=csv, refusals and errors still come as JSON.
    if (response.text.trimStart().startsWith('{')) {
      const body = this.#http.json(response, what);
      if (!isRecord(body)) throw this.#http.shape(what, 'not an object');
      this.#refusal(body, what, key);
      if (body['Error Message'] !== undefined) return undefined;
      throw this.#http.shape(what, 'JSON where CSV was asked for');
    }
    return parseCsv(response.text, (detail) => this.#http.shape(what, detail));
  }

  async #call(params: Record<string, string>, what: string): Promise<{ response: ProviderResponse; key: ProviderKey }> {
    const key = await this.#http.key(this.keys, what);
    const query = new URLSearchParams({ ...params, apikey: key.value });
    const response = await this.#http.get(`/query?${query.toString()}`, what, {}, key.index);
    if (response.status !== 200) throw this.#http.statusFailure(what, response, key);
    return { response, key };
  }

  /** Throws the failure a `Note`/`Information` or a bad-key `Error Message` stands for. */
  #refusal(body: Record<string, unknown>, what: string, key: ProviderKey): void {
    const note = nonEmptyString(body.Note) ?? nonEmptyString(body.Information);
    const error = nonEmptyString(body['Error Message']);
    let failure: UpstreamFailureError | undefined;
    if (note !== undefined) {
      // The daily-limit notice also advertises the premium plans: the allowance is read first.
      if (/per day|daily/i.test(note)) failure = this.#http.failure('limit_reached', what, 'daily request limit reached', { keyIndex: key.index });
      else if (/per second|per minute|sparingly|frequency/i.test(note)) {
        // The burst rule is per second; the older notes counted per minute.
        const retryAfterSeconds = /per minute/i.test(note) ? 60 : 1;
        failure = this.#http.failure('throttled', what, 'request rate exceeded', { keyIndex: key.index, retryAfterSeconds });
      }
      else if (/premium/i.test(note)) failure = this.#http.failure('unauthorized', what, 'premium endpoint (not on this plan)');
      else if (/api key|apikey/i.test(note)) failure = this.#http.failure('unauthorized', what, `key #${key.index} refused`, { keyIndex: key.index });
      else failure = this.#http.failure('limit_reached', what, 'request refused with a note', { keyIndex: key.index });
    } else if (error !== undefined && /apikey|api key/i.test(error)) {
      failure = this.#http.failure('unauthorized', what, `key #${key.index} refused`, { keyIndex: key.index });
    }
    if (failure) throw failure;
  }
}

interface CsvRow {
  /** `YYYY-MM-DD` or `YYYY-MM-DD HH:MM:SS` (New York time). */
  date: string;
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number | null;
}

/** Alpha Vantage's `timestamp,open,high,low,close,volume` CSV (CRLF, any row order). */
function parseCsv(text: string, shape: (detail: string) => UpstreamFailureError): CsvRow[] {
  const lines = text.split(/\r?\n/).filter((line) => line.length > 0);
  const header = lines.shift();
  if (header === undefined || !/^timestamp,open,high,low,close,volume$/.test(header.trim())) throw shape('not the timestamp,open,high,low,close,volume CSV');
  return lines.map((line) => {
    const [date, ...fields] = line.split(',');
    const [open, high, low, close, volume] = fields.map(numeric);
    if (date === undefined || !/^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}(:\d{2})?)?$/.test(date) || open === undefined || high === undefined || low === undefined || close === undefined) {
      throw shape('a CSV row is not a bar');
    }
    return { date, open, high, low, close, volume: volume === undefined ? null : Math.round(volume) };
  });
}

/**
 * The `YYYY-MM` months of the regular sessions a window touches, oldest first, at most `MAX_MONTHS`
 * (the latest): a window starting at midnight UTC on the 1st does not cost a call for the month before.
 */
function monthsOf(startMs: number, endMs: number): string[] {
  const months = new Set(tradingSessions(MARKET, startMs, endMs).map((session) => session.date.slice(0, 7)));
  return [...months].slice(-MAX_MONTHS);
}
