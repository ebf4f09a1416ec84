/**
 * Stored candles as columns of numbers (the compute port's `CandleColumns`) and back. A task handed
 * to another thread carries its candles this way: seven buffers move across at once, where an array
 * of objects would be copied field by field on the event loop (12 ms for 33,000 candles here, against
 * under 2 ms to fill the columns).
 */
import type { CandleColumns } from './ports/compute.js';
import type { StoredCandle } from './ports/history-store.js';

/** Columns for `n` candles, every value 0 until filled. */
export function emptyCandleColumns(n: number): CandleColumns {
  return {
    timeMs: new Float64Array(n),
    open: new Float64Array(n),
    high: new Float64Array(n),
    low: new Float64Array(n),
    close: new Float64Array(n),
    adjClose: new Float64Array(n),
    volume: new Float64Array(n),
  };
}

/** `candles` as columns; a null `adjClose` or `volume` becomes NaN. */
export function candleColumns(candles: readonly StoredCandle[]): CandleColumns {
  const n = candles.length;
  const columns = emptyCandleColumns(n);
  for (let i = 0; i < n; i++) {
    const c = candles[i]!;
    columns.timeMs[i] = c.timeMs;
    columns.open[i] = c.open;
    columns.high[i] = c.high;
    columns.low[i] = c.low;
    columns.close[i] = c.close;
    columns.adjClose[i] = c.adjClose ?? NaN;
    columns.volume[i] = c.volume ?? NaN;
  }
  return columns;
}

/** The candles of `columns`, equal to the ones they were made of (NaN back to null). */
export function candlesOf(columns: CandleColumns): StoredCandle[] {
  const n = columns.timeMs.length;
  const out: StoredCandle[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const adjClose = columns.adjClose[i]!;
    const volume = columns.volume[i]!;
    out[i] = {
      timeMs: columns.timeMs[i]!,
      open: columns.open[i]!,
      high: columns.high[i]!,
      low: columns.low[i]!,
      close: columns.close[i]!,
      adjClose: Number.isNaN(adjClose) ? null : adjClose,
      volume: Number.isNaN(volume) ? null : volume,
    };
  }
  return out;
}

/** How many candles `columns` hold. */
export function columnsLength(columns: CandleColumns): number {
  return columns.timeMs.length;
}

/** The buffers under `columns`, for a transfer list: after a transfer the sender's columns are empty. */
export function columnBuffers(columns: CandleColumns): ArrayBuffer[] {
  return [columns.timeMs, columns.open, columns.high, columns.low, columns.close, columns.adjClose, columns.volume].map((c) => c.buffer as ArrayBuffer);
}

const COLUMN_NAMES = ['timeMs', 'open', 'high', 'low', 'close', 'adjClose', 'volume'] as const;

/** Bars `from` (included) to `to` (excluded) of `columns`, as views on the same buffers (no copy). */
export function sliceColumns(columns: CandleColumns, from: number, to: number = columnsLength(columns)): CandleColumns {
  return Object.fromEntries(COLUMN_NAMES.map((name) => [name, columns[name].subarray(from, to)])) as unknown as CandleColumns;
}

/** `parts` one after the other, in new buffers of their own (so they can be handed to another thread whole). */
export function concatColumns(parts: readonly CandleColumns[]): CandleColumns {
  const n = parts.reduce((sum, part) => sum + columnsLength(part), 0);
  const out = Object.fromEntries(COLUMN_NAMES.map((name) => [name, new Float64Array(n)])) as unknown as CandleColumns;
  let at = 0;
  for (const part of parts) {
    for (const name of COLUMN_NAMES) out[name].set(part[name], at);
    at += columnsLength(part);
  }
  return out;
}
