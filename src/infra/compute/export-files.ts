/**
 * History as files for analysis: CSV (RFC 4180, a header row `time,open,high,low,close,adj_close,volume`)
 * and an Apache Arrow IPC stream (pyarrow's `ipc.open_stream` and pandas read it; `time` is a UTC
 * millisecond timestamp, prices float64, volume int64, nulls where the JSON has null). Compute tasks
 * (`ComputePool.exportAnswer`, `exportPage`): formatting 10,000 candles takes 10 to 20 ms, so it runs
 * off the event loop. A streamed export is written page by page: each page is a task, and the parts
 * it gives are written one after the other, the end marker once after the last.
 */
import { createRequire } from 'node:module';
import type * as Arrow from 'apache-arrow';
import { candlesOf } from '../../domain/candle-columns.js';
import { adjustCandles } from '../../domain/history-adjustment.js';
import { toCandle } from '../../domain/history-answer.js';
import type { AnswerExportTask, ExportPart, ExportStudies, PageExportTask } from '../../domain/ports/compute.js';
import type { Candle } from '../../domain/ports/market-data.js';
import type { components } from '../../generated/api.js';

type HistoryResponse = components['schemas']['HistoryResponse'];
type IndicatorsResponse = components['schemas']['IndicatorsResponse'];
type Series = Array<number | null>;

let arrowModule: typeof Arrow | undefined;
/**
 * apache-arrow, loaded with the first Arrow export: it takes ~150 ms to load, which every worker
 * thread (and the event loop) would otherwise pay at startup for a format most callers never ask.
 */
function arrow(): typeof Arrow {
  arrowModule ??= createRequire(import.meta.url)('apache-arrow') as typeof Arrow;
  return arrowModule;
}

/** The columns of both formats, in the order of the JSON schema. */
export const HISTORY_EXPORT_COLUMNS = ['time', 'open', 'high', 'low', 'close', 'adj_close', 'volume'] as const satisfies ReadonlyArray<keyof Candle>;

/** RFC 4180 ends records with CRLF. */
const EOL = '\r\n';

/**
 * Study columns after the candle columns (`sma_20`, `macd_12_26_9_signal`): one value per candle,
 * in the candles' order, null where the study has none.
 */
export interface ExtraColumns {
  names: readonly string[];
  /** `values[c][i]`: column `c` at candle `i`. */
  values: ReadonlyArray<ReadonlyArray<number | null>>;
}

/** The header row. */
export function csvHeader(extra?: ExtraColumns): string {
  return [...HISTORY_EXPORT_COLUMNS, ...(extra?.names ?? [])].join(',') + EOL;
}

/**
 * Rows of `candles`: numbers as JSON writes them (a reader gets the JSON values back), null as an
 * empty field. Nothing needs quoting: times are ISO 8601 and the rest are numbers.
 */
export function csvRows(candles: readonly Candle[], extra?: ExtraColumns): string {
  let out = '';
  for (let i = 0; i < candles.length; i++) {
    const c = candles[i]!;
    let studies = '';
    if (extra !== undefined) for (const column of extra.values) studies += `,${column[i] ?? ''}`;
    out += `${c.time},${c.open},${c.high},${c.low},${c.close},${c.adj_close ?? ''},${c.volume ?? ''}${studies}${EOL}`;
  }
  return out;
}

/** One Arrow record batch of `candles`. */
export function arrowBatch(candles: readonly Candle[], extra?: ExtraColumns): Arrow.RecordBatch {
  const { Float64, Int64, RecordBatch, Table, TimestampMillisecond, vectorFromArray } = arrow();
  const column = (pick: (c: Candle) => number | null) => vectorFromArray(candles.map(pick), new Float64());
  const table = new Table({
    time: vectorFromArray(
      candles.map((c) => Date.parse(c.time)),
      new TimestampMillisecond('UTC'),
    ),
    open: column((c) => c.open),
    high: column((c) => c.high),
    low: column((c) => c.low),
    close: column((c) => c.close),
    adj_close: column((c) => c.adj_close),
    volume: vectorFromArray(
      candles.map((c) => (c.volume === null ? null : BigInt(c.volume))),
      new Int64(),
    ),
    ...Object.fromEntries((extra?.names ?? []).map((name, c) => [name, vectorFromArray([...extra!.values[c]!], new Float64())])),
  });
  return table.batches[0] ?? new RecordBatch(table.schema);
}

