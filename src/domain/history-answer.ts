/**
 * The candles of a history answer from stored bars: the price basis asked for, the contract's
 * spelling, the data-quality flags, and the JSON of the whole answer. A compute task
 * (`ComputePool.historyAnswer`), so a window of thousands of bars is written off the event loop.
 */
import { candlesOf } from './candle-columns.js';
import { adjustCandles } from './history-adjustment.js';
import { isoInstant } from './instant.js';
import type { HistoryAnswerTask } from './ports/compute.js';
import type { StoredCandle } from './ports/history-store.js';
import type { Candle } from './ports/market-data.js';

/** A stored bar as the contract spells it. */
export function toCandle(c: StoredCandle): Candle {
  return { time: isoInstant(c.timeMs), open: c.open, high: c.high, low: c.low, close: c.close, adj_close: c.adjClose, volume: c.volume === null ? null : Math.round(c.volume) };
}

/** The JSON of `task.body` with its candles: the stored bars on the basis asked for, each with the flags its stored bar carries. */
export function historyAnswer(task: HistoryAnswerTask): string {
  const stored = candlesOf(task.candles);
  const candles = adjustCandles(stored, task.actions, task.adjust).map(toCandle);
  if (task.flags !== undefined) {
    const flags = new Map(task.flags);
    // Candles and stored bars align one to one.
    stored.forEach((bar, i) => {
      const found = flags.get(bar.timeMs);
      const candle = candles[i];
      if (found !== undefined && candle !== undefined) candle.flags = [...found] as Candle['flags'];
    });
  }
  if (task.streamed !== undefined) {
    const times = task.streamed === 'all' ? undefined : new Set(task.streamed);
    stored.forEach((bar, i) => {
      const candle = candles[i];
      if (candle !== undefined && (times === undefined || times.has(bar.timeMs))) candle.from_stream = true;
    });
  }
  // `candles` is already a key of `data`: replacing it keeps the keys in the order the answer always had.
  return JSON.stringify({ ...task.body, data: { ...task.body.data, candles } });
}
