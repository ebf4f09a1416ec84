import { describe, expect, it } from 'vitest';
import { absentMinutes, aggregateMinutes, bucketStart, sessionSpans } from '../../src/domain/live-bar-buckets.js';
import { capMissing, mergeMissing, type MissingSpan } from '../../src/domain/missing-spans.js';
import type { StoredCandle } from '../../src/domain/ports/history-store.js';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

function minute(timeMs: number, price: number, volume: number | null = 100): StoredCandle {
  return { timeMs, open: price, high: price + 1, low: price - 1, close: price + 0.5, adjClose: null, volume };
}

describe('live bars read as history', () => {
  it('when a New York day is asked, then its expected minutes are the regular session only', () => {
    const day = { startMs: Date.parse('2026-09-15T00:00:00Z'), endMs: Date.parse('2026-09-16T00:00:00Z') };

    expect(sessionSpans('US', day)).toEqual([{ startMs: Date.parse('2026-09-15T13:30:00Z'), endMs: Date.parse('2026-09-15T20:00:00Z') }]);
  });

  it('when hourly bars are built in New York, then they start at 9:30 as the session does, not on the UTC hour', () => {
    const segments = sessionSpans('US', { startMs: Date.parse('2026-09-15T00:00:00Z'), endMs: Date.parse('2026-09-16T00:00:00Z') });

    expect(bucketStart(segments, HOUR_MS, Date.parse('2026-09-15T14:29:00Z'))).toBe(Date.parse('2026-09-15T13:30:00Z'));
    expect(bucketStart(segments, HOUR_MS, Date.parse('2026-09-15T14:30:00Z'))).toBe(Date.parse('2026-09-15T14:30:00Z'));
    // Outside the session (a pre-market minute), the UTC grid.
    expect(bucketStart(segments, HOUR_MS, Date.parse('2026-09-15T12:10:00Z'))).toBe(Date.parse('2026-09-15T12:00:00Z'));
  });

  it('when hourly bars are built in Hong Kong, then the afternoon ones start at the end of the lunch break', () => {
    const segments = sessionSpans('HK', { startMs: Date.parse('2026-09-15T00:00:00Z'), endMs: Date.parse('2026-09-16T00:00:00Z') });
    expect(segments).toHaveLength(2);

    expect(bucketStart(segments, HOUR_MS, segments[1]!.startMs + 61 * MINUTE_MS)).toBe(segments[1]!.startMs + HOUR_MS);
  });

  it('when minutes are built into 5-minute bars, then open is the first, close the last, high the highest, low the lowest and volume the sum; a bar lacking minutes is built from those present', () => {
    const open = Date.parse('2026-09-15T13:30:00Z');
    const minutes = [minute(open, 10), minute(open + MINUTE_MS, 12), minute(open + 2 * MINUTE_MS, 9, null), minute(open + 6 * MINUTE_MS, 11)];
    const segments = [{ startMs: open, endMs: open + HOUR_MS }];

    expect(aggregateMinutes(minutes, 5 * MINUTE_MS, segments)).toEqual([
      { timeMs: open, open: 10, high: 13, low: 8, close: 9.5, adjClose: null, volume: 200 },
      { timeMs: open + 5 * MINUTE_MS, open: 11, high: 12, low: 10, close: 11.5, adjClose: null, volume: 100 },
    ]);
  });

  it('when minutes of a session have no bar, then each run of them is one span', () => {
    const open = Date.parse('2026-09-15T13:30:00Z');
    const expected = [{ startMs: open, endMs: open + 10 * MINUTE_MS }];

    expect(absentMinutes(expected, [open, open + MINUTE_MS, open + 4 * MINUTE_MS, open + 9 * MINUTE_MS])).toEqual([
      { startMs: open + 2 * MINUTE_MS, endMs: open + 4 * MINUTE_MS },
      { startMs: open + 5 * MINUTE_MS, endMs: open + 9 * MINUTE_MS },
    ]);
    expect(absentMinutes(expected, [])).toEqual(expected);
  });

  it('when missing spans touch, then only those with the same reason merge; past 100, the last reaches to the end of the rest', () => {
    expect(mergeMissing([
      { startMs: 0, endMs: 10, reason: 'no_stream_data' },
      { startMs: 10, endMs: 20, reason: 'no_stream_data' },
      { startMs: 20, endMs: 30, reason: 'beyond_reach' },
    ])).toEqual([
      { startMs: 0, endMs: 20, reason: 'no_stream_data' },
      { startMs: 20, endMs: 30, reason: 'beyond_reach' },
    ]);
    const many: MissingSpan[] = Array.from({ length: 150 }, (_, i) => ({ startMs: i * 10, endMs: i * 10 + 5, reason: 'no_stream_data' }));
    const capped = capMissing(many);
    expect(capped).toHaveLength(100);
    expect(capped[99]).toEqual({ startMs: 990, endMs: 1495, reason: 'no_stream_data' });
  });
});
