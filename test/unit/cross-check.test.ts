/**
 * The cross-check of daily closes (DataQuality.crossCheck, DESIGN 20) with three sources: a majority
 * agreeing against the stored provider's close replaces it (recorded, the raw bar kept); a stored close
 * the majority vouches for stays unflagged while the outlier is on record; with two sources a divergence
 * is only suspect. Every record names the stored bar's provider and each one that disagrees, with their
 * closes. The issue store is a plain array behind the port.
 */
import { describe, expect, it } from 'vitest';
import type { History } from '../../src/domain/ports/market-data.js';
import type { DataIssue, DataIssueStore } from '../../src/domain/quality/data-issues.js';
import { DataQuality, type ReferenceAnswer } from '../../src/services/data-quality.js';

const DAY = Date.parse('2023-01-05T14:30:00Z');
const bar = (close: number) => ({ timeMs: DAY, open: close, high: close, low: close, close, adjClose: close, volume: 1000 });
const answer = (provider: string, close: number): ReferenceAnswer => ({
  provider,
  history: {
    symbol: 'AAPL',
    currency: 'USD',
    timezone: 'America/New_York',
    interval: '1d',
    // Another provider stamps the same session at New York midnight.
    candles: [{ time: '2023-01-05T05:00:00.000Z', open: close, high: close, low: close, close, adj_close: close, volume: 1000 }],
    events: { dividends: [], splits: [] },
  } as unknown as History,
});

function quality(others: ReferenceAnswer[]): { dq: DataQuality; recorded: DataIssue[] } {
  const recorded: DataIssue[] = [];
  const store: DataIssueStore = {
    record: async (issues) => recorded.push(...issues),
    forBars: async (symbol, interval, startMs, endMs) => recorded.filter((i) => i.symbol === symbol && i.interval === interval && i.timeMs >= startMs && i.timeMs < endMs),
    list: async () => recorded.slice(),
  };
  return { dq: new DataQuality({ store, others: async () => others, divergenceBps: 50 }), recorded };
}

const check = (dq: DataQuality, close: number) =>
  dq.crossCheck({ symbol: 'AAPL', interval: '1d', span: { startMs: DAY - 86_400_000, endMs: DAY + 86_400_000 }, currency: 'USD', timezone: 'America/New_York', candles: [bar(close)], provider: 'polygon' });

describe('the cross-check of daily closes', () => {
  it('when two other providers agree on a close 2 % away from the stored provider, then the bar is replaced by theirs and recorded as repaired with the raw bar', async () => {
    const { dq, recorded } = quality([answer('yahoo', 102), answer('tiingo', 102.1)]);
    const kept = await check(dq, 100);
    expect(kept.map((c) => [c.timeMs, c.close])).toEqual([[DAY, 102]]);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ rule: 'divergent', action: 'repaired', flag: 'filled_from_yahoo', providers: ['polygon', 'yahoo', 'tiingo'] });
    expect(recorded[0]!.before!.close).toBe(100);
    expect(recorded[0]!.after!.close).toBe(102);
    expect(recorded[0]!.closes).toEqual({ stored: { provider: 'polygon', close: 100 }, others: [{ provider: 'yahoo', close: 102 }, { provider: 'tiingo', close: 102.1 }] });
  });

  it('when one of three providers is the outlier, then the stored close stays, unflagged, and the outlier is on record', async () => {
    const { dq, recorded } = quality([answer('yahoo', 100.1), answer('tiingo', 110)]);
    const kept = await check(dq, 100);
    expect(kept[0]!.close).toBe(100);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ rule: 'divergent', action: 'suspect', providers: ['polygon', 'tiingo'] });
    expect(recorded[0]!.flag).toBeUndefined();
    expect(recorded[0]!.closes).toEqual({ stored: { provider: 'polygon', close: 100 }, others: [{ provider: 'tiingo', close: 110 }] });
    expect(recorded[0]!.before!.close).toBe(100);
  });

  it('when two providers disagree, then nothing is replaced and the divergence is suspect, flagged', async () => {
    const { dq, recorded } = quality([answer('yahoo', 102)]);
    expect((await check(dq, 100))[0]!.close).toBe(100);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ action: 'suspect', flag: 'divergent', providers: ['polygon', 'yahoo'], closes: { stored: { provider: 'polygon', close: 100 }, others: [{ provider: 'yahoo', close: 102 }] } });
    expect([recorded[0]!.before!.close, recorded[0]!.after!.close]).toEqual([100, 100]);
  });

  it('when two other providers both disagree with the stored close, then one record names all three providers with their closes', async () => {
    const { dq, recorded } = quality([answer('yahoo', 102), answer('tiingo', 95)]);
    expect((await check(dq, 100))[0]!.close).toBe(100);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ action: 'suspect', flag: 'divergent', providers: ['polygon', 'yahoo', 'tiingo'] });
    expect(recorded[0]!.closes).toEqual({ stored: { provider: 'polygon', close: 100 }, others: [{ provider: 'yahoo', close: 102 }, { provider: 'tiingo', close: 95 }] });
  });
});
