/**
 * Market data use cases: the configured indices, quotes of any symbol (one or a batch), history,
 * search and the trading calendar. Every read goes through the one representation cache with a
 * canonical key and a lifetime that follows the data (a quote lives longer while its market is
 * closed); this file only says what to load and how long it stays true.
 */
import { rangeStartMs } from '../domain/history-ranges.js';
import { isoInstant, parseInstant } from '../domain/instant.js';
import { DataSourceError, InvalidRequestError, UnknownSymbolError, type Violation } from '../domain/errors.js';
import type { components } from '../generated/api.js';
import type { History, HistoryInterval, HistoryQuery, HistoryRange, MarketDataProvider, Quote } from '../domain/ports.js';
import { allMarketStatuses, marketOf, marketStatus } from '../domain/market-calendar.js';
import { canonical, canonicalSymbol, parseSymbolList } from '../domain/symbols.js';
import type { CachedRepresentation, CacheRead, CacheStats, Loaded, ReadOutcome, RepresentationCache, Unknown } from './representation-cache.js';
import { adjustCandles, type Adjustment } from '../domain/history-adjustment.js';
import type { CorporateAction, StoredCandle, TimeSpan } from '../domain/ports.js';
import { INTERVAL_MS, type HistoryStore, type StoredHistory } from './history-store.js';
import type { UnknownSymbols } from './unknown-symbols.js';

type IndicesResponse = components['schemas']['IndicesResponse'];
type QuoteResponse = components['schemas']['QuoteResponse'];
type QuotesResponse = components['schemas']['QuotesResponse'];
type HistoryResponse = components['schemas']['HistoryResponse'];
type SearchResponse = components['schemas']['SearchResponse'];
type MarketsResponse = components['schemas']['MarketsResponse'];
type Source = components['schemas']['Source'];

/** The refusal of a history window with more candles than one answer may carry: `too-many:<count>`. */
const TOO_MANY = 'too-many:';
const UNKNOWN: Unknown = { outcome: 'unknown' };
const REMEMBERED_UNKNOWN: Unknown = { outcome: 'unknown', fetched: false };

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

/** The most candles one history answer carries. */
export const MAX_CANDLES = 5000;
/** The most candles one export (CSV, Arrow) carries; it is written as it is read, never held whole. */
export const MAX_EXPORT_CANDLES = 200_000;
/** Candles read from the store at a time while an export is written. */
const EXPORT_PAGE_CANDLES = 10_000;
/** How long an answer missing part of its window lives, so the missing part is asked for again soon. */
const PARTIAL_TTL_MS = 30_000;

type Candle = components['schemas']['Candle'];

/** A window with more candles than one JSON answer carries (an export may carry it). */
export class TooManyCandlesError extends InvalidRequestError {
  constructor(detail: string) {
    super([{ path: 'query.interval', message: `the window holds ${detail} candles, more than the ${MAX_CANDLES} one answer carries: choose a larger interval or a shorter window, or format=csv or arrow (up to ${MAX_EXPORT_CANDLES})` }]);
  }
}
const INTRADAY: ReadonlySet<HistoryInterval> = new Set(['1m', '5m', '15m', '30m', '1h']);

/** The raw history query as validated by the contract. */
export interface HistoryParams {
  symbol: string;
  interval?: HistoryInterval;
  range?: HistoryRange;
  start?: string;
  end?: string;
  /** The basis of open/high/low/close; default `splits`. */
  adjust?: Adjustment;
}

/** A validated history window: see `MarketDataService.historyWindow`. */
export interface HistoryWindow {
  query: HistoryQuery;
  adjust: Adjustment;
  span: TimeSpan;
  /** The canonical parameters of the window's history answer in the representation cache. */
  cacheParams: string;
  /** How long an answer over this window stays true, for an instrument of `timezone`. */
  lifetimeMs: (timezone: string) => number;
}

