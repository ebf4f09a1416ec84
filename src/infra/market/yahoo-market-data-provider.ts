/**
 * Live quotes from Yahoo Finance's public chart API (`/v8/finance/chart/{symbol}`), one request per
 * symbol. Everything that can go wrong upstream becomes a `DataSourceError` at this boundary.
 */
import { DataSourceError } from '../../errors.js';
import type { History, HistoryQuery, MarketDataProvider, Quote, SearchResult } from '../../ports.js';

/** Options of `YahooMarketDataProvider`. */
export interface YahooMarketDataProviderOptions {
  /** Scheme and host of the API, e.g. `https://query1.finance.yahoo.com` (a trailing slash is ignored). */
  baseUrl: string;
  /** Yahoo symbols to quote, in this order (`^GSPC`, `000001.SS`, ...). */
  symbols: readonly string[];
  /** Limit for each symbol's request, body included, in milliseconds. */
  timeoutMs: number;
  /** The fetch implementation; the global `fetch` by default. */
  fetch?: typeof fetch;
  /** User-Agent header; Yahoo refuses many non-browser agents, so a desktop browser's by default. */
  userAgent?: string;
}

/** A desktop browser's User-Agent: Yahoo answers 429 to many library defaults. */
export const DEFAULT_USER_AGENT =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

/** Why one symbol could not be quoted. */
class SymbolFailure extends Error {
  constructor(
    readonly symbol: string,
    readonly reason: string,
    readonly retryAfterSeconds?: number,
    options?: { cause?: unknown },
  ) {
    super(`${symbol}: ${reason}`, options);
  }
}

/**
 * Quotes from Yahoo Finance.
 *
 * All symbols are requested in parallel (`?interval=1d&range=1d`, so the chart holds today's session
 * and `chartPreviousClose` is the previous session's close). A symbol that fails (error status,
 * timeout, refused connection, unparsable or unexpected body) is left out of the result; when every
 * symbol fails, `getIndices` rejects with a `DataSourceError` naming the causes, carrying the largest
 * `Retry-After` Yahoo sent with a 429. It never rejects with anything else.
 *
 * Field mapping: price `meta.regularMarketPrice`; prev_close `meta.chartPreviousClose`, else
 * `meta.previousClose`; name `meta.longName`, else `meta.shortName`, else the symbol; high, low and
 * volume from `meta.regularMarketDay{High,Low}` / `meta.regularMarketVolume`, else from the session's
 * bars (highest high, lowest low, summed volume), else null; open is the first bar's non-null open;
 * timestamp `meta.regularMarketTime`. Prices of zero or less are Yahoo's placeholders for "unknown"
 * and count as absent. Values from bars (stored by Yahoo as float32) are rounded to `meta.priceHint`
 * decimals; change is rounded to 4 decimals and change_percent to 2.
 */
export class YahooMarketDataProvider implements MarketDataProvider {
  readonly name = 'yahoo';

  private readonly baseUrl: string;
  private readonly symbols: readonly string[];
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;
  private readonly userAgent: string;

  constructor(options: YahooMarketDataProviderOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.symbols = [...options.symbols];
    this.timeoutMs = options.timeoutMs;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
  }

  /**
   * Quotes of the configured symbols that Yahoo could deliver, in configuration order.
   * Throws `DataSourceError` only when every symbol failed; resolves to `[]` when no symbol is configured.
   */
  async getQuote(symbol: string): Promise<Quote | undefined> {
    try {
      return await this.fetchQuote(symbol);
    } catch (err) {
      const failure = asSymbolFailure(symbol, err);
      if (failure.reason.startsWith('HTTP 404')) return undefined;
      throw allFailed([failure]);
    }
  }

  async getHistory(_query: HistoryQuery): Promise<History | undefined> {
    throw new DataSourceError('history is not available from this provider yet');
  }

  async search(_query: string, _limit: number): Promise<SearchResult[]> {
    return [];
  }

