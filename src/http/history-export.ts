/**
 * History as files for analysis on the wire: CSV (RFC 4180) and an Apache Arrow IPC stream. The
 * bytes are made by the compute pool (`infra/compute/export-files.ts` says the formats), off the
 * event loop; this module sends them. An export streamed from the store is formatted and written
 * page by page, so 200,000 candles are never held whole, and a slow reader holds the export back.
 */
import type { ServerResponse } from 'node:http';
import { candleColumns, columnsLength } from '../domain/candle-columns.js';
import type { CandleColumns, ComputePool, ComputeReservation, ExportFormat } from '../domain/ports/compute.js';
import type { HistoryExport } from '../services/market-data/exports.js';

export const CSV_CONTENT_TYPE = 'text/csv; charset=utf-8';
export const ARROW_CONTENT_TYPE = 'application/vnd.apache.arrow.stream';

/** Waits until `res` can take more (or is gone), so a slow reader holds the export back instead of filling memory. */
function drained(res: ServerResponse): Promise<void> {
  if (!res.writableNeedDrain || res.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
  });
}

/**
 * An AbortSignal that fires when `res` closes before its answer is complete (the client went away):
 * compute tasks of this answer still waiting for a thread are dropped. `stop` forgets `res`.
 */
export function abortOnClose(res: ServerResponse): { signal: AbortSignal; stop: () => void } {
  const controller = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) controller.abort(new Error('the client went away before the answer was written'));
  };
  res.once('close', onClose);
  return { signal: controller.signal, stop: () => res.off('close', onClose) };
}

/**
 * Writes `exported` to `res` as `format`, page by page, each page formatted by the compute pool.
 * `start` sets the status and headers; it is called once the first page is ready, so a refusal of
 * the first page (the pool's queue is full: 503) still goes out as an error answer; with the
 * `reservation` taken before the export was opened, the first page waits for its thread. Later pages wait
 * for room in the pool instead: an export begun is never cut off for that. Ends `res`; returns quietly
 * when the client went away.
 */
export async function writeExport(
  res: ServerResponse,
  compute: Pick<ComputePool, 'exportPage'>,
  exported: Pick<HistoryExport, 'pages' | 'actions' | 'adjust'>,
  format: ExportFormat,
  start: () => void,
  reservation?: ComputeReservation,
): Promise<void> {
  const { signal, stop } = abortOnClose(res);
  let started = false;
  let end: string | Uint8Array = '';
  const write = async (candles: CandleColumns) => {
    const part = await compute.exportPage({ format, candles, actions: exported.actions, adjust: exported.adjust, first: !started }, { signal, whenFull: started ? 'wait' : 'refuse', reservation: started ? undefined : reservation });
    if (!started) start();
    started = true;
    end = part.end;
    res.write(part.body);
    await drained(res);
  };
  try {
    for await (const page of exported.pages) {
      if (res.destroyed) return;
      if (columnsLength(page) === 0 && started) continue;
      await write(page);
    }
    // An empty history is still a file: the CSV header, or an Arrow stream with its schema (readers open it as an empty table).
    if (!started) await write(candleColumns([]));
    res.end(end);
  } catch (err) {
    if (signal.aborted) return;
    throw err;
  } finally {
    stop();
  }
}