/** A history export: the instrument, the window's candles page by page, and what is missing. */
export interface HistoryExport {
  symbol: string;
  interval: HistoryInterval;
  candles: AsyncIterable<Candle[]>;
  missing: TimeSpan[];
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
  /**
   * The bounded memory of symbols the provider does not know (they are remembered there, for its
   * lifetime, instead of under a key per symbol). Without it, unknown symbols are asked upstream every time.
   */
  unknown?: UnknownSymbols | undefined;
  /** The history store: history is read through it (fetching only what it lacks) when given. */
  history?: HistoryStore | undefined;
  /** Clock in epoch milliseconds; `Date.now` by default. */
  now?: () => number;
  /**
   * The `source` of an answer no provider gave just now (stored history read without a fetch), when
   * the provider's name is not a source itself (a chain is named `polygon+yahoo`): its first provider.
   */
  source?: string | undefined;
}

/** Market data for the handlers, the scheduler and the stream. */
export class MarketDataService {
  readonly #engine: RepresentationCache;
  readonly #provider: MarketDataProvider;
  readonly #defaultSource: string | undefined;
  readonly #indices: readonly string[];
  readonly #quoteTtlMs: number;
  readonly #closedQuoteMaxTtlMs: number;
  readonly #unknown: UnknownSymbols | undefined;
  readonly #history: HistoryStore | undefined;
  readonly #now: () => number;

  constructor(options: MarketDataServiceOptions) {
    if (!(options.quoteTtlMs > 0)) throw new RangeError(`quoteTtlMs must be positive, got ${options.quoteTtlMs}`);
    this.#engine = options.engine;
    this.#provider = options.provider;
    this.#defaultSource = options.source;
    this.#indices = options.indices.map(canonical);
    this.#quoteTtlMs = options.quoteTtlMs;
    this.#closedQuoteMaxTtlMs = options.closedQuoteMaxTtlMs ?? HOUR_MS;
    this.#unknown = options.unknown;
    this.#history = options.history;
    this.#now = options.now ?? Date.now;
  }

