/**
 * The SQLite reader's thread (`sqlite-reader.ts`; piscina calls the default export once per read):
 * its own read-only connection to the database file (WAL: it reads the last committed state while
 * the event loop's connection writes), the bars answered as columns whose buffers move back without
 * a copy.
 */
import Database, { type Statement } from 'better-sqlite3';
import { move, transferableSymbol, valueSymbol, workerData } from 'piscina';
import type { CandleColumns } from '../../domain/ports/history-store.js';
import { rowsToColumns, SQLITE_SELECT_CANDLES, type ArrayRow } from './candle-rows.js';

export interface ReadRequest {
  seriesId: number;
  startMs: number;
  endMs: number;
  /** At most this many bars; `-1`: every bar of the span. */
  limit: number;
}

/** Opened by the first read, not as the module loads: a failure to open then rejects that read with its reason. */
let select: Statement | undefined;

export default function read(request: ReadRequest): CandleColumns {
  let columns: CandleColumns;
  try {
    select ??= new Database((workerData as { path: string }).path, { readonly: true, fileMustExist: true }).prepare(SQLITE_SELECT_CANDLES).raw(true);
    columns = rowsToColumns(select.all(request.seriesId, request.startMs, request.endMs, request.limit) as ArrayRow[]);
  } catch (err) {
    // better-sqlite3's SqliteError loses its message on the way to the event loop; a plain Error keeps it.
    throw new Error(err instanceof Error ? err.message : String(err));
  }
  return move({ [transferableSymbol]: Object.values(columns).map((c: Float64Array) => c.buffer), [valueSymbol]: columns }) as unknown as CandleColumns;
}
