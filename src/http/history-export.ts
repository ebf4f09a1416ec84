/**
 * History as files for analysis: CSV (RFC 4180, a header row `time,open,high,low,close,adj_close,volume`)
 * and an Apache Arrow IPC stream (pyarrow's `ipc.open_stream` and pandas read it; `time` is a UTC
 * millisecond timestamp, prices float64, volume int64, nulls where the JSON has null). Both take the
 * candles in pages, so an export of 200,000 candles is written as it is read, never held whole.
 */
import type { ServerResponse } from 'node:http';
import { finished } from 'node:stream/promises';
import { Float64, Int64, RecordBatch, RecordBatchStreamWriter, Table, TimestampMillisecond, vectorFromArray } from 'apache-arrow';
import type { components } from '../generated/api.js';

type Candle = components['schemas']['Candle'];

/** The columns of both formats, in the order of the JSON schema. */
export const HISTORY_EXPORT_COLUMNS = ['time', 'open', 'high', 'low', 'close', 'adj_close', 'volume'] as const satisfies ReadonlyArray<keyof Candle>;

export const CSV_CONTENT_TYPE = 'text/csv; charset=utf-8';
export const ARROW_CONTENT_TYPE = 'application/vnd.apache.arrow.stream';

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
export function arrowBatch(candles: readonly Candle[], extra?: ExtraColumns): RecordBatch {
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

/** Waits until `res` can take more, so a slow reader holds the export back instead of filling memory. */
function drained(res: ServerResponse): Promise<void> {
  return res.writableNeedDrain ? new Promise((resolve) => res.once('drain', resolve)) : Promise.resolve();
}

/** Writes the CSV of every page of `pages` to `res` (headers already set), then ends it. */
export async function writeCsv(res: ServerResponse, pages: AsyncIterable<readonly Candle[]>): Promise<void> {
  res.write(csvHeader());
  for await (const page of pages) {
    if (res.destroyed) return;
    if (page.length > 0) res.write(csvRows(page));
    await drained(res);
  }
  res.end();
}

/** Writes an Arrow IPC stream of every page of `pages` to `res` (headers already set), then ends it. */
export async function writeArrow(res: ServerResponse, pages: AsyncIterable<readonly Candle[]>, extra?: ExtraColumns): Promise<void> {
  const writer = new RecordBatchStreamWriter();
  const bytes = writer.toNodeStream();
  bytes.pipe(res);
  const done = finished(res).catch(() => undefined);
  let wrote = false;
  for await (const page of pages) {
    if (res.destroyed) break;
    if (page.length === 0 && wrote) continue;
    writer.write(arrowBatch(page, extra));
    wrote = true;
    await drained(res);
  }
  // An empty history is still a stream with its schema, which readers open as an empty table.
  if (!wrote) writer.write(arrowBatch([], extra));
  writer.finish();
  await done;
}
