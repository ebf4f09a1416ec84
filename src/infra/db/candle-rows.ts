/**
 * A candle as its database row reads (better-sqlite3's raw mode, pg's array row mode), and rows as
 * columns: shared by the candle store and its SQLite reader thread.
 */
import { emptyCandleColumns } from '../../domain/candle-columns.js';
import type { CandleColumns } from '../../domain/ports/history-store.js';

/** A candle's columns (t, open, high, low, close, adj_close, volume) as an array (pg gives a bigint `t` as a string). */
export type ArrayRow = [t: number | string, open: number, high: number, low: number, close: number, adjClose: number | null, volume: number | null];

/** The SELECT list of an `ArrayRow`. */
export const CANDLE_ROW_COLUMNS = 't, open, high, low, close, adj_close, volume';

/** Rows as columns (a null adjusted close or volume as NaN), with no object per row. */
export function rowsToColumns(rows: readonly ArrayRow[]): CandleColumns {
  const n = rows.length;
  const columns = emptyCandleColumns(n);
  for (let i = 0; i < n; i++) {
    const row = rows[i]!;
    columns.timeMs[i] = Number(row[0]);
    columns.open[i] = row[1];
    columns.high[i] = row[2];
    columns.low[i] = row[3];
    columns.close[i] = row[4];
    columns.adjClose[i] = row[5] ?? NaN;
    columns.volume[i] = row[6] ?? NaN;
  }
  return columns;
}

/** SQLite's read of a series' bars in a span, oldest first, at most `LIMIT` (-1: all). */
export const SQLITE_SELECT_CANDLES = `SELECT ${CANDLE_ROW_COLUMNS} FROM candles WHERE series_id = ? AND t >= ? AND t < ? ORDER BY t LIMIT ?`;