  /** The provider's name, as every response's `source`. */
  get source(): Source {
    // The port names providers with a plain string; the contract enumerates the ones we ship.
    return (this.#defaultSource ?? this.#provider.name) as Source;
  }

  /**
   * The configured indices. Symbols the provider does not know or cannot deliver now are left out;
   * throws `DataSourceError` when none can be had.
   */
  async getIndices(): Promise<CachedRepresentation> {
    const rep = await this.#engine.read(this.#indicesRead());
    if (rep.outcome !== 'found') throw new DataSourceError('No configured index is known to the provider');
    return rep;
  }

  /** One quote. Throws `UnknownSymbolError` (404) or `DataSourceError` (503). */
  async getQuote(symbol: string): Promise<CachedRepresentation> {
    const canonical = canonicalSymbol(symbol, 'path.symbol');
    const rep = await this.#engine.read(this.#quoteRead(canonical));
    if (rep.outcome !== 'found') throw new UnknownSymbolError([canonical]);
    return rep;
  }

  /**
   * Quotes of 1 to 50 distinct symbols (comma-separated), in request order, unknown ones under
   * `missing`. Throws `UnknownSymbolError` when none is known, `InvalidRequestError` for a repeated
   * symbol or more than 50, `DataSourceError` when the upstream fails for any of them.
   */
  async getQuotes(symbolList: string): Promise<CachedRepresentation> {
    const symbols = parseSymbolList(symbolList, 'query.symbols');
    const rep = await this.#engine.read({
      kind: 'quotes',
      params: symbols.join(','),
      load: () => this.#loadBatch(symbols),
      // A batch of symbols all remembered as unknown is answered without a round trip to the store.
      remembered: () => (symbols.every((symbol) => this.#remembered(`quote:${symbol}`) !== undefined) ? REMEMBERED_UNKNOWN : undefined),
    });
    if (rep.outcome !== 'found') throw new UnknownSymbolError(symbols);
    return rep;
  }

  /**
   * The current quote object of one canonical symbol, through the cache (the stream's first event).
   * `undefined` for an unknown symbol.
   */
  async quoteOf(symbol: string): Promise<Quote | undefined> {
    const rep = await this.#engine.read(this.#quoteRead(symbol));
    return rep.outcome === 'found' ? decodeQuote(rep).quote : undefined;
  }

  /**
   * Candles of one symbol. Throws `InvalidRequestError` (422) for combinations an upstream cannot
   * serve, each violation naming its rule; `UnknownSymbolError`; `DataSourceError`.
   */
  async getHistory(params: HistoryParams): Promise<CachedRepresentation> {
    const { query, adjust, cacheParams } = await this.historyWindow(params);
    const rep = await this.#engine.read({
      kind: 'history',
      params: cacheParams,
      load: () => this.#loadHistory(query, adjust),
      remembered: () => this.#remembered(`history:${query.symbol}`),
    });
    if (rep.outcome === 'unknown') throw new UnknownSymbolError([query.symbol]);
    if (rep.outcome === 'refused') throw new TooManyCandlesError(rep.detail.slice(TOO_MANY.length));
    return rep;
  }

  /**
   * A history request's window as the store reads it, for studies computed over history: the validated
   * query (throws as `getHistory` does), its span, its basis, the canonical cache parameters of its
   * history answer, and how long an answer over it stays true (given the instrument's time zone).
   */
  async historyWindow(params: HistoryParams): Promise<HistoryWindow> {
    const query = await this.#historyQuery(params);
    const adjust = params.adjust ?? 'splits';
    const window = query.range !== undefined ? query.range : `${query.startMs}-${query.endMs ?? ''}`;
    return {
      query,
      adjust,
      span: this.#spanOf(query),
      cacheParams: `${query.symbol}:${query.interval}:${window}${adjust === 'splits' ? '' : `:${adjust}`}`,
      lifetimeMs: (timezone) => this.#historyLifetime(query, { timezone }),
    };
  }

  /**
   * The same window as an export, up to 200,000 candles read from the store page by page (for
   * windows too large for one JSON answer). Throws as `getHistory` does, and `InvalidRequestError`
   * past 200,000 candles.
   */
  async exportHistory(params: HistoryParams): Promise<HistoryExport> {
    const history = this.#history;
    if (history === undefined) throw new TooManyCandlesError(`over ${MAX_CANDLES}`);
    const query = await this.#historyQuery(params);
    const span = this.#spanOf(query);
    const read = await history.read(query.symbol, query.interval, span, 1);
    if (read.info === undefined) throw new UnknownSymbolError([query.symbol]);
    const count = await history.count(query.symbol, query.interval, span);
    if (count > MAX_EXPORT_CANDLES) {
      throw new InvalidRequestError([{ path: 'query.interval', message: `the window holds ${count} candles, more than the ${MAX_EXPORT_CANDLES} one export carries: choose a larger interval or a shorter window` }]);
    }
    const adjust = params.adjust ?? 'splits';
    const actions = read.actions;
    const pages = history.pages(query.symbol, query.interval, span, EXPORT_PAGE_CANDLES);
    return {
      symbol: query.symbol,
      interval: query.interval,
      missing: read.missing,
      candles: (async function* () {
        for await (const page of pages) yield adjustCandles(page, actions, adjust).map(toCandle);
      })(),
    };
  }

  /** Instruments matching `q`, best first; an empty list when none does. */
  async search(q: string, limit = 10): Promise<CachedRepresentation> {
    const query = q.trim();
    if (query.length === 0) throw new InvalidRequestError([{ path: 'query.q', message: 'must not be blank' }]);
    const rep = await this.#engine.read({
      kind: 'search',
      params: `${limit}:${query.toLowerCase()}`,
      load: async () => {
        const results = await this.#provider.search(query, limit);
        const body: SearchResponse = { success: true, data: results.slice(0, limit), source: this.#sourceOf(results), updated_at: this.#iso() };
        return { outcome: 'found', value: JSON.stringify(body), ttlMs: DAY_MS };
      },
    });
    // A search always finds (an empty list at worst); anything else is a foreign entry under its key.
    if (rep.outcome !== 'found') throw new DataSourceError('The search answer could not be read');
    return rep;
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
    // An unknown symbol is remembered in its own memory, with nothing to refresh.
    if (rep.outcome !== 'found') return 'skipped';
    const moving = decodeQuote(rep).quote.market_state !== 'closed';
    if (!moving && rep.ttlMs > horizonMs) return 'skipped';
    return this.#engine.refresh(read);
  }

  /** Drops every cached representation, here and on every instance; resolves to how many keys went. */
  async flush(): Promise<number> {
    const unknown = (await this.#unknown?.flush()) ?? 0;
    return unknown + (await this.#engine.flush());
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
        const member = `quote:${symbol}`;
        if (await this.#unknown?.has(member)) return REMEMBERED_UNKNOWN;
        const quote = await this.#provider.getQuote(symbol);
        if (quote === undefined) {
          await this.#unknown?.remember(member);
          return UNKNOWN;
        }
        const body: QuoteResponse = { success: true, data: quote, source: this.#sourceOf(quote), updated_at: this.#iso() };
        return { outcome: 'found', value: JSON.stringify(body), ttlMs: this.#quoteLifetime(quote) };
      },
      remembered: () => this.#remembered(`quote:${symbol}`),
    };
  }

  #remembered(member: string): Unknown | undefined {
    return this.#unknown?.remembered(member) === true ? REMEMBERED_UNKNOWN : undefined;
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

  /**
   * Component quotes go through the cache, so batches, single reads and the stream share one entry
   * per symbol. The batch body is assembled from the components' serialized quotes, as cached: no
   * quote is parsed and serialized again.
   */
  async #loadBatch(symbols: readonly string[]): Promise<Loaded> {
    const parts = await Promise.all(symbols.map(async (symbol) => ({ symbol, rep: await this.#engine.read(this.#quoteRead(symbol)) })));
    const data: string[] = [];
    // A batch may mix providers (each quote names its own then): the response names the first's.
    let source: string | undefined;
    const missing: string[] = [];
    let oldest: string | undefined;
    let ttlMs = Infinity;
    let stale = false;
    for (const { symbol, rep } of parts) {
      if (rep.outcome !== 'found') {
        missing.push(symbol);
        continue;
      }
      ttlMs = Math.min(ttlMs, rep.ttlMs);
      stale ||= rep.cacheStatus === 'STALE';
      const decoded = decodeQuote(rep);
      data.push(decoded.json);
      source ??= decoded.source;
      if (oldest === undefined || decoded.updatedAt < oldest) oldest = decoded.updatedAt;
    }
    // Answered as a HIT when no part had to be fetched.
    const fetched = parts.some(({ rep }) => rep.cacheStatus !== 'HIT');
    if (data.length === 0) return { outcome: 'unknown', fetched };
    const value = `{"success":true,"data":[${data.join(',')}],"missing":${JSON.stringify(missing)},"source":${JSON.stringify(source ?? this.source)},"updated_at":${JSON.stringify(oldest ?? this.#iso())}}`;
    return { outcome: 'found', value, ttlMs, stale, fetched };
  }

  /**
   * The configured indices from their component quotes. A symbol that fails upstream is left out
   * and the answer lives at most 5 s, so it comes back soon; when none can be had the failure is
   * the answer.
   */
  async #loadIndices(): Promise<Loaded> {
    const outcomes = await Promise.allSettled(this.#indices.map((symbol) => this.#engine.read(this.#quoteRead(symbol))));
    const data: string[] = [];
    // A batch may mix providers (each quote names its own then): the response names the first's.
    let source: string | undefined;
    let ttlMs = this.#quoteTtlMs;
    let failure: unknown;
    let stale = false;
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') {
        failure ??= outcome.reason;
        continue;
      }
      const rep: ReadOutcome = outcome.value;
      if (rep.outcome !== 'found') continue;
      stale ||= rep.cacheStatus === 'STALE';
      ttlMs = Math.min(ttlMs, rep.ttlMs);
      const decoded = decodeQuote(rep);
      data.push(decoded.json);
      source ??= decoded.source;
    }
    if (data.length === 0) {
      if (failure !== undefined) throw failure;
      throw new DataSourceError('No configured index is known to the provider');
    }
    if (failure !== undefined) ttlMs = Math.min(ttlMs, 5000);
    const value = `{"success":true,"data":[${data.join(',')}],"source":${JSON.stringify(source ?? this.source)},"updated_at":${JSON.stringify(this.#iso())}}`;
    const fetched = outcomes.some((outcome) => outcome.status === 'rejected' || outcome.value.cacheStatus !== 'HIT');
    return { outcome: 'found', value, ttlMs, stale, fetched };
  }

  /**
   * Applies the defaults and the rules an upstream cannot serve (each violation names its rule); the
   * rules of how far back and how wide an upstream serves intraday bars hold only where the history
   * store does not already hold the window.
   */
  async #historyQuery(params: HistoryParams): Promise<HistoryQuery> {
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
    const spanMs = range !== undefined ? now - rangeStartMs(range, now) : Math.min(endMs ?? now, now) - (startMs ?? now);
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
    const query: HistoryQuery = range !== undefined ? { symbol, interval, range } : { symbol, interval, startMs: startMs as number, ...(endMs !== undefined ? { endMs } : {}) };
    if (violations.length > 0 && !(await this.#history?.holds(symbol, interval, this.#spanOf(query)))) throw new InvalidRequestError(violations);
    return query;
  }

  /** The window of a query as instants: a named range ends now. */
  #spanOf(query: HistoryQuery): TimeSpan {
    const now = this.#now();
    if (query.range === undefined) return { startMs: query.startMs!, endMs: Math.min(query.endMs ?? now + INTERVAL_MS[query.interval], now + INTERVAL_MS[query.interval]) };
    return { startMs: rangeStartMs(query.range, now), endMs: now + INTERVAL_MS[query.interval] };
  }

  async #loadHistory(query: HistoryQuery, adjust: Adjustment): Promise<Loaded> {
    const member = `history:${query.symbol}`;
    if (await this.#unknown?.has(member)) return REMEMBERED_UNKNOWN;
    if (this.#history !== undefined) return this.#loadStoredHistory(query, adjust, this.#history);
    const history: History | undefined = await this.#provider.getHistory(query);
    if (history === undefined) {
      await this.#unknown?.remember(member);
      return UNKNOWN;
    }
    const ttlMs = this.#historyLifetime(query, history);
    if (history.candles.length > MAX_CANDLES) return { outcome: 'refused', detail: `${TOO_MANY}${history.candles.length}`, ttlMs };
    const body: HistoryResponse = { success: true, data: history, source: this.#sourceOf(history), updated_at: this.#iso() };
    return { outcome: 'found', value: JSON.stringify(body), ttlMs };
  }

  /** History read through the store: what it holds, plus what it fetched of what it lacked. */
  async #loadStoredHistory(query: HistoryQuery, adjust: Adjustment, store: HistoryStore): Promise<Loaded> {
    const read: StoredHistory = await store.read(query.symbol, query.interval, this.#spanOf(query), MAX_CANDLES + 1);
    if (read.info === undefined) {
      await this.#unknown?.remember(`history:${query.symbol}`);
      return UNKNOWN;
    }
    const history: History = {
      symbol: query.symbol,
      currency: read.info.currency,
      timezone: read.info.timezone,
      interval: query.interval,
      candles: [],
      events: eventsOf(read.actions, this.#spanOf(query)),
    };
    let ttlMs = this.#historyLifetime(query, history);
    if (read.candles.length > MAX_CANDLES) return { outcome: 'refused', detail: `${TOO_MANY}over ${MAX_CANDLES}`, ttlMs };
    history.candles = adjustCandles(read.candles, read.actions, adjust).map(toCandle);
    if (read.missing.length > 0) {
      history.partial = true;
      history.missing = read.missing.map((m) => ({ start: new Date(m.startMs).toISOString(), end: new Date(m.endMs).toISOString() }));
      ttlMs = Math.min(ttlMs, PARTIAL_TTL_MS);
    }
    const body: HistoryResponse = { success: true, data: history, source: (read.source as Source | undefined) ?? this.source, updated_at: this.#iso() };
    return { outcome: 'found', value: JSON.stringify(body), ttlMs };
  }

  /**
   * Intraday candles change every minute; daily and longer ones change only while the market
   * trades: an hour while it is open, until the next open while it is closed (at most three days).
   */
  #historyLifetime(query: HistoryQuery, history: Pick<History, 'timezone'>): number {
    if (INTRADAY.has(query.interval)) return MINUTE_MS;
    const market = marketOf({ instrument_type: 'equity', timezone: history.timezone });
    if (market === undefined) return HOUR_MS;
    const status = marketStatus(market, this.#now());
    if (status.state === 'open' || status.nextOpen === null) return HOUR_MS;
    return Math.min(3 * DAY_MS, Math.max(HOUR_MS, status.nextOpen.getTime() - this.#now()));
  }
}

/** How every quote body begins: `JSON.stringify` of a `QuoteResponse` writes its fields in this order. */
const QUOTE_BODY_HEAD = '{"success":true,"data":';
const QUOTE_BODY_SOURCE = ',"source":';
const QUOTE_BODY_UPDATED = ',"updated_at":';

/** A cached quote body taken apart: the quote's own JSON (as cached), its time, and the object when asked for. */
export interface DecodedQuote {
  json: string;
  updatedAt: string;
  /** The response's `source`: the provider that gave the quote. */
  source: string;
  readonly quote: Quote;
}

/** Decoded once per cached body (the engine hands out one `body` buffer per cached value). */
const decodedBodies = new WeakMap<Buffer, DecodedQuote>();
/** The JSON each decoded quote object came from, so the stream sends it without serializing it again. */
const quoteJson = new WeakMap<Quote, string>();

/** The quote of a cached quote body, without serializing it again; decoded once per cached body. */
function decodeQuote(rep: CachedRepresentation): DecodedQuote {
  let decoded = decodedBodies.get(rep.body);
  if (decoded !== undefined) return decoded;
  decoded = quoteInBody(rep.value);
  decodedBodies.set(rep.body, decoded);
  return decoded;
}

/**
 * The quote in a quote body (`QuoteResponse` as cached), with its JSON exactly as the body holds it;
 * the object is parsed when first asked for.
 */
export function quoteInBody(value: string): DecodedQuote {
  const source = value.lastIndexOf(QUOTE_BODY_SOURCE);
  const updated = value.lastIndexOf(QUOTE_BODY_UPDATED);
  let json: string;
  let updatedAt: string;
  let from: string;
  if (value.startsWith(QUOTE_BODY_HEAD) && source > 0 && updated > source && value.endsWith('"}')) {
    json = value.slice(QUOTE_BODY_HEAD.length, source);
    updatedAt = value.slice(updated + QUOTE_BODY_UPDATED.length + 1, -2);
    from = value.slice(source + QUOTE_BODY_SOURCE.length + 1, updated - 1);
  } else {
    // Not in the shape this release writes: take the slow, sure way.
    const parsed = JSON.parse(value) as QuoteResponse;
    json = JSON.stringify(parsed.data);
    updatedAt = parsed.updated_at;
    from = parsed.source;
  }
  let quote: Quote | undefined;
  return {
    json,
    updatedAt,
    source: from,
    get quote() {
      if (quote === undefined) {
        quote = JSON.parse(json) as Quote;
        quoteJson.set(quote, json);
      }
      return quote;
    },
  };
}

/**
 * `JSON.stringify(quote)`, without the work when `quote` was read from a cached body (the stream's
 * first events): the JSON it came from is sent as it was cached.
 */
export function serializedQuote(quote: Quote): string {
  return quoteJson.get(quote) ?? JSON.stringify(quote);
}

/** Records that `quote` was parsed from `json`, so `serializedQuote(quote)` sends `json` as it is. */
export function serializedAs(quote: Quote, json: string): void {
  quoteJson.set(quote, json);
}

/** `2020-08-31` (midnight UTC) or an ISO 8601 date-time with offset -> epoch ms; `undefined` when invalid. */

/** A stored bar as the contract spells it. */
function toCandle(c: StoredCandle): Candle {
  return { time: isoInstant(c.timeMs), open: c.open, high: c.high, low: c.low, close: c.close, adj_close: c.adjClose, volume: c.volume === null ? null : Math.round(c.volume) };
}

/** The dividends and splits of `span`, as the contract spells them. */
function eventsOf(actions: readonly CorporateAction[], span: TimeSpan): History['events'] {
  const events: History['events'] = { dividends: [], splits: [] };
  for (const a of actions) {
    if (a.timeMs < span.startMs || a.timeMs >= span.endMs) continue;
    const time = new Date(a.timeMs).toISOString();
    if (a.kind === 'dividend') events.dividends.push({ time, amount: a.amount });
    else events.splits.push({ time, numerator: a.numerator, denominator: a.denominator });
  }
  return events;
}
