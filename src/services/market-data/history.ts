/**
 * History: candles of one symbol for a named range or a window, through the one representation
 * cache, read through the history store when there is one (fetching only what it lacks). While the
 * store's database is unavailable, the upstream answers alone and nothing is stored (DESIGN 27).
 */
import { DatabaseUnavailableError, UnknownSymbolError } from '../../domain/errors.js';
import type { components } from '../../generated/api.js';
import type { TimeSpan } from '../../domain/ports/history-store.js';
import type { History, HistoryQuery } from '../../domain/ports/market-data.js';
import type { Adjustment } from '../../domain/history-adjustment.js';
import { columnsLength } from '../../domain/candle-columns.js';
import type { CachedRepresentation, Loaded } from '../cache/cache-types.js';
import type { HistoryStore } from '../history-store.js';
import { REMEMBERED_UNKNOWN, UNKNOWN, type MarketDataContext } from './context.js';
import { historyLifetime, PARTIAL_TTL_MS } from './lifetimes.js';
import { eventsOf, historyQuery, spanOf, TooManyCandlesError, type HistoryParams } from './history-rules.js';
import { MAX_CANDLES, tooManyCandles } from '../../domain/candle-limits.js';
import { afterFirstRate, convertibleFrom, needsConversion, targetCurrency, type RateTable } from '../../domain/currencies.js';
import { convertColumns, convertDividends, convertHistory, FX_CARRIED, withMissing } from '../../domain/history-conversion.js';
import { INTERVAL_MS } from '../history-store.js';
import { capMissing } from '../../domain/missing-spans.js';

type HistoryResponse = components['schemas']['HistoryResponse'];

/** A validated history window: see `HistoryReads.window`. */
export interface HistoryWindow {
  query: HistoryQuery;
  adjust: Adjustment;
  span: TimeSpan;
  /** The canonical parameters of the window's history answer in the representation cache. */
  cacheParams: string;
  /** How long an answer over this window stays true. */
  lifetimeMs: () => number;
  /** The currency to convert prices to (`currency=`, upper-cased); absent for the prices as given. */
  currency?: string | undefined;
}

/** The history reads of the market data service. */
export class HistoryReads {
  readonly #ctx: MarketDataContext;

  constructor(ctx: MarketDataContext) {
    this.#ctx = ctx;
  }

  /** The query of `params` after the defaults and the rules (see `historyQuery`). */
  query(params: HistoryParams): Promise<HistoryQuery> {
    const history = this.#ctx.history;
    // With the database away nothing is known to be held: the rules decide alone.
    return historyQuery(params, this.#ctx.now(), async (symbol, interval, span) => history?.holds(symbol, interval, span).catch(unlessUnavailable(undefined)));
  }

  /**
   * A history request's window as the store reads it, for studies computed over history: the validated
   * query (throws as `getHistory` does), its span, its basis, the canonical cache parameters of its
   * history answer, and how long an answer over it stays true.
   */
  async window(params: HistoryParams): Promise<HistoryWindow> {
    const query = await this.query(params);
    const adjust = params.adjust ?? 'splits';
    const currency = params.currency === undefined ? undefined : targetCurrency(params.currency);
    const window = query.range !== undefined ? query.range : `${query.startMs}-${query.endMs ?? ''}`;
    return {
      query,
      adjust,
      span: spanOf(query, this.#ctx.now()),
      cacheParams: `${query.symbol}:${query.interval}:${window}${adjust === 'splits' ? '' : `:${adjust}`}${currency === undefined ? '' : `:in=${currency}`}`,
      lifetimeMs: () => historyLifetime(query, this.#ctx.now()),
      currency,
    };
  }

  /**
   * Candles of one symbol. Throws `InvalidRequestError` (422) for combinations an upstream cannot
   * serve, each violation naming its rule; `UnknownSymbolError`; `DataSourceError`.
   */
  async getHistory(params: HistoryParams): Promise<CachedRepresentation> {
    const { query, adjust, cacheParams, currency } = await this.window(params);
    const rep = await this.#ctx.engine.read({
      kind: 'history',
      params: cacheParams,
      load: () => this.#loadHistory(query, adjust, currency),
      remembered: () => this.#ctx.remembered(`history:${query.symbol}`),
    });
    if (rep.outcome === 'unknown') throw new UnknownSymbolError([query.symbol]);
    if (rep.outcome === 'refused') throw new TooManyCandlesError(rep.refusal);
    return rep;
  }

  async #loadHistory(query: HistoryQuery, adjust: Adjustment, currency: string | undefined): Promise<Loaded> {
    const ctx = this.#ctx;
    const member = `history:${query.symbol}`;
    if (await ctx.unknown?.has(member)) return REMEMBERED_UNKNOWN;
    let storeAway = false;
    if (ctx.history !== undefined) {
      const stored = await this.#loadStoredHistory(query, adjust, ctx.history, currency).catch(unlessUnavailable(undefined));
      if (stored !== undefined) return stored;
      storeAway = true;
    }
    let history: History | undefined = await ctx.provider.getHistory(query);
    if (history === undefined) {
      await ctx.unknown?.remember(member);
      return UNKNOWN;
    }
    // Not stored: kept in the cache only briefly, so a read soon after the database returns stores it.
    let ttlMs = storeAway ? Math.min(historyLifetime(query, ctx.now()), PARTIAL_TTL_MS) : historyLifetime(query, ctx.now());
    const refusal = tooManyCandles(history.candles.length, 'answer');
    if (refusal !== undefined) return { outcome: 'refused', refusal, ttlMs };
    if (currency !== undefined && needsConversion(history.currency, currency)) {
      const table = await this.#ratesFor(query, history.currency);
      const source = ctx.sourceOf(history);
      history = convertHistory(table, history, currency, INTERVAL_MS[query.interval]);
      if (history.missing !== undefined) ttlMs = Math.min(ttlMs, PARTIAL_TTL_MS);
      const body: HistoryResponse = { success: true, data: history, source, updated_at: ctx.iso() };
      return { outcome: 'found', value: JSON.stringify(body), ttlMs };
    }
    const body: HistoryResponse = { success: true, data: history, source: ctx.sourceOf(history), updated_at: ctx.iso() };
    return { outcome: 'found', value: JSON.stringify(body), ttlMs };
  }

