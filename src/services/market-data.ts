/**
 * Market data use cases: the configured indices, quotes of any symbol (one or a batch), history,
 * search and the trading calendar. Every read goes through the one representation cache with a
 * canonical key and a lifetime that follows the data (a quote lives longer while its market is
 * closed); this file only says what to load and how long it stays true.
 */
import { parseInstant } from '../domain/instant.js';
import { DataSourceError, InvalidRequestError, UnknownSymbolError, type Violation } from '../domain/errors.js';
import type { components } from '../generated/api.js';
import type { History, HistoryInterval, HistoryQuery, HistoryRange, MarketDataProvider, Quote } from '../domain/ports.js';
import { allMarketStatuses, marketOf, marketStatus } from '../domain/market-calendar.js';
import { canonical, canonicalSymbol, parseSymbolList } from '../domain/symbols.js';
import type { CachedRepresentation, CacheRead, CacheStats, Loaded, RepresentationCache } from './representation-cache.js';

type IndicesResponse = components['schemas']['IndicesResponse'];
type QuoteResponse = components['schemas']['QuoteResponse'];
type QuotesResponse = components['schemas']['QuotesResponse'];
type HistoryResponse = components['schemas']['HistoryResponse'];
type SearchResponse = components['schemas']['SearchResponse'];
type MarketsResponse = components['schemas']['MarketsResponse'];
type Source = components['schemas']['Source'];

/** Cached stand-in for "the provider does not know this symbol": JSON bodies never start with `!`. */
const UNKNOWN = '!unknown';
/** Cached stand-in for "this window has more candles than one answer may carry". */
const TOO_MANY = '!too-many:';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

/** The most candles one history answer carries. */
export const MAX_CANDLES = 5000;
const INTRADAY: ReadonlySet<HistoryInterval> = new Set(['1m', '5m', '15m', '30m', '1h']);
/** Span of each named range (calendar time; `ytd` and `max` are computed). */
const RANGE_MS: Record<Exclude<HistoryRange, 'ytd' | 'max'>, number> = {
  '1d': DAY_MS,
  '5d': 5 * DAY_MS,
  '1mo': 31 * DAY_MS,
  '3mo': 92 * DAY_MS,
  '6mo': 183 * DAY_MS,
  '1y': 366 * DAY_MS,
  '2y': 731 * DAY_MS,
  '5y': 1827 * DAY_MS,
  '10y': 3653 * DAY_MS,
};

/** The raw history query as validated by the contract. */
export interface HistoryParams {
  symbol: string;
  interval?: HistoryInterval;
  range?: HistoryRange;
  start?: string;
  end?: string;
}

export interface MarketDataServiceOptions {
  engine: RepresentationCache;
  provider: MarketDataProvider;
  /** MARKET_INDICES: the symbols of GET /api/indices, in this order. */
  indices: readonly string[];
  /** Lifetime of a quote while its market trades (CACHE_TTL_SECONDS in ms). */
  quoteTtlMs: number;
  /** The longest a closed market's quote is kept waiting for the next open. Default one hour. */
  closedQuoteMaxTtlMs?: number;
  /** Lifetime of "unknown symbol" answers. Default one hour. */
  unknownTtlMs?: number;
  /** Clock in epoch milliseconds; `Date.now` by default. */
  now?: () => number;
}

/** Market data for the handlers, the scheduler and the stream. */
export class MarketDataService {
  readonly #engine: RepresentationCache;
  readonly #provider: MarketDataProvider;
  readonly #indices: readonly string[];
  readonly #quoteTtlMs: number;
  readonly #closedQuoteMaxTtlMs: number;
  readonly #unknownTtlMs: number;
  readonly #now: () => number;

