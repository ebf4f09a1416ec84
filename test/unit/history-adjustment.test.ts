import { describe, expect, it } from 'vitest';
import { adjustCandles } from '../../src/domain/history-adjustment.js';
import type { CorporateAction, StoredCandle } from '../../src/domain/ports/history-store.js';

const DAY_MS = 86_400_000;
const SPLIT: CorporateAction = { kind: 'split', timeMs: 10 * DAY_MS, numerator: 4, denominator: 1 };
const SECOND_SPLIT: CorporateAction = { kind: 'split', timeMs: 20 * DAY_MS, numerator: 7, denominator: 1 };

function bar(day: number, price: number, adjClose: number | null = price): StoredCandle {
  return { timeMs: day * DAY_MS, open: price, high: price + 0.4, low: price - 0.3, close: price, adjClose, volume: 1000 };
}

describe('adjustCandles', () => {
  const candles = [bar(5, 25, 24.5), bar(15, 30, 29.7), bar(25, 0.1 * 3, 0.29)];

  it('when the basis is splits, then the bars come back as stored', () => {
    expect(adjustCandles(candles, [SPLIT, SECOND_SPLIT], 'splits')).toEqual(candles);
  });

  it('when the basis is none, then each bar carries the product of the splits after it, volume divided by it', () => {
    const raw = adjustCandles(candles, [SECOND_SPLIT, SPLIT], 'none');

    expect(raw[0]).toEqual({ timeMs: 5 * DAY_MS, open: 700, high: 711.2, low: 691.6, close: 700, adjClose: 24.5, volume: 36 });
    expect(raw[1]).toEqual({ timeMs: 15 * DAY_MS, open: 210, high: 212.8, low: 207.9, close: 210, adjClose: 29.7, volume: 143 });
    expect(raw[2]).toEqual(candles[2]);
  });

  it('when the basis is all, then open, high and low follow the ratio of adjusted to raw close, without float noise', () => {
    const all = adjustCandles([bar(1, 100, 98), bar(2, 0.3, 0.1 * 3)], [], 'all');

    expect(all[0]).toEqual({ timeMs: DAY_MS, open: 98, high: 98.392, low: 97.706, close: 98, adjClose: 98, volume: 1000 });
    expect(all[1]!.close).toBe(0.3);
    expect(all[1]!.open).toBe(0.3);
  });

  it('when a bar has no adjusted close, then the basis all leaves it as it is', () => {
    const index = { ...bar(1, 4000), adjClose: null, volume: null };

    expect(adjustCandles([index], [], 'all')).toEqual([index]);
  });
});
