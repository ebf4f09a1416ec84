/**
 * The compute port: CPU-heavy work (indicators, export files, large history answers) handed off the
 * event loop (DESIGN 24). Every task is plain data in and a string or bytes out, so an adapter may run
 * it on another thread; the candles travel as columns of numbers, which cross a thread without being
 * copied one object at a time.
 * Adapters in `src/infra` implement it and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
import type { CandleColumns, CorporateAction } from './history-store.js';
import type { HistoryInterval } from './market-data.js';
import type { components } from '../../generated/api.js';

export type { CandleColumns };

/** The price basis of an answer (`history-adjustment.ts`). */
export type AdjustMode = 'none' | 'splits' | 'all';

/** One study asked for, normalised (`adx:14`): its name and every parameter (defaults filled in). */
export interface StudySpec {
  key: string;
  name: string;
  params: number[];
}

/** The studies of one window, as `GET /api/indicators` answers them. */
export interface IndicatorTask {
  /** The bars before the window its studies start from, as stored (split-adjusted). */
  warmup: CandleColumns;
  /** The window's bars, as stored. */
  candles: CandleColumns;
  actions: readonly CorporateAction[];
  adjust: AdjustMode;
  studies: readonly StudySpec[];
  /** The market whose sessions anchor VWAP (a `MarketCode`); read only when a study needs sessions. */
  market: string;
  symbol: string;
  interval: HistoryInterval;
  source: components['schemas']['Source'];
  updatedAt: string;
}

/** A history answer of stored candles: everything but the candles is ready in `body`. */
export interface HistoryAnswerTask {
  /** The answer with `data.candles` empty: the task fills it in place, so the keys keep their order. */
  body: components['schemas']['HistoryResponse'];
  /** The window's bars as stored. */
  candles: CandleColumns;
  actions: readonly CorporateAction[];
  adjust: AdjustMode;
  /** The data-quality flags of stored bars, by bar time (ms). */
  flags?: ReadonlyArray<[number, readonly string[]]> | undefined;
  /** The bars built from a push stream (DESIGN 26): every one, or their times (ms); each such candle says `from_stream`. */
  streamed?: 'all' | readonly number[] | undefined;
}

/** A body's UTF-8 bytes and its ETag, as sent. */
export interface SentBody {
  body: Buffer;
  etag: string;
}

/**
 * A JSON answer a task wrote: its bytes and ETag, made on the task's thread. They are cached and sent
 * as they are; the event loop decodes them only for a caller that needs the text.
 */
export interface ComputedJson {
  sent: SentBody;
}

export type ExportFormat = 'csv' | 'arrow';

/** Study columns added to an export: the cached indicators answer, and which of its series is which column. */
export interface ExportStudies {
  /** The JSON of the indicators answer of the same window. */
  body: string;
  /** In column order: `sma_20` is the series `sma:20`; `macd_12_26_9_signal` is output `signal` of `macd:12:26:9`. */
  columns: ReadonlyArray<{ column: string; key: string; output?: string | undefined }>;
}

/** A cached JSON history answer written as a whole file. */
export interface AnswerExportTask {
  format: ExportFormat;
  /** The JSON of the history answer. */
  history: string;
  studies?: ExportStudies | undefined;
}

/** One page of an export streamed from the store. */
export interface PageExportTask {
  format: ExportFormat;
  candles: CandleColumns;
  actions: readonly CorporateAction[];
  adjust: AdjustMode;
  /** True for the first page: it carries the CSV header or the Arrow schema. */
  first: boolean;
}

/** A page of an export: `body` continues the file; `end` closes it, written once after the last page. */
export interface ExportPart {
  body: string | Uint8Array;
  end: string | Uint8Array;
}

/**
 * A place in the pool taken before a task's input is read (a long store read), so a full pool refuses
 * the request before that work rather than after it. Handed to the task's call, which uses it; a
 * request that ends without a task gives it back with `release` (calling it again does nothing).
 */
export interface ComputeReservation {
  release(): void;
}

export interface ComputeOptions {
  /**
   * Aborts the task while it waits for a thread (the client went away): it then rejects with the
   * signal's reason. A task already running finishes, and its result is dropped.
   */
  signal?: AbortSignal | undefined;
  /**
   * `refuse` (default): a full queue rejects the task at once with `ServiceBusyError`. `wait`: the task
   * waits for room instead, for the later pages of an export already admitted.
   */
  whenFull?: 'refuse' | 'wait';
  /** The place `reserve` gave this task: it is not refused, and waits for a thread when none is free. */
  reservation?: ComputeReservation | undefined;
}

/**
 * CPU-heavy work, run where it does not hold the event loop. Each method rejects with
 * `ServiceBusyError` (503, Retry-After) when the work queued on this instance is at its bound, and
 * with the task's own error when it fails. Small tasks may run on the calling thread.
 */
export interface ComputePool {
  /**
   * Takes a place for a task of about `bars` bars (candles, times studies for indicators) before its
   * input is read. Throws `ServiceBusyError` when the pool is full; undefined when a task that small
   * runs on the calling thread and needs no place.
   */
  reserve(bars: number): ComputeReservation | undefined;
  /**
   * Starts the threads and resolves once each has loaded its modules: a serving process awaits it
   * before it listens, so that its first large task does not wait for a thread to start (and the
   * threads do not load while the first requests are served).
   */
  warm(): Promise<void>;
  /** The JSON of the indicators answer of one window. */
  indicators(task: IndicatorTask, options?: ComputeOptions): Promise<ComputedJson>;
  /** The JSON of a history answer whose candles come from the store. */
  historyAnswer(task: HistoryAnswerTask, options?: ComputeOptions): Promise<ComputedJson>;
  /** A cached history answer (and its study columns) as a CSV text or an Arrow IPC stream. */
  exportAnswer(task: AnswerExportTask, options?: ComputeOptions): Promise<string | Uint8Array>;
  /** One page of a streamed export. */
  exportPage(task: PageExportTask, options?: ComputeOptions): Promise<ExportPart>;
  /** Finishes the tasks running, refuses the rest and stops the threads. */
  close(): Promise<void>;
}
