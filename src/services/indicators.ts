/**
 * Technical indicators over stored history (GET /api/indicators/{symbol}, and the study columns of the
 * history exports). A window's studies are computed from the history store, never asked upstream as
 * such: the window's bars and the warm-up bars before it (read from the store, which fetches what it
 * lacks), so the window's first value equals the one computed over the whole history (within 1e-12 of
 * the seed's weight for the recursive studies: docs/indicators.md). The studies and the answer's JSON
 * are computed by the compute pool, off the event loop (DESIGN 24); this service reads the bars and
 * hands them over as columns. One answer per (symbol, interval, window, basis, studies) is cached
 * through the representation cache like history, filled once across the fleet.
 */
import { columnsOf, parseStudies, warmupOf, type Study } from '../domain/indicators/catalogue.js';
import { studySpecs } from '../domain/indicators/answer.js';
import { columnsLength, emptyCandleColumns, sliceColumns } from '../domain/candle-columns.js';
import { assetClassOf } from '../domain/provider-symbols.js';
import { marketOf, type MarketCode } from '../domain/market-calendar.js';
import { sessionOpenAt } from '../domain/indicators/sessions.js';
import { DataSourceError, UnknownSymbolError } from '../domain/errors.js';
import { afterFirstRate, convertibleFrom, needsConversion } from '../domain/currencies.js';
import { convertColumns } from '../domain/history-conversion.js';
import type { RateSource } from './market-data/context.js';
import type { ComputePool, ComputeReservation, ExportStudies } from '../domain/ports/compute.js';
import type { CandleColumns } from '../domain/ports/history-store.js';
import type { HistoryInterval } from '../domain/ports/market-data.js';
import type { components } from '../generated/api.js';
import { INTERVAL_MS, type HistoryStore, type StoredHistory } from './history-store.js';
import type { MarketDataService } from './market-data.js';
import type { HistoryWindow } from './market-data/history.js';
import { INTRADAY, PARTIAL_TTL_MS } from './market-data/lifetimes.js';
import { DAY_MS } from '../domain/durations.js';
import { TooManyCandlesError, type HistoryParams } from './market-data/history-rules.js';
import { MAX_CANDLES, tooManyCandles } from '../domain/candle-limits.js';
import type { CachedRepresentation, Loaded } from './cache/cache-types.js';
import { textOf, type RepresentationCache } from './cache/representation-cache.js';

type Source = components['schemas']['Source'];

/** Reads of the warm-up, each twice as far back as the last, while it has fewer bars than needed. */
const WARMUP_READS = 3;

/** The request: a history window and a `studies` list. */
export interface IndicatorParams extends HistoryParams {
  studies: string;
}

/**
 * The calendar time `bars` bars of `symbol` at `interval` take at most, with margin: a crypto pair
 * trades around the clock, a bar every interval; the others trade some hours of some days.
 */
function calendarSpanMs(symbol: string, interval: HistoryInterval, bars: number): number {
  if (INTRADAY.has(interval) && assetClassOf(symbol) === 'crypto') return bars * INTERVAL_MS[interval] + 2 * DAY_MS;
  if (interval === '1d') return bars * 1.5 * DAY_MS + 10 * DAY_MS;
  if (interval === '1wk' || interval === '1mo') return bars * INTERVAL_MS[interval] + 2 * INTERVAL_MS[interval];
  // A market open 5 hours of a 24-hour day, 5 days of 7, with a long holiday's margin.
  return bars * INTERVAL_MS[interval] * 7 + 5 * DAY_MS;
}

export interface IndicatorServiceOptions {
  engine: RepresentationCache;
  market: MarketDataService;
  history: HistoryStore;
  /** Where the studies are computed: off the event loop (DESIGN 24). */
  compute: Pick<ComputePool, 'indicators' | 'reserve'>;
  /** The reference rates of `currency=` (DESIGN 25); without them, a conversion is a 503. */
  rates?: RateSource | undefined;
  now?: () => number;
}