/** An Arrow IPC stream of one batch: the schema, the batch, the end-of-stream marker. */
function arrowStream(batch: Arrow.RecordBatch): Uint8Array {
  const writer = new (arrow().RecordBatchStreamWriter)();
  writer.write(batch);
  writer.finish();
  return writer.toUint8Array(true);
}

/**
 * The study columns of `studies` aligned to `candles` by time: null where a candle has no study bar;
 * a study the answer lacks gives no column.
 */
function studyColumns(candles: readonly Candle[], studies: ExportStudies): ExtraColumns {
  const { data } = JSON.parse(studies.body) as IndicatorsResponse;
  const at = new Map(data.times.map((t, i) => [t, i]));
  const rows = candles.map((c) => at.get(c.time));
  const names: string[] = [];
  const values: Series[] = [];
  for (const { column, key, output } of studies.columns) {
    const series = data.studies[key];
    if (series === undefined) continue;
    const own: Series = Array.isArray(series) ? series : ((series as Record<string, Series>)[output!] ?? []);
    names.push(column);
    values.push(rows.map((i) => (i === undefined ? null : (own[i] ?? null))));
  }
  return { names, values };
}

/** A cached history answer (and its study columns) as the whole file. */
export function answerFile(task: AnswerExportTask): string | Uint8Array {
  const { candles } = (JSON.parse(task.history) as HistoryResponse).data;
  const extra = task.studies === undefined ? undefined : studyColumns(candles, task.studies);
  if (task.format === 'csv') return csvHeader(extra) + csvRows(candles, extra);
  return arrowStream(arrowBatch(candles, extra));
}

/** One page of a streamed export: CSV rows (after the header on the first page), or a one-batch Arrow stream. */
export function pageFile(task: PageExportTask): string | Uint8Array {
  const candles = adjustCandles(candlesOf(task.candles), task.actions, task.adjust).map(toCandle);
  if (task.format === 'csv') return (task.first ? csvHeader() : '') + csvRows(candles);
  return arrowStream(arrowBatch(candles));
}

/** Arrow's end-of-stream marker: a continuation token and a zero length. */
const ARROW_END = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0);

/**
 * What `pageFile` gave, as a part of the export: CSV rows as they are; of a one-batch Arrow stream,
 * the batch (after the schema on the first page) with the end marker apart, so the pages of one
 * export make one stream. Each IPC message starts with the continuation token and its metadata's
 * length (padding included), and a schema message has no body: the schema is the first 8 + length
 * bytes. Throws when the bytes are not framed so (a future apache-arrow writing another framing; the
 * export test reads a stream of several pages back).
 */
export function exportPart(format: PageExportTask['format'], first: boolean, file: string | Uint8Array): ExportPart {
  if (format === 'csv') return { body: file as string, end: '' };
  const bytes = file as Uint8Array;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tail = bytes.subarray(bytes.length - ARROW_END.length);
  if (bytes.length < 16 || view.getUint32(0, true) !== 0xffffffff || !tail.every((b, i) => b === ARROW_END[i])) {
    throw new Error('apache-arrow wrote a stream framed otherwise than the Arrow IPC format says: the pages of an export cannot be joined');
  }
  const schemaBytes = 8 + view.getInt32(4, true);
  return { body: bytes.subarray(first ? 0 : schemaBytes, bytes.length - ARROW_END.length), end: ARROW_END };
}
