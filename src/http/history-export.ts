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

/** The header row. */
export function csvHeader(): string {
  return HISTORY_EXPORT_COLUMNS.join(',') + EOL;
}

/**
 * Rows of `candles`: numbers as JSON writes them (a reader gets the JSON values back), null as an
 * empty field. Nothing needs quoting: times are ISO 8601 and the rest are numbers.
 */
export function csvRows(candles: readonly Candle[]): string {
  let out = '';
  for (const c of candles) out += `${c.time},${c.open},${c.high},${c.low},${c.close},${c.adj_close ?? ''},${c.volume ?? ''}${EOL}`;
  return out;
}

/** One Arrow record batch of `candles`. */
export function arrowBatch(candles: readonly Candle[]): RecordBatch {
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
export async function writeArrow(res: ServerResponse, pages: AsyncIterable<readonly Candle[]>): Promise<void> {
  const writer = new RecordBatchStreamWriter();
  const bytes = writer.toNodeStream();
  bytes.pipe(res);
  const done = finished(res).catch(() => undefined);
  let wrote = false;
  for await (const page of pages) {
    if (res.destroyed) break;
    if (page.length === 0 && wrote) continue;
    writer.write(arrowBatch(page));
    wrote = true;
    await drained(res);
  }
  // An empty history is still a stream with its schema, which readers open as an empty table.
  if (!wrote) writer.write(arrowBatch([]));
  writer.finish();
  await done;
}