export class IndicatorService {
  readonly #engine: RepresentationCache;
  readonly #market: MarketDataService;
  readonly #history: HistoryStore;
  readonly #compute: Pick<ComputePool, 'indicators' | 'reserve'>;
  readonly #now: () => number;
  readonly #rates: RateSource | undefined;

  constructor(options: IndicatorServiceOptions) {
    this.#rates = options.rates;
    this.#engine = options.engine;
    this.#market = options.market;
    this.#history = options.history;
    this.#compute = options.compute;
    this.#now = options.now ?? Date.now;
  }

  /**
   * The studies of one window, through the cache. Throws `InvalidRequestError` (422) for a bad window
   * or study (each violation naming it), `TooManyCandlesError` past 5,000 bars, `UnknownSymbolError`,
   * `DataSourceError`.
   */
  async get(params: IndicatorParams): Promise<CachedRepresentation> {
    const window = await this.#market.historyWindow(params);
    return this.#read(window, parseStudies(params.studies, INTRADAY.has(window.query.interval)));
  }

  async #read(window: HistoryWindow, studies: readonly Study[]): Promise<CachedRepresentation> {
    const rep = await this.#engine.read({
      kind: 'indicators',
      params: `${window.cacheParams}:${studies.map((s) => s.key).join(',')}`,
      load: () => this.#load(window, studies),
    });
    if (rep.outcome === 'unknown') throw new UnknownSymbolError([window.query.symbol]);
    if (rep.outcome === 'refused') throw new TooManyCandlesError(rep.refusal);
    return rep;
  }

  /**
   * The studies of a window as export columns (`sma_20`, `macd_12_26_9_signal`): the cached answer,
   * which series makes which column, and that answer's ETag. Throws as `get` does.
   */
  async columns(params: IndicatorParams): Promise<ExportStudies & { etag: string }> {
    const window = await this.#market.historyWindow(params);
    const studies = parseStudies(params.studies, INTRADAY.has(window.query.interval));
    const rep = await this.#read(window, studies);
    const columns = studies.flatMap((study) => columnsOf(study).map(({ column, output }) => ({ column, key: study.key, output })));
    return { etag: rep.etag, body: textOf(rep), columns };
  }

  async #load(window: HistoryWindow, studies: readonly Study[]): Promise<Loaded> {
    // A place in the compute pool before the store is read: a full pool answers 503 before reading
    // tens of thousands of bars it would not compute. Sized by the calendar (a market's closed hours
    // count too, so a large window of a listed market may reserve for a task that then runs inline).
    const { span, query } = window;
    const bars = (Math.ceil((span.endMs - span.startMs) / INTERVAL_MS[query.interval]) + warmupOf(studies)) * studies.length;
    const reservation = this.#compute.reserve(bars);
    try {
      return await this.#readAndCompute(window, studies, reservation);
    } finally {
      reservation?.release();
    }
  }

  async #readAndCompute(window: HistoryWindow, studies: readonly Study[], reservation: ComputeReservation | undefined): Promise<Loaded> {
    const { query, span } = window;
    // Bars as columns: no object per bar on the event loop, and they go to the pool as they are; read
    // off the event loop when the pool computes them.
    const offLoop = reservation !== undefined;
    const read = await this.#history.readColumns(query.symbol, query.interval, span, MAX_CANDLES + 1, { sources: false, offLoop });
    if (read.info === undefined) return { outcome: 'unknown' };
    let ttlMs = window.lifetimeMs();
    const count = columnsLength(read.candles);
    const refusal = tooManyCandles(count, 'answer');
    if (refusal !== undefined) return { outcome: 'refused', refusal, ttlMs };
    if (read.missing.length > 0) ttlMs = Math.min(ttlMs, PARTIAL_TTL_MS);

    const market: MarketCode = marketOf({ instrument_type: 'equity', timezone: read.info.timezone }) ?? 'CRYPTO';
    const firstMs = count === 0 ? undefined : read.candles.timeMs[0]!;
    let warmupFromMs: number | undefined;
    if (firstMs !== undefined && studies.some((s) => s.definition.intradayOnly)) {
      // VWAP starts at the open of the session the window's first bar belongs to.
      warmupFromMs = sessionOpenAt(market, firstMs);
    }
    const warmup = firstMs === undefined ? { candles: undefined, actions: read.actions, failed: false } : await this.#warmup(query.symbol, query.interval, span.startMs, warmupOf(studies), warmupFromMs, offLoop);
    // Warm-up bars the upstream failed to give now may come later: the answer lives as a partial one does.
    if (warmup.failed) ttlMs = Math.min(ttlMs, PARTIAL_TTL_MS);
    const actions = warmup.actions.length >= read.actions.length ? warmup.actions : read.actions;
    let candles = read.candles;
    let warmupCandles = warmup.candles;
    const to = window.currency;
    if (to !== undefined && needsConversion(read.info.currency, to)) {
      // Studies of converted candles (an SMA in EUR is the SMA of EUR closes): the warm-up and the window
      // converted apart, so the warm-up keeps its count of the bars that have a rate.
      convertibleFrom(read.info.currency, query.symbol);
      afterFirstRate(span);
      if (this.#rates === undefined) throw new DataSourceError('No reference rates are configured: prices cannot be converted', { retryAfterSeconds: 60 });
      const table = await this.#rates.table();
      const convert = (columns: CandleColumns) => convertColumns(table, columns, query.interval, INTERVAL_MS[query.interval], read.info!.timezone, read.info!.currency, to);
      const converted = convert(candles);
      candles = converted.columns;
      if (converted.missing.length > 0) ttlMs = Math.min(ttlMs, PARTIAL_TTL_MS);
      if (warmupCandles !== undefined) warmupCandles = convert(warmupCandles).columns;
    }
    const { sent } = await this.#compute.indicators(
      {
        // Apart: the thread joins them, so the event loop does not copy the bars once more.
        warmup: warmupCandles ?? emptyCandleColumns(0),
        candles,
        actions,
        adjust: window.adjust,
        studies: studySpecs(studies),
        market,
        symbol: query.symbol,
        interval: query.interval,
        source: (read.source as Source | undefined) ?? this.#market.source,
        updatedAt: new Date(this.#now()).toISOString(),
      },
      { reservation },
    );
    return { outcome: 'found', sent, ttlMs };
  }

  /**
   * The `bars` stored bars just before `beforeMs` (fewer when the history begins later), and from
   * `fromMs` on when that reaches further back; read from the store, which fetches what it lacks. The
   * calendar span is estimated, then doubled while it holds too few bars and reading further back
   * still finds more.
   */
  async #warmup(symbol: string, interval: HistoryInterval, beforeMs: number, bars: number, fromMs: number | undefined, offLoop: boolean): Promise<{ candles: CandleColumns | undefined; actions: StoredHistory['actions']; failed: boolean }> {
    if (bars === 0 && (fromMs === undefined || fromMs >= beforeMs)) return { candles: undefined, actions: [], failed: false };
    let reachMs = calendarSpanMs(symbol, interval, Math.max(bars, 1));
    let got: StoredHistory<CandleColumns> | undefined;
    for (let attempt = 0; attempt < WARMUP_READS; attempt++) {
      const startMs = Math.min(beforeMs - reachMs, fromMs ?? Infinity);
      const before = got === undefined ? -1 : columnsLength(got.candles);
      got = await this.#history.readColumns(symbol, interval, { startMs, endMs: beforeMs }, undefined, { sources: false, offLoop });
      const count = columnsLength(got.candles);
      if (count >= bars || count === before) break;
      reachMs *= 2;
    }
    const times = got!.candles.timeMs;
    const fromIndex = fromMs === undefined ? times.length : times.findIndex((t) => t >= fromMs);
    const keep = Math.max(bars, fromIndex === -1 ? 0 : times.length - fromIndex);
    return { candles: sliceColumns(got!.candles, Math.max(0, times.length - keep)), actions: got!.actions, failed: got!.failure !== undefined };
  }
}

