/**
 * Live one-minute bars read as history (DESIGN 26): which minutes of a window an exchange's regular
 * sessions expect, which of those have no bar, and longer intraday bars built from the minutes.
 *
 * Longer bars start where the upstreams start theirs: on the interval's grid counted from each
 * session segment's open (an hourly bar of New York starts at 9:30, and after Tokyo's lunch at
 * 12:30), and on the UTC grid outside sessions and for markets that never close.
 */
import { tradingSessions, type MarketCode } from './market-calendar.js';
import type { StoredCandle, TimeSpan } from './ports/history-store.js';
import { MINUTE_MS } from './durations.js';

/** The regular-session segments of `market` inside `span`, clipped to it, oldest first. */
export function sessionSpans(market: MarketCode, span: TimeSpan): TimeSpan[] {
  const spans: TimeSpan[] = [];
  for (const session of tradingSessions(market, span.startMs, span.endMs)) {
    for (const segment of session.segments) {
      const startMs = Math.max(segment.startMs, span.startMs);
      const endMs = Math.min(segment.endMs, span.endMs);
      if (endMs > startMs) spans.push({ startMs, endMs });
    }
  }
  return spans.sort((a, b) => a.startMs - b.startMs);
}

/**
 * The minutes of `expected` (oldest first) that hold no bar: `times` are the bar starts present,
 * ascending; each run of absent minutes is one span.
 */
export function absentMinutes(expected: readonly TimeSpan[], times: ArrayLike<number>): TimeSpan[] {
  const absent: TimeSpan[] = [];
  let i = 0;
  for (const span of expected) {
    const first = Math.ceil(span.startMs / MINUTE_MS) * MINUTE_MS;
    for (let t = first; t < span.endMs; t += MINUTE_MS) {
      while (i < times.length && times[i]! < t) i++;
      if (i < times.length && times[i] === t) continue;
      const last = absent.at(-1);
      if (last !== undefined && last.endMs === t) last.endMs = t + MINUTE_MS;
      else absent.push({ startMs: t, endMs: t + MINUTE_MS });
    }
  }
  return absent;
}

/** The start of the bar of `intervalMs` that the minute `timeMs` belongs to (see the module comment). */
export function bucketStart(segments: readonly TimeSpan[], intervalMs: number, timeMs: number): number {
  const segment = segments.find((s) => s.startMs <= timeMs && timeMs < s.endMs);
  if (segment === undefined) return Math.floor(timeMs / intervalMs) * intervalMs;
  return segment.startMs + Math.floor((timeMs - segment.startMs) / intervalMs) * intervalMs;
}

/**
 * One-minute bars (ascending) as bars of `intervalMs`: open the first minute's, close the last's,
 * high the highest, low the lowest, volume the sum (null when no minute has one). A bar is built from
 * the minutes present; the absent ones are the caller's to list.
 */
export function aggregateMinutes(minutes: readonly StoredCandle[], intervalMs: number, segments: readonly TimeSpan[]): StoredCandle[] {
  const bars: StoredCandle[] = [];
  let current: StoredCandle | undefined;
  for (const m of minutes) {
    const start = bucketStart(segments, intervalMs, m.timeMs);
    if (current === undefined || current.timeMs !== start) {
      current = { timeMs: start, open: m.open, high: m.high, low: m.low, close: m.close, adjClose: null, volume: m.volume };
      bars.push(current);
      continue;
    }
    current.high = Math.max(current.high, m.high);
    current.low = Math.min(current.low, m.low);
    current.close = m.close;
    if (m.volume !== null) current.volume = (current.volume ?? 0) + m.volume;
  }
  return bars;
}
