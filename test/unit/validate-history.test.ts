import { describe, expect, it } from 'vitest';
import type { StoredCandle } from '../../src/domain/ports/history-store.js';
import { validateHistory, type ValidationInput } from '../../src/domain/quality/validate-history.js';

/** US sessions of early September 2020 (Labor Day, the 7th, closed), bars stamped at the open as Yahoo does. */
const OPEN = (day: number) => Date.UTC(2020, 8, day, 13, 30);
const DAYS = [1, 2, 3, 4, 8, 9, 10, 11, 14, 15];
const NOW = Date.UTC(2020, 9, 1);

function bar(day: number, close: number, volume: number | null = 1000): StoredCandle {
  return { timeMs: OPEN(day), open: close - 1, high: close + 2, low: close - 2, close, adjClose: close, volume };
}

function series(closes: number[] = DAYS.map((_, i) => 100 + i)): StoredCandle[] {
  return DAYS.map((d, i) => bar(d, closes[i] as number));
}

function input(candles: StoredCandle[], extra: Partial<ValidationInput> = {}): ValidationInput {
  return { interval: '1d', currency: 'USD', market: 'US', candles, splits: [], provider: 'yahoo', nowMs: NOW, ...extra };
}

describe('validateHistory', () => {
  it('when the answer is clean, then it comes back unchanged with no findings', () => {
    const candles = series();
    const result = validateHistory(input(candles));
    expect(result).toEqual({ candles, currency: 'USD', issues: [], missingSessions: 0 });
  });

  it('when one bar is 100x its agreeing neighbours, then it is scaled back and flagged repaired_unit', () => {
    const candles = series();
    const bad = candles[5]!;
    candles[5] = { ...bad, open: bad.open * 100, high: bad.high * 100, low: bad.low * 100, close: bad.close * 100, adjClose: bad.adjClose! * 100 };
    const result = validateHistory(input(candles));
    expect(result.candles[5]).toEqual(bad);
    expect(result.issues).toEqual([{ timeMs: bad.timeMs, rule: 'unit_100x', action: 'repaired', before: expect.objectContaining({ close: bad.close * 100 }), after: expect.objectContaining({ close: bad.close }), flag: 'repaired_unit', providers: ['yahoo'] }]);
  });

  it('when high is below low, then they are swapped back and flagged repaired_ohlc', () => {
    const candles = series();
    const good = candles[3]!;
    candles[3] = { ...good, high: good.low, low: good.high };
    const result = validateHistory(input(candles));
    expect(result.candles[3]).toEqual(good);
    expect(result.issues.map((i) => [i.rule, i.action, i.flag])).toEqual([['swapped_high_low', 'repaired', 'repaired_ohlc']]);
  });

  it('when a close is zero and no second provider is given, then the bar is dropped and recorded', () => {
    const candles = series();
    candles[4] = { ...candles[4]!, close: 0 };
    const result = validateHistory(input(candles));
    expect(result.candles).toHaveLength(DAYS.length - 1);
    expect(result.candles.map((c) => c.timeMs)).not.toContain(OPEN(8));
    expect(result.issues).toEqual([expect.objectContaining({ timeMs: OPEN(8), rule: 'non_positive_price', action: 'dropped', after: null })]);
  });

  it('when a close is zero and a second provider has that session, then the bar is rebuilt from it and flagged filled_from_<provider>', () => {
    const candles = series();
    candles[4] = { ...candles[4]!, close: 0 };
    // Polygon stamps daily bars at New York midnight: same session, another instant.
    const polygon = series().map((c) => ({ ...c, timeMs: c.timeMs - (8 * 60 + 30) * 60_000, close: c.close + 0.01 }));
    const result = validateHistory(input(candles, { reference: { provider: 'polygon', candles: polygon, currency: 'USD' } }));
    expect(result.candles[4]).toEqual(expect.objectContaining({ timeMs: OPEN(8), close: 104.01 }));
    expect(result.issues).toEqual([expect.objectContaining({ rule: 'filled_price', action: 'repaired', flag: 'filled_from_polygon', providers: ['yahoo', 'polygon'] })]);
  });

  it('when the prices step down 4:1 with no split event and a second provider has the earlier bars at the new level, then the earlier bars are re-based', () => {
    const closes = DAYS.map((_, i) => (i < 5 ? 400 + 4 * i : 100 + i));
    const candles = series(closes);
    const unstepped = series(DAYS.map((_, i) => (i < 5 ? 100 + i : 100 + i)));
    const result = validateHistory(input(candles, { reference: { provider: 'polygon', candles: unstepped, currency: 'USD' } }));
    expect(result.candles.slice(0, 5).map((c) => c.close)).toEqual([100, 101, 102, 103, 104]);
    expect(result.candles[0]!.volume).toBe(4000);
    expect(result.issues.filter((i) => i.rule === 'unannounced_split')).toHaveLength(5);
    expect(result.issues.every((i) => i.flag === 'repaired_split' && i.providers.join() === 'yahoo,polygon')).toBe(true);
  });

  it('when the prices step 4:1 and nothing confirms a split, then the bars are kept and the step is suspect', () => {
    const candles = series(DAYS.map((_, i) => (i < 5 ? 400 + 4 * i : 100 + i)));
    const result = validateHistory(input(candles));
    expect(result.candles).toEqual(candles);
    expect(result.issues).toEqual([expect.objectContaining({ timeMs: OPEN(9), rule: 'spike', action: 'suspect', flag: 'suspect_spike' })]);
  });

  it('when the step falls on a known split of that ratio, then the earlier bars are re-based', () => {
    const candles = series(DAYS.map((_, i) => (i < 5 ? 400 + 4 * i : 100 + i)));
    const result = validateHistory(input(candles, { splits: [{ timeMs: Date.UTC(2020, 8, 9, 4), numerator: 4, denominator: 1 }] }));
    expect(result.candles[0]!.close).toBe(100);
    expect(result.issues.every((i) => i.rule === 'unannounced_split' && i.providers.join() === 'yahoo')).toBe(true);
  });

  it('when the currency is GBp, then prices are divided by 100 and the currency is GBP', () => {
    const candles = series(DAYS.map(() => 1234));
    const result = validateHistory(input(candles, { currency: 'GBp', market: 'UK' }));
    expect(result.currency).toBe('GBP');
    expect(result.candles[0]).toEqual({ ...candles[0], open: 12.33, high: 12.36, low: 12.32, close: 12.34, adjClose: 12.34 });
    expect(result.issues).toHaveLength(DAYS.length);
    expect(result.issues[0]).toEqual(expect.objectContaining({ rule: 'sub_unit_currency', flag: 'repaired_currency' }));
  });

  it('when a bar falls on a holiday, is duplicated, out of order or in the future, then it is dropped or put back in order', () => {
    const candles = series();
    const holiday = bar(7, 104.5);
    const future = { ...bar(15, 110), timeMs: NOW + 5 * 86_400_000 };
    const shuffled = [candles[1]!, candles[0]!, candles[1]!, ...candles.slice(2, 4), holiday, ...candles.slice(4), future];
    const result = validateHistory(input(shuffled));
    expect(result.candles).toEqual(candles);
    expect(result.issues.map((i) => i.rule).sort()).toEqual(['duplicate', 'future', 'out_of_order', 'outside_session']);
  });

  it('when an intraday bar is off the grid, then it is dropped; when a volume is negative, then it becomes null', () => {
    const t0 = Date.UTC(2020, 8, 1, 14, 0);
    const five = (i: number, extra: Partial<StoredCandle> = {}): StoredCandle => ({ timeMs: t0 + i * 300_000, open: 100, high: 101, low: 99, close: 100, adjClose: null, volume: 10, ...extra });
    const candles = [five(0), { ...five(1), timeMs: t0 + 301_000 }, five(2, { volume: -5 }), five(3)];
    const result = validateHistory(input(candles, { interval: '5m' }));
    expect(result.candles).toEqual([five(0), five(2, { volume: null }), five(3)]);
    expect(result.issues.map((i) => i.rule)).toEqual(['off_grid', 'negative_volume']);
  });

  it('when the close breaks the envelope far beyond rounding, then the bar is dropped', () => {
    const candles = series();
    candles[2] = { ...candles[2]!, close: candles[2]!.high + 1 };
    const result = validateHistory(input(candles));
    expect(result.candles).toHaveLength(DAYS.length - 1);
    expect(result.issues.map((i) => i.rule)).toEqual(['ohlc_order']);
  });

  it('when a session between the first and last bar is missing and no second provider is given, then it is counted, not invented', () => {
    const candles = series().filter((c) => c.timeMs !== OPEN(10));
    const result = validateHistory(input(candles));
    expect(result.candles).toEqual(candles);
    expect(result.missingSessions).toBe(1);
    expect(result.issues).toEqual([]);
  });

  it('when a session is missing and a second provider has it, then its bar is taken, flagged filled_from_<provider> and recorded', () => {
    const candles = series().filter((c) => c.timeMs !== OPEN(10));
    const polygon = series();
    const result = validateHistory(input(candles, { reference: { provider: 'polygon', candles: polygon, currency: 'USD' } }));
    expect(result.candles).toEqual(polygon);
    expect(result.missingSessions).toBe(0);
    expect(result.issues).toEqual([{ timeMs: OPEN(10), rule: 'missing_session', action: 'repaired', before: null, after: expect.objectContaining({ close: 106 }), flag: 'filled_from_polygon', providers: ['yahoo', 'polygon'] }]);
  });
});
