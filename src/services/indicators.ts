/**
 * Technical indicators over stored history (GET /api/indicators/{symbol}, and the study columns of the
 * history exports). A window's studies are computed from the history store, never asked upstream as
 * such: the window's bars and the warm-up bars before it (read from the store, which fetches what it
 * lacks), so the window's first value equals the one computed over the whole history (within 1e-12 of
 * the seed's weight for the recursive studies: docs/indicators.md). One answer per (symbol, interval,
 * window, basis, studies) is cached through the representation cache like history, filled once across
 * the fleet.
 */
import { columnsOf, computeStudy, parseStudies, warmupOf, type Study } from '../domain/indicators/catalogue.js';
import type { Bars, Series } from '../domain/indicators/studies.js';
import { isoInstant } from '../domain/instant.js';
import { marketOf, type MarketCode } from '../domain/market-calendar.js';
import { sessionKeys, sessionOpenAt } from '../domain/indicators/sessions.js';
import { UnknownSymbolError } from '../domain/errors.js';
import { adjustCandles } from '../domain/history-adjustment.js';
import type { StoredCandle } from '../domain/ports/history-store.js';
import type { HistoryInterval } from '../domain/ports/market-data.js';
import type { components } from '../generated/api.js';
import { INTERVAL_MS, type HistoryStore, type StoredHistory } from './history-store.js';
import type { MarketDataService } from './market-data.js';
import type { HistoryWindow } from './market-data/history.js';
import { DAY_MS, INTRADAY, PARTIAL_TTL_MS } from './market-data/lifetimes.js';
import { TooManyCandlesError, type HistoryParams } from './market-data/history-rules.js';
import { MAX_CANDLES, tooManyCandles } from '../domain/candle-limits.js';
import type { CachedRepresentation, Loaded, RepresentationCache } from './representation-cache.js';

type IndicatorsResponse = components['schemas']['IndicatorsResponse'];
type Source = components['schemas']['Source'];

/** Reads of the warm-up, each twice as far back as the last, while it has fewer bars than needed. */
const WARMUP_READS = 3;

/** The request: a history window and a `studies` list. */
export interface IndicatorParams extends HistoryParams {
  studies: string;
}

/** The calendar time `bars` bars of `interval` take at most, with margin (markets trade some hours of some days). */
function calendarSpanMs(interval: HistoryInterval, bars: number): number {
  if (interval === '1d') return bars * 1.5 * DAY_MS + 10 * DAY_MS;
  if (interval === '1wk' || interval === '1mo') return bars * INTERVAL_MS[interval] + 2 * INTERVAL_MS[interval];
  // A market open 5 hours of a 24-hour day, 5 days of 7, with a long holiday's margin.
  return bars * INTERVAL_MS[interval] * 7 + 5 * DAY_MS;
}

export interface IndicatorServiceOptions {
  engine: RepresentationCache;
  market: MarketDataService;
  history: HistoryStore;
  now?: () => number;
}

/** A study's columns for an export: one per output, values aligned to the window's bar times. */
export interface StudyColumns {
  times: string[];
  columns: Array<{ column: string; values: Series }>;
}

export class IndicatorService {
  readonly #engine: RepresentationCache;
  readonly #market: MarketDataService;
  readonly #history: HistoryStore;
  readonly #now: () => number;

