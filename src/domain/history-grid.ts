/**
 * A history window as a cache key may name it: snapped to its interval's grid, so equivalent windows
 * share one key and one store query (a caller varying the millisecond of `start` mints no new keys).
 * Windows are half-open, `[startMs, endMs)`, and a bar belongs to one when its time does; every instant
 * between two bar times selects the same bars, so each bound moves up to the next bar time:
 *
 * - daily, weekly and monthly bars start at the open of a session (crypto and FX: 00:00 UTC), as
 *   `dailyBarStartMs` stamps them: a bound moves to the next session in the market's calendar, named
 *   by its date's 00:00 UTC when that lies between the bound and the open, else by the open;
 * - intraday bars start on their interval's grid from the session's open, and every open is on a
 *   quarter hour in UTC: a bound moves to the next multiple of the interval, or of 15 minutes for
 *   intervals longer than that.
 */
import { parseIsoDate } from './civil-date.js';
import { tradingSessions, type MarketCode } from './market-calendar.js';
import type { HistoryInterval } from './ports/market-data.js';
import { MINUTE_MS, DAY_MS } from './durations.js';

const QUARTER_HOUR_MS = 15 * MINUTE_MS;

const INTRADAY_GRID_MS: Partial<Record<HistoryInterval, number>> = {
  '1m': MINUTE_MS,
  '5m': 5 * MINUTE_MS,
  '15m': QUARTER_HOUR_MS,
  '30m': QUARTER_HOUR_MS,
  '1h': QUARTER_HOUR_MS,
};

/** The most days without a session (a golden week with its weekends), with margin. */
const MAX_GAP_DAYS = 25;

/** The first bar time of `interval` in `market` at or after `atMs`. */
export function nextBarTimeMs(market: MarketCode, interval: HistoryInterval, atMs: number): number {
  const grid = INTRADAY_GRID_MS[interval];
  if (grid !== undefined) return Math.ceil(atMs / grid) * grid;
  if (market === 'CRYPTO' || market === 'FX') return Math.ceil(atMs / DAY_MS) * DAY_MS;
  const session = tradingSessions(market, atMs, atMs + MAX_GAP_DAYS * DAY_MS).find((s) => (s.segments[0]?.startMs ?? -Infinity) >= atMs);
  const openMs = session?.segments[0]?.startMs;
  // Beyond the calendar's tables: the UTC day grid still bounds the keys.
  if (session === undefined || openMs === undefined) return Math.ceil(atMs / DAY_MS) * DAY_MS;
  // Every instant from `atMs` to the open selects the same bars; the session's date at 00:00 UTC names
  // the window as a date would, when it lies in between (a date-only `start` keeps its key).
  // Chosen for the whole gap before the open, not for `atMs`, so every bound in the gap gets one name.
  const midnight = (parseIsoDate(session.date) ?? Math.floor(openMs / DAY_MS)) * DAY_MS;
  if (midnight > openMs) return openMs;
  if (midnight >= atMs) return midnight;
  const barBetween = tradingSessions(market, midnight, atMs).some((s) => {
    const start = s.segments[0]?.startMs;
    return start !== undefined && start >= midnight && start < atMs;
  });
  return barBetween ? openMs : midnight;
}

/** `[startMs, endMs)` with each bound moved up to the next bar time (see the module comment). */
export function snapWindow(market: MarketCode, interval: HistoryInterval, window: { startMs: number; endMs?: number | undefined }): { startMs: number; endMs?: number } {
  const startMs = nextBarTimeMs(market, interval, window.startMs);
  if (window.endMs === undefined) return { startMs };
  return { startMs, endMs: nextBarTimeMs(market, interval, window.endMs) };
}
