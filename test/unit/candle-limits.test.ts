import { describe, expect, it } from 'vitest';
import { MAX_CANDLES, MAX_EXPORT_CANDLES, tooManyCandles, tooManyCandlesMessage } from '../../src/domain/candle-limits.js';

describe('too many candles, decided in one place', () => {
  it('when a window fits what carries it, then there is no refusal, up to the limit itself', () => {
    expect(tooManyCandles(MAX_CANDLES, 'answer')).toBeUndefined();
    expect(tooManyCandles(MAX_EXPORT_CANDLES, 'export')).toBeUndefined();
  });

  it('when a window holds more than one answer carries, then the refusal is typed with its count and names the export as the way out', () => {
    const refusal = tooManyCandles(7200, 'answer');

    expect(refusal).toEqual({ reason: 'too-many-candles', carrier: 'answer', candles: 7200, atLeast: false });
    expect(tooManyCandlesMessage(refusal!)).toBe(
      `the window holds 7200 candles, more than the ${MAX_CANDLES} one answer carries: choose a larger interval or a shorter window, or format=csv or arrow (up to ${MAX_EXPORT_CANDLES})`,
    );
  });

  it('when only a bounded read says the window is too large, then the refusal says "over" the limit instead of a count', () => {
    const refusal = tooManyCandles(MAX_CANDLES + 1, 'answer', true);

    expect(refusal).toEqual({ reason: 'too-many-candles', carrier: 'answer', candles: MAX_CANDLES, atLeast: true });
    expect(tooManyCandlesMessage(refusal!)).toMatch(/^the window holds over 5000 candles, more than the 5000 one answer carries/);
  });

  it('when a window holds more than one export carries, then the refusal names the export limit and no other format', () => {
    const refusal = tooManyCandles(MAX_EXPORT_CANDLES + 5, 'export');

    expect(tooManyCandlesMessage(refusal!)).toBe(`the window holds ${MAX_EXPORT_CANDLES + 5} candles, more than the ${MAX_EXPORT_CANDLES} one export carries: choose a larger interval or a shorter window`);
  });
});