  constructor(options: MarketDataServiceOptions) {
    if (!(options.quoteTtlMs > 0)) throw new RangeError(`quoteTtlMs must be positive, got ${options.quoteTtlMs}`);
    this.#engine = options.engine;
    this.#provider = options.provider;
    this.#indices = options.indices.map(canonical);
    this.#quoteTtlMs = options.quoteTtlMs;
    this.#closedQuoteMaxTtlMs = options.closedQuoteMaxTtlMs ?? HOUR_MS;
    this.#unknownTtlMs = options.unknownTtlMs ?? HOUR_MS;
    this.#now = options.now ?? Date.now;
  }

  /** The provider's name, as every response's `source`. */
  get source(): Source {
    // The port names providers with a plain string; the contract enumerates the ones we ship.
    return this.#provider.name as Source;
  }

  /**
   * The configured indices. Symbols the provider does not know or cannot deliver now are left out;
   * throws `DataSourceError` when none can be had.
   */
  async getIndices(): Promise<CachedRepresentation> {
    return this.#engine.read(this.#indicesRead());
  }

  /** One quote. Throws `UnknownSymbolError` (404) or `DataSourceError` (503). */
  async getQuote(symbol: string): Promise<CachedRepresentation> {
    const canonical = canonicalSymbol(symbol, 'path.symbol');
    const rep = await this.#engine.read(this.#quoteRead(canonical));
    if (rep.value === UNKNOWN) throw new UnknownSymbolError([canonical]);
    return rep;
  }

  /**
   * Quotes of 1 to 50 distinct symbols (comma-separated), in request order, unknown ones under
   * `missing`. Throws `UnknownSymbolError` when none is known, `InvalidRequestError` for a repeated
   * symbol or more than 50, `DataSourceError` when the upstream fails for any of them.
   */
  async getQuotes(symbolList: string): Promise<CachedRepresentation> {
    const symbols = parseSymbolList(symbolList, 'query.symbols');
    const rep = await this.#engine.read({ kind: 'quotes', params: symbols.join(','), load: () => this.#loadBatch(symbols) });
    if (rep.value === UNKNOWN) throw new UnknownSymbolError(symbols);
    return rep;
  }

  /**
   * The current quote object of one canonical symbol, through the cache (the stream's first event).
   * `undefined` for an unknown symbol.
   */
  async quoteOf(symbol: string): Promise<Quote | undefined> {
    const rep = await this.#engine.read(this.#quoteRead(symbol));
    return rep.value === UNKNOWN ? undefined : (JSON.parse(rep.value) as QuoteResponse).data;
  }