  constructor(options: IndicatorServiceOptions) {
    this.#engine = options.engine;
    this.#market = options.market;
    this.#history = options.history;
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
   * The studies of a window as export columns (`sma_20`, `macd_12_26_9_signal`), from the cached
   * answer, with that answer's ETag. Throws as `get` does.
   */
  async columns(params: IndicatorParams): Promise<StudyColumns & { etag: string }> {
    const window = await this.#market.historyWindow(params);
    const studies = parseStudies(params.studies, INTRADAY.has(window.query.interval));
    const rep = await this.#read(window, studies);
    const { data } = JSON.parse(rep.value) as IndicatorsResponse;
    const columns: StudyColumns['columns'] = [];
    for (const study of studies) {
      const values = data.studies[study.key];
      if (values === undefined) continue;
      if (Array.isArray(values)) columns.push({ column: columnsOf(study)[0]!.column, values });
      else for (const { column, output } of columnsOf(study)) columns.push({ column, values: (values as Record<string, Series>)[output!] ?? [] });
    }
    return { etag: rep.etag, times: data.times, columns };
  }

  async #load(window: HistoryWindow, studies: readonly Study[]): Promise<Loaded> {
    const { query, span } = window;
    const read: StoredHistory = await this.#history.read(query.symbol, query.interval, span, MAX_CANDLES + 1);
    if (read.info === undefined) return { outcome: 'unknown' };
    let ttlMs = window.lifetimeMs();
    const refusal = tooManyCandles(read.candles.length, 'answer');
    if (refusal !== undefined) return { outcome: 'refused', refusal, ttlMs };
    if (read.missing.length > 0) ttlMs = Math.min(ttlMs, PARTIAL_TTL_MS);

    const market: MarketCode = marketOf({ instrument_type: 'equity', timezone: read.info.timezone }) ?? 'CRYPTO';
    const first = read.candles[0];
    let warmupFromMs: number | undefined;
    if (first !== undefined && studies.some((s) => s.definition.intradayOnly)) {
      // VWAP starts at the open of the session the window's first bar belongs to.
      warmupFromMs = sessionOpenAt(market, first.timeMs);
    }
    const warmup = first === undefined ? { candles: [], actions: read.actions, failed: false } : await this.#warmup(query.symbol, query.interval, span.startMs, warmupOf(studies), warmupFromMs);
    // Warm-up bars the upstream failed to give now may come later: the answer lives as a partial one does.
    if (warmup.failed) ttlMs = Math.min(ttlMs, PARTIAL_TTL_MS);
    const actions = warmup.actions.length >= read.actions.length ? warmup.actions : read.actions;
    const candles = adjustCandles([...warmup.candles, ...read.candles], actions, window.adjust);
    const bars = {
      high: candles.map((c) => c.high),
      low: candles.map((c) => c.low),
      close: candles.map((c) => c.close),
      volume: candles.map((c) => c.volume ?? 0),
    };
    const sessions = studies.some((s) => s.definition.intradayOnly) ? sessionKeys(market, candles.map((c) => c.timeMs)) : [];
    const computed: Record<string, Series | Record<string, Series>> = {};
    for (const study of studies) {
      // Each study from its own warm-up, so its values do not depend on the studies asked with it (OBV
      // starts at the window's first bar); VWAP reads back to its session's open, as far as the warm-up goes.
      const own = study.definition.intradayOnly ? warmup.candles.length : Math.min(warmup.candles.length, study.definition.warmup(study.params));
      const from = warmup.candles.length - own;
      const input = from === 0 ? { bars, sessions } : { bars: sliceBars(bars, from), sessions: sessions.slice(from) };
      computed[study.key] = computeStudy(study, input, own);
    }
    const body: IndicatorsResponse = {
      success: true,
      data: { symbol: query.symbol, interval: query.interval, times: read.candles.map((c) => isoInstant(c.timeMs)), studies: computed },
      source: (read.source as Source | undefined) ?? this.#market.source,
      updated_at: new Date(this.#now()).toISOString(),
    };
    return { outcome: 'found', value: JSON.stringify(body), ttlMs };
  }

  /**
   * The `bars` stored bars just before `beforeMs` (fewer when the history begins later), and from
   * `fromMs` on when that reaches further back; read from the store, which fetches what it lacks. The
   * calendar span is estimated, then doubled while it holds too few bars and reading further back
   * still finds more.
   */
  async #warmup(symbol: string, interval: HistoryInterval, beforeMs: number, bars: number, fromMs: number | undefined): Promise<{ candles: StoredCandle[]; actions: StoredHistory['actions']; failed: boolean }> {
    if (bars === 0 && (fromMs === undefined || fromMs >= beforeMs)) return { candles: [], actions: [], failed: false };
    let reachMs = calendarSpanMs(interval, Math.max(bars, 1));
    let got: StoredHistory | undefined;
    for (let attempt = 0; attempt < WARMUP_READS; attempt++) {
      const startMs = Math.min(beforeMs - reachMs, fromMs ?? Infinity);
      const before = got?.candles.length ?? -1;
      got = await this.#history.read(symbol, interval, { startMs, endMs: beforeMs });
      if (got.candles.length >= bars || got.candles.length === before) break;
      reachMs *= 2;
    }
    const candles = got!.candles;
    const fromIndex = fromMs === undefined ? candles.length : candles.findIndex((c) => c.timeMs >= fromMs);
    const keep = Math.max(bars, fromIndex === -1 ? 0 : candles.length - fromIndex);
    return { candles: candles.slice(Math.max(0, candles.length - keep)), actions: got!.actions, failed: got!.failure !== undefined };
  }
}

function sliceBars(bars: Bars, from: number): Bars {
  return { high: bars.high.slice(from), low: bars.low.slice(from), close: bars.close.slice(from), volume: bars.volume.slice(from) };
}