  private async fetchQuote(symbol: string): Promise<Quote> {
    const url = `${this.baseUrl}/v8/finance/chart/${encodeURIComponent(symbol)}?interval=1d&range=1d`;
    let response: Response;
    let text: string;
    try {
      response = await this.fetch(url, {
        headers: { 'User-Agent': this.userAgent, Accept: 'application/json' },
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      // Read the body even for error statuses: it frees the connection and may explain the failure.
      text = await response.text();
    } catch (err) {
      throw new SymbolFailure(symbol, describeFetchError(err, this.timeoutMs), undefined, { cause: err });
    }

    if (!response.ok) {
      const retryAfter = response.status === 429 ? parseRetryAfter(response.headers.get('retry-after')) : undefined;
      const detail = upstreamErrorDescription(text);
      throw new SymbolFailure(symbol, `HTTP ${response.status}${detail ? ` (${detail})` : ''}`, retryAfter);
    }

    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw new SymbolFailure(symbol, 'unparsable response body (not JSON)', undefined, { cause: err });
    }
    return parseChart(symbol, body);
  }
}

/** Turns a chart API body into a quote, or throws `SymbolFailure` describing what is missing. */
function parseChart(symbol: string, body: unknown): Quote {
  const unexpected = (what: string) => new SymbolFailure(symbol, `unexpected response shape: ${what}`);

  const chart = isRecord(body) ? body.chart : undefined;
  if (!isRecord(chart)) throw unexpected('no "chart" object');
  const results = chart.result;
  if (!Array.isArray(results) || results.length === 0) {
    const detail = upstreamErrorDescription(chart.error);
    throw new SymbolFailure(symbol, detail ? `upstream error (${detail})` : 'unexpected response shape: no chart result');
  }
  const result: unknown = results[0];
  if (!isRecord(result) || !isRecord(result.meta)) throw unexpected('no chart meta');
  const meta = result.meta;

  const price = positive(meta.regularMarketPrice);
  if (price === undefined) throw unexpected('no valid meta.regularMarketPrice');
  const prevClose = positive(meta.chartPreviousClose) ?? positive(meta.previousClose);
  if (prevClose === undefined) throw unexpected('no valid previous close');
  const currency = nonEmptyString(meta.currency);
  if (currency === undefined) throw unexpected('no meta.currency');

  const bars = sessionBars(result.indicators);
  const timestamps = Array.isArray(result.timestamp) ? result.timestamp : [];
  const marketTime = finite(meta.regularMarketTime) ?? finite(timestamps[timestamps.length - 1]);
  if (marketTime === undefined) throw unexpected('no market time');

  const decimals = priceDecimals(meta.priceHint);
  const fromBars = (value: number | undefined) => (value === undefined ? null : roundTo(value, decimals));
  const high = positive(meta.regularMarketDayHigh) ?? fromBars(max(bars.high));
  const low = positive(meta.regularMarketDayLow) ?? fromBars(min(bars.low));
  const open = fromBars(bars.open.find((v) => v !== undefined));
  const metaVolume = finite(meta.regularMarketVolume);
  const volume = metaVolume !== undefined && metaVolume >= 0 ? Math.round(metaVolume) : sum(bars.volume);

  const change = price - prevClose;
  return {
    symbol,
    name: nonEmptyString(meta.longName) ?? nonEmptyString(meta.shortName) ?? symbol,
    price,
    change: roundTo(change, 4),
    change_percent: roundTo((change / prevClose) * 100, 2),
    open,
    high,
    low,
    prev_close: prevClose,
    volume,
    currency,
    timestamp: new Date(marketTime * 1000).toISOString(),
    exchange: nonEmptyString(meta.fullExchangeName) ?? nonEmptyString(meta.exchangeName) ?? 'unknown',
    instrument_type: 'equity',
    timezone: nonEmptyString(meta.exchangeTimezoneName) ?? 'UTC',
    market_state: 'open',
  };
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

function allFailed(failures: SymbolFailure[]): DataSourceError {
  const symbolsByReason = new Map<string, string[]>();
  for (const f of failures) symbolsByReason.set(f.reason, [...(symbolsByReason.get(f.reason) ?? []), f.symbol]);
  const causes = [...symbolsByReason].map(([reason, symbols]) => `${reason} for ${symbols.join(', ')}`).join('; ');
  const retryAfters = failures.map((f) => f.retryAfterSeconds).filter((s): s is number => s !== undefined);
  return new DataSourceError(`Yahoo Finance failed for every symbol: ${causes}`, {
    cause: failures.length === 1 ? failures[0] : new AggregateError(failures, 'every symbol failed'),
    ...(retryAfters.length > 0 ? { retryAfterSeconds: Math.max(...retryAfters) } : {}),
  });
}

function asSymbolFailure(symbol: string, reason: unknown): SymbolFailure {
  if (reason instanceof SymbolFailure) return reason;
  const message = reason instanceof Error ? reason.message : String(reason);
  return new SymbolFailure(symbol, `unexpected failure: ${message}`, undefined, { cause: reason });
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

/** The system error code behind a failed fetch (undici wraps it in `cause`, sometimes twice). */
function errorCode(err: unknown): string | undefined {
  for (let current: unknown = err, depth = 0; isRecord(current) && depth < 4; current = current.cause, depth++) {
    if (typeof current.code === 'string') return current.code;
    if (Array.isArray(current.errors)) {
      const nested = current.errors.map(errorCode).find((c) => c !== undefined);
      if (nested) return nested;
    }
  }
  return undefined;
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

/** `Retry-After` as seconds: either delay-seconds or an HTTP date. */
function parseRetryAfter(header: string | null): number | undefined {
  if (header === null) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, (date - Date.now()) / 1000);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
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

function roundTo(value: number, decimals: number): number {
  const factor = 10 ** decimals;
  return Math.round(value * factor) / factor;
}
