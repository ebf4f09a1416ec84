/** How long a bar of each history interval lasts at its shortest, and so how many bars a span can hold. */
import type { HistoryInterval } from './ports/market-data.js';
import type { TimeSpan } from './ports/history-store.js';
import { MINUTE_MS, DAY_MS } from './durations.js';

/** A bar's length at its shortest (a month: February's 28 days). */
export const SHORTEST_BAR_MS: Readonly<Record<HistoryInterval, number>> = {
  '1m': MINUTE_MS,
  '5m': 5 * MINUTE_MS,
  '15m': 15 * MINUTE_MS,
  '30m': 30 * MINUTE_MS,
  '1h': 60 * MINUTE_MS,
  '1d': DAY_MS,
  '1wk': 7 * DAY_MS,
  '1mo': 28 * DAY_MS,
};

/** The most bars of `interval` that `span` can hold, whatever the market's hours. */
export function barsAtMost(interval: HistoryInterval, span: TimeSpan): number {
  return Math.max(0, Math.ceil((span.endMs - span.startMs) / SHORTEST_BAR_MS[interval]));
}