  /** History read through the store: what it holds, plus what it fetched of what it lacked. */
  async #loadStoredHistory(query: HistoryQuery, adjust: Adjustment, store: HistoryStore, currency: string | undefined): Promise<Loaded> {
    const ctx = this.#ctx;
    const read = await store.readColumns(query.symbol, query.interval, spanOf(query, ctx.now()), MAX_CANDLES + 1);
    let info = read.info;
    if (info === undefined && !read.fetched) {
      // Nothing to fetch (a window without a session, a weekend) and nothing stored: an empty window is
      // not an unknown symbol. The provider is asked who the symbol is; only its "no such symbol" is a 404.
      const quote = await ctx.provider.getQuote(query.symbol);
      if (quote !== undefined) info = { currency: quote.currency, timezone: quote.timezone };
    }
    if (info === undefined) {
      await ctx.unknown?.remember(`history:${query.symbol}`);
      return UNKNOWN;
    }
    const history: History = {
      symbol: query.symbol,
      currency: info.currency,
      timezone: info.timezone,
      interval: query.interval,
      candles: [],
      events: eventsOf(read.actions, spanOf(query, ctx.now())),
    };
    let ttlMs = historyLifetime(query, ctx.now());
    // The read stops one past the limit: only "more than the limit" is known.
    const refusal = tooManyCandles(columnsLength(read.candles), 'answer', true);
    if (refusal !== undefined) return { outcome: 'refused', refusal, ttlMs };
    if (read.missing.length > 0) {
      history.partial = true;
      history.missing = capMissing(read.missing).map((m) => ({ start: new Date(m.startMs).toISOString(), end: new Date(m.endMs).toISOString(), reason: m.reason }));
      ttlMs = Math.min(ttlMs, PARTIAL_TTL_MS);
    }
    if (read.quality !== undefined) history.quality = read.quality;
    if (read.sources !== undefined) history.sources = read.sources;
    let candles = read.candles;
    let flags: Map<number, readonly string[]> | undefined = read.flags;
    if (currency !== undefined && needsConversion(info.currency, currency)) {
      // Converted here, before the task: the pool and the calling thread write the same converted bars.
      const table = await this.#ratesFor(query, info.currency);
      const converted = convertColumns(table, read.candles, query.interval, INTERVAL_MS[query.interval], info.timezone, info.currency, currency);
      candles = converted.columns;
      if (converted.carried.length > 0) {
        flags = new Map(flags);
        for (const t of converted.carried) flags.set(t, [...(flags.get(t) ?? []), FX_CARRIED]);
      }
      history.currency = currency;
      history.events = { dividends: convertDividends(table, history.events.dividends, info.timezone, info.currency, currency), splits: history.events.splits };
      withMissing(history, converted.missing);
      if (converted.missing.length > 0) ttlMs = Math.min(ttlMs, PARTIAL_TTL_MS);
      history.fx = converted.summary;
    }
    const source = (read.source as HistoryResponse['source'] | undefined) ?? ctx.source;
    const body: HistoryResponse = { success: true, data: history, source, ...(read.fromStream === true ? { from_stream: true } : {}), updated_at: ctx.iso() };
    // The candles (basis, spelling, flags) and the JSON are written by the compute pool: 5,000 bars take ~10 ms.
    const { sent } = await ctx.compute.historyAnswer({
      body,
      candles,
      actions: read.actions,
      adjust,
      flags: flags === undefined ? undefined : [...flags],
      streamed: read.fromStream === true ? 'all' : read.streamTimes,
    });
    return { outcome: 'found', sent, ttlMs };
  }

  /** The reference rates, for prices of `query.symbol` in `from`: 422 for a currency or a window they do not cover, 503 when there are none. */
  async #ratesFor(query: HistoryQuery, from: string): Promise<RateTable> {
    convertibleFrom(from, query.symbol);
    afterFirstRate(spanOf(query, this.#ctx.now()));
    return this.#ctx.rates.table();
  }
}

/** A rejection handler answering `fallback` for a database that is unavailable and passing any other failure on. */
function unlessUnavailable<T>(fallback: T): (err: unknown) => T {
  return (err) => {
    if (err instanceof DatabaseUnavailableError) return fallback;
    throw err;
  };
}
