/**
 * The stored history ports: candles, corporate actions, coverage and backfill jobs.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
import type { HistoryInterval } from './market-data.js';

/** One stored bar: its start (epoch ms, UTC), prices as the provider gave them, and volume when known. */
export interface StoredCandle {
  timeMs: number;
  open: number;
  high: number;
  low: number;
  close: number;
  /** Close adjusted for splits and dividends, as the provider gave it; null when it gave none. */
  adjClose: number | null;
  /** Null where the instrument has no volume (indices, some FX). */
  volume: number | null;
}

/**
 * Stored candles as columns, oldest first, one entry per candle in every column. `adjClose` and
 * `volume` hold NaN where the stored value is null (no stored price or volume is ever NaN: the data
 * quality checks refuse them).
 */
export interface CandleColumns {
  timeMs: Float64Array;
  open: Float64Array;
  high: Float64Array;
  low: Float64Array;
  close: Float64Array;
  adjClose: Float64Array;
  volume: Float64Array;
}

/** A dividend (amount per share) or a split (numerator for denominator) effective at `timeMs` (ex-date, UTC). */
export type CorporateAction =
  | { kind: 'dividend'; timeMs: number; amount: number }
  | { kind: 'split'; timeMs: number; numerator: number; denominator: number };

/** A half-open span of time, epoch ms: `startMs` included, `endMs` excluded. */
export interface TimeSpan {
  startMs: number;
  endMs: number;
}

/** Who gave stored data, and when. */
export interface Provenance {
  provider: string;
  fetchedAtMs: number;
}

/**
 * Candles and corporate actions kept in the database, so history is fetched from an upstream once.
 * A candle's identity is (symbol, interval, bar start): writing the same bar again replaces it.
 * "Covered" spans record what was asked of an upstream and answered, so a bar the upstream does not
 * have (inside a covered span, absent from the store) is known to be absent and is not asked again.
 * Every method throws an `AppError` (`DATABASE_ERROR`, `DATABASE_NOT_INITIALIZED`) when the database fails.
 */