  /**
   * Candles of one symbol. Throws `InvalidRequestError` (422) for combinations an upstream cannot
   * serve, each violation naming its rule; `UnknownSymbolError`; `DataSourceError`.
   */
  async getHistory(params: HistoryParams): Promise<CachedRepresentation> {
    const query = this.#historyQuery(params);
    const window = query.range !== undefined ? query.range : `${query.startMs}-${query.endMs ?? ''}`;
    const rep = await this.#engine.read({
      kind: 'history',
      params: `${query.symbol}:${query.interval}:${window}`,
      load: () => this.#loadHistory(query),
    });
    if (rep.value === UNKNOWN) throw new UnknownSymbolError([query.symbol]);
    if (rep.value.startsWith(TOO_MANY)) {
      throw new InvalidRequestError([
        {
          path: 'query.interval',
          message: `the window holds ${rep.value.slice(TOO_MANY.length)} candles, more than the ${MAX_CANDLES} one answer carries: choose a larger interval or a shorter window`,
        },
      ]);
    }
    return rep;
  }

  /** Instruments matching `q`, best first; an empty list when none does. */
  async search(q: string, limit = 10): Promise<CachedRepresentation> {
    const query = q.trim();
    if (query.length === 0) throw new InvalidRequestError([{ path: 'query.q', message: 'must not be blank' }]);
    return this.#engine.read({
      kind: 'search',
      params: `${limit}:${query.toLowerCase()}`,
      load: async () => {
        const results = await this.#provider.search(query, limit);
        const body: SearchResponse = { success: true, data: results.slice(0, limit), source: this.#sourceOf(results), updated_at: this.#iso() };
        return { value: JSON.stringify(body), ttlMs: DAY_MS };
      },
    });
  }

  /** The trading calendar now, and how many seconds it stays true (until the next open or close, at most 60). */
  markets(): { body: MarketsResponse; maxAgeSeconds: number } {
    const now = this.#now();
    const statuses = allMarketStatuses(now);
    let nextChange = now + MINUTE_MS;
    for (const s of statuses) {
      for (const at of [s.nextOpen, s.nextClose]) if (at !== null && at.getTime() < nextChange) nextChange = at.getTime();
    }
    return {
      body: {
        success: true,
        data: statuses.map((s) => ({
          market: s.market,
          name: s.name,
          timezone: s.timezone,
          state: s.state,
          next_open: s.nextOpen?.toISOString() ?? null,
          next_close: s.nextClose?.toISOString() ?? null,
          holiday: s.holiday,
        })),
        updated_at: new Date(now).toISOString(),
      },
      maxAgeSeconds: Math.max(0, Math.floor((nextChange - now) / 1000)),
    };
  }

  /**
   * Refreshes the configured indices ahead of expiry, for the scheduler: each quote whose cached
   * entry expires within `horizonMs` is loaded again, then the indices are assembled anew.
   * Resolves to 'skipped' when another instance holds the indices' lock.
   */
  async refreshIndices(horizonMs: number): Promise<'ok' | 'skipped'> {
    await Promise.all(this.#indices.map((symbol) => this.refreshQuote(symbol, horizonMs).catch(() => 'failed' as const)));
    return this.#engine.refresh(this.#indicesRead());
  }

  /**
   * Loads a quote again, so readers keep hitting fresh prices: always while its market may move
   * (open, pre, post), and while it is closed (or unknown) only when the entry expires within
   * `horizonMs`. Resolves to 'ok' when it loaded, 'skipped' when the entry needed nothing or another
   * instance is loading it. Throws `DataSourceError`.
   */
  async refreshQuote(symbol: string, horizonMs: number): Promise<'ok' | 'skipped'> {
    const read = this.#quoteRead(symbol);
    const rep = await this.#engine.read(read);
    if (rep.cacheStatus === 'MISS') return 'ok';
    const moving = rep.value !== UNKNOWN && (JSON.parse(rep.value) as QuoteResponse).data.market_state !== 'closed';
    if (!moving && rep.ttlMs > horizonMs) return 'skipped';
    return this.#engine.refresh(read);
  }

  /** Drops every cached representation, here and on every instance; resolves to how many keys went. */
  flush(): Promise<number> {
    return this.#engine.flush();
  }

  stats(): CacheStats {
    return this.#engine.stats();
  }

  /** The provider that gave `answer` (the router knows it per answer), else the configured one. */
  #sourceOf(answer: object): Source {
    return (this.#provider.sourceOf?.(answer) ?? this.#provider.name) as Source;
  }

  #iso(): string {
    return new Date(this.#now()).toISOString();
  }

  #indicesRead(): CacheRead {
    return { kind: 'indices', params: 'configured', load: () => this.#loadIndices() };
  }

  #quoteRead(symbol: string): CacheRead {
    return {
      kind: 'quote',
      params: symbol,
      load: async () => {
        const quote = await this.#provider.getQuote(symbol);
        if (quote === undefined) return { value: UNKNOWN, ttlMs: this.#unknownTtlMs };
        const body: QuoteResponse = { success: true, data: quote, source: this.#sourceOf(quote), updated_at: this.#iso() };
        return { value: JSON.stringify(body), ttlMs: this.#quoteLifetime(quote) };
      },
    };
  }

  /**
   * While the market trades (or in its extended sessions) a quote lives CACHE_TTL_SECONDS; while it
   * is closed it cannot change before the next open, so it lives until then, at most an hour.
   */
  #quoteLifetime(quote: Quote): number {
    if (quote.market_state !== 'closed') return this.#quoteTtlMs;
    const market = marketOf(quote);
    const nextOpen = market === undefined ? null : marketStatus(market, this.#now()).nextOpen;
    if (nextOpen === null) return this.#quoteTtlMs;
    return Math.min(this.#closedQuoteMaxTtlMs, Math.max(this.#quoteTtlMs, nextOpen.getTime() - this.#now()));
  }

  /** Component quotes go through the cache, so batches, single reads and the stream share one entry per symbol. */
  async #loadBatch(symbols: readonly string[]): Promise<Loaded> {
    const parts = await Promise.all(symbols.map(async (symbol) => ({ symbol, rep: await this.#engine.read(this.#quoteRead(symbol)) })));
    const data: Quote[] = [];
    const missing: string[] = [];
    let oldest: string | undefined;
    let ttlMs = Infinity;
    let stale = false;
    for (const { symbol, rep } of parts) {
      ttlMs = Math.min(ttlMs, rep.ttlMs);
      stale ||= rep.cacheStatus === 'STALE';
      if (rep.value === UNKNOWN) {
        missing.push(symbol);
        continue;
      }
      const parsed = JSON.parse(rep.value) as QuoteResponse;
      data.push(parsed.data);
      if (oldest === undefined || parsed.updated_at < oldest) oldest = parsed.updated_at;
    }
    // Answered as a HIT when no part had to be fetched.
    const fetched = parts.some(({ rep }) => rep.cacheStatus !== 'HIT');
    if (data.length === 0) return { value: UNKNOWN, ttlMs, fetched };
    // A batch may mix providers (each quote names its own then): the response names the first's.
    const body: QuotesResponse = { success: true, data, missing, source: data[0]?.source ?? this.source, updated_at: oldest ?? this.#iso() };
    return { value: JSON.stringify(body), ttlMs, stale, fetched };
  }

  /**
   * The configured indices from their component quotes. A symbol that fails upstream is left out
   * and the answer lives at most 5 s, so it comes back soon; when none can be had the failure is
   * the answer.
   */
  async #loadIndices(): Promise<Loaded> {
    const outcomes = await Promise.allSettled(this.#indices.map((symbol) => this.#engine.read(this.#quoteRead(symbol))));
    const data: Quote[] = [];
    let ttlMs = this.#quoteTtlMs;
    let failure: unknown;
    let stale = false;
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') {
        failure ??= outcome.reason;
        continue;
      }
      if (outcome.value.value === UNKNOWN) continue;
      stale ||= outcome.value.cacheStatus === 'STALE';
      ttlMs = Math.min(ttlMs, outcome.value.ttlMs);
      data.push((JSON.parse(outcome.value.value) as QuoteResponse).data);
    }
    if (data.length === 0) {
      if (failure !== undefined) throw failure;
      throw new DataSourceError('No configured index is known to the provider');
    }
    if (failure !== undefined) ttlMs = Math.min(ttlMs, 5000);
    const body: IndicesResponse = { success: true, data, source: data[0]?.source ?? this.source, updated_at: this.#iso() };
    const fetched = outcomes.some((outcome) => outcome.status === 'rejected' || outcome.value.cacheStatus !== 'HIT');
    return { value: JSON.stringify(body), ttlMs, stale, fetched };
  }

  /** Applies the defaults and the rules an upstream cannot serve; each violation names its rule. */
  #historyQuery(params: HistoryParams): HistoryQuery {
    const symbol = canonicalSymbol(params.symbol, 'path.symbol');
    const interval = params.interval ?? '1d';
    const violations: Violation[] = [];
    const now = this.#now();
    if (params.range !== undefined && (params.start !== undefined || params.end !== undefined)) {
      violations.push({ path: 'query.range', message: 'cannot be combined with start/end: give either a range or a start (and optional end)' });
    }
    if (params.end !== undefined && params.start === undefined) {
      violations.push({ path: 'query.end', message: 'needs a start' });
    }
    const startMs = params.start === undefined ? undefined : parseInstant(params.start);
    const endMs = params.end === undefined ? undefined : parseInstant(params.end);
    if (params.start !== undefined && startMs === undefined) violations.push({ path: 'query.start', message: 'is not a valid date or date-time' });
    if (params.end !== undefined && endMs === undefined) violations.push({ path: 'query.end', message: 'is not a valid date or date-time' });
    if (startMs !== undefined && endMs !== undefined && endMs <= startMs) {
      violations.push({ path: 'query.end', message: 'must be after start' });
    }
    if (startMs !== undefined && startMs > now) violations.push({ path: 'query.start', message: 'must not be in the future' });
    if (violations.length > 0) throw new InvalidRequestError(violations);

    const range = startMs === undefined ? (params.range ?? '1mo') : undefined;
    const spanMs = range !== undefined ? rangeSpanMs(range, now) : Math.min(endMs ?? now, now) - (startMs ?? now);
    if (interval === '1m' && spanMs > 7 * DAY_MS) {
      violations.push({ path: 'query.interval', message: '1m candles cover at most 7 days: choose a shorter range (1d, 5d) or window' });
    } else if (INTRADAY.has(interval) && spanMs > 60 * DAY_MS) {
      violations.push({ path: 'query.interval', message: `intraday candles (${interval}) cover at most 60 days: choose a shorter range (up to 1mo) or window, or a daily interval` });
    } else if (startMs !== undefined && INTRADAY.has(interval)) {
      // How far back upstreams keep intraday bars (Yahoo refuses older windows with a 422 of its own).
      const backDays = interval === '1m' ? 30 : 60;
      if (startMs < now - backDays * DAY_MS) {
        violations.push({ path: 'query.start', message: `${interval} candles reach back ${backDays} days at most: start after ${new Date(now - backDays * DAY_MS).toISOString().slice(0, 10)}, or choose a daily interval` });
      }
    }
    if (violations.length > 0) throw new InvalidRequestError(violations);
    return range !== undefined ? { symbol, interval, range } : { symbol, interval, startMs: startMs as number, ...(endMs !== undefined ? { endMs } : {}) };
  }

  async #loadHistory(query: HistoryQuery): Promise<Loaded> {
    const history: History | undefined = await this.#provider.getHistory(query);
    if (history === undefined) return { value: UNKNOWN, ttlMs: this.#unknownTtlMs };
    const ttlMs = this.#historyLifetime(query, history);
    if (history.candles.length > MAX_CANDLES) return { value: `${TOO_MANY}${history.candles.length}`, ttlMs };
    const body: HistoryResponse = { success: true, data: history, source: this.#sourceOf(history), updated_at: this.#iso() };
    return { value: JSON.stringify(body), ttlMs };
  }

  /**
   * Intraday candles change every minute; daily and longer ones change only while the market
   * trades: an hour while it is open, until the next open while it is closed (at most three days).
   */
  #historyLifetime(query: HistoryQuery, history: History): number {
    if (INTRADAY.has(query.interval)) return MINUTE_MS;
    const market = marketOf({ instrument_type: 'equity', timezone: history.timezone });
    if (market === undefined) return HOUR_MS;
    const status = marketStatus(market, this.#now());
    if (status.state === 'open' || status.nextOpen === null) return HOUR_MS;
    return Math.min(3 * DAY_MS, Math.max(HOUR_MS, status.nextOpen.getTime() - this.#now()));
  }
}

/** `2020-08-31` (midnight UTC) or an ISO 8601 date-time with offset -> epoch ms; `undefined` when invalid. */
function rangeSpanMs(range: HistoryRange, now: number): number {
  if (range === 'max') return Infinity;
  if (range === 'ytd') return now - Date.UTC(new Date(now).getUTCFullYear(), 0, 1);
  return RANGE_MS[range];
}
