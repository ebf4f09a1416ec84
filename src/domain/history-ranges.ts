/** The named history ranges (`range=1mo`, ...) as instants: one table for the service, the router and the adapters. */
import type { HistoryRange } from './ports/market-data.js';
import { DAY_MS } from './durations.js';

/** How many calendar days each fixed range reaches back; `5d` spans a week, so it holds five sessions. */
export const RANGE_DAYS: Readonly<Record<Exclude<HistoryRange, 'ytd' | 'max'>, number>> = {
  '1d': 1,
  '5d': 7,
  '1mo': 31,
  '3mo': 92,
  '6mo': 183,
  '1y': 366,
  '2y': 731,
  '5y': 1827,
  '10y': 3653,
};

/** The instant `range` starts at, seen at `nowMs`: the start of the UTC year for `ytd`, 0 for `max`. */
export function rangeStartMs(range: HistoryRange, nowMs: number): number {
  if (range === 'max') return 0;
  if (range === 'ytd') return Date.UTC(new Date(nowMs).getUTCFullYear(), 0, 1);
  return nowMs - RANGE_DAYS[range] * DAY_MS;
}