export interface CandleStore {
  /** Writes `candles` of one symbol and interval in bulk (in one transaction per batch); resolves to how many were written. */
  putCandles(symbol: string, interval: HistoryInterval, candles: readonly StoredCandle[], source: Provenance): Promise<number>;
  /** Candles with `startMs <= timeMs < endMs`, oldest first, at most `limit` (default: all). */
  getCandles(symbol: string, interval: HistoryInterval, span: TimeSpan, limit?: number): Promise<StoredCandle[]>;
  /**
   * The same bars as `getCandles`, as columns: no object per bar, so a long window neither fills the
   * heap nor the garbage collector's work, and crosses to a compute thread as it is (`ports/compute.ts`).
   * `offLoop`: the read is for a compute task, so a store that can read off the event loop does so
   * whatever the window's size.
   */
  getCandleColumns(symbol: string, interval: HistoryInterval, span: TimeSpan, limit?: number, options?: { offLoop?: boolean }): Promise<CandleColumns>;
  /** The candles in `span` by the provider that gave them (per-candle provenance where providers mix). */
  providerCounts(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<Record<string, number>>;
  /** The start times (ascending) of the candles in `span` that `provider` gave; empty for an unknown series. */
  providerTimes(symbol: string, interval: HistoryInterval, span: TimeSpan, provider: string): Promise<number[]>;
  /** How many candles `getCandles` would return for `span`. */
  countCandles(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<number>;
  /** Drops the candles of `symbol` (every interval, or one) and their coverage, so they are fetched again; resolves to how many candles went. */
  deleteCandles(symbol: string, interval?: HistoryInterval): Promise<number>;
  /** Records that `span` was asked of an upstream and answered (merged with the spans it touches). */
  markCovered(symbol: string, interval: HistoryInterval, span: TimeSpan, source: Provenance): Promise<void>;
  /** The covered spans that overlap `span`, merged and clipped to it, oldest first. */
  coverage(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<TimeSpan[]>;
  /** Writes corporate actions of `symbol` (same kind and time replaces); resolves to how many were written. */
  putActions(symbol: string, actions: readonly CorporateAction[], source: Provenance): Promise<number>;
  /** The corporate actions of `symbol` in `span`, oldest first. */
  getActions(symbol: string, span: TimeSpan): Promise<CorporateAction[]>;
  /**
   * Re-bases the stored bars of `symbol` (every interval) that start before `barsBeforeMs` and were
   * fetched before `fetchedBeforeMs` (bars fetched later already came on the new basis): prices times
   * `priceFactor`, volume divided by it (a 4-for-1 split is 0.25). Resolves to how many bars changed.
   */
  rescale(symbol: string, bars: { barsBeforeMs: number; fetchedBeforeMs: number }, priceFactor: number): Promise<number>;
  /** Records the currency and exchange time zone of `symbol`, which answers from the store carry. */
  putInstrument(symbol: string, info: InstrumentInfo, source: Provenance): Promise<void>;
  /** What `putInstrument` recorded for `symbol`, or `undefined`. */
  getInstrument(symbol: string): Promise<InstrumentInfo | undefined>;
  /** The providers named by the covered spans of `symbol` and `interval` (who fetched what the store holds), without repeats. */
  coverageProviders(symbol: string, interval: HistoryInterval): Promise<string[]>;
  /**
   * Drops the candles and covered spans `provider` gave (of one symbol and interval when given, else of
   * every series), so they are never served as another provider's; resolves to how many candles went.
   */
  purgeProvider(provider: string, series?: { symbol: string; interval: HistoryInterval }): Promise<number>;
  /** How many candles are stored and the bytes the candle tables and their indexes take on disk. */
  footprint(): Promise<{ candles: number; bytes: number }>;
  /**
   * One bounded step of retention: drops at most `maxCandles` candles of `interval` (every symbol) that
   * start before `beforeMs`. In the same transaction, and first, the covered spans of that interval are
   * clipped to start at `beforeMs` at the earliest, so the store never claims a span whose bars it
   * dropped (a span it no longer covers is fetched again when asked for). Resolves to how many candles
   * went: fewer than `maxCandles` once none older is left.
   */
  pruneBefore(interval: HistoryInterval, beforeMs: number, maxCandles: number): Promise<number>;
}

/** What a history answer says of its instrument besides the bars. */
export interface InstrumentInfo {
  currency: string;
  /** IANA time zone of the exchange. */
  timezone: string;
}

/** Where a backfill job stands. */
export type HistoryJobState = 'queued' | 'running' | 'done' | 'failed';

/** A backfill of stored history: symbols, one interval, from `sinceMs` to when it runs. */
/** A stored bar a provider disagreed with, as a verify job lists it. */
export interface JobDivergence {
  symbol: string;
  timeMs: number;
  stored: number;
  /** The close each provider that disagrees gave, by provider. */
  fetched: Record<string, number>;
  repaired: boolean;
}

/** What a verify job was asked and found (absent for a backfill). */
export interface VerifyResult {
  repair: boolean;
  /** Stored bars compared so far. */
  checked: number;
  /** The divergences found, the first `MAX_JOB_DIVERGENCES`. */
  divergences: JobDivergence[];
}

/** The most divergences a verify job keeps in its row (every one is recorded in the data issues). */
export const MAX_JOB_DIVERGENCES = 1000;

export interface HistoryJob {
  id: string;
  /** A backfill stores what is missing; a verify compares the stored bars with every provider. */
  kind: 'backfill' | 'verify';
  /** A verify's settings and findings; absent for a backfill. */
  verify?: VerifyResult;
  symbols: string[];
  interval: HistoryInterval;
  sinceMs: number;
  state: HistoryJobState;
  /** How many symbols are finished (stored, or failed). */
  doneSymbols: number;
  /** Bars stored by this job so far. */
  candles: number;
  /** The symbol being fetched now; null when none. */
  currentSymbol: string | null;
  /** Symbols that could not be backfilled, with why. */
  failures: Array<{ symbol: string; error: string }>;
  createdBy: string;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * Backfill jobs, shared by every instance through the database, so any instance answers for a job
 * and one whose runner died is taken over. Throws `AppError` when the database fails.
 */
export interface HistoryJobStore {
  create(job: HistoryJob): Promise<HistoryJob>;
  /** The job, or `undefined`. */
  get(id: string): Promise<HistoryJob | undefined>;
  /**
   * Takes the job for `owner` when it is queued, or running with a heartbeat before `staleBefore`
   * (its runner is gone); resolves to true when this call took it.
   */
  claim(id: string, owner: string, at: Date, staleBefore: Date): Promise<boolean>;
  /** Saves progress and the heartbeat of the owner's run. */
  update(id: string, progress: Pick<HistoryJob, 'state' | 'doneSymbols' | 'candles' | 'currentSymbol' | 'failures' | 'verify'>, at: Date): Promise<void>;
  /** Ids of jobs that are queued, or running with a heartbeat before `staleBefore`. */
  unfinished(staleBefore: Date): Promise<string[]>;
}
