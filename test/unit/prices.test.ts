/** The price rules of DESIGN 24 (src/domain/prices.ts), as docs/prices.md states them. */
import { describe, expect, it } from 'vitest';
import { priceOf } from '../../src/domain/prices.js';

const NOW = Date.parse('2026-11-29T12:00:00Z');

describe('priceOf', () => {
  it('when a rule is fixed, then the action costs 1 point whatever its input', () => {
    expect(priceOf('fixed', { symbols: 'A,B,C' }, NOW)).toBe(1);
  });

  it('when symbols are asked, then each started ten cost a point', () => {
    expect(priceOf('symbols', { symbols: 'AAPL' }, NOW)).toBe(1);
    expect(priceOf('symbols', { symbols: Array(10).fill('A').join(',') }, NOW)).toBe(1);
    expect(priceOf('symbols', { symbols: Array(11).fill('A').join(',') }, NOW)).toBe(2);
    expect(priceOf('symbols', { symbols: Array(25).fill('A') }, NOW)).toBe(3);
    expect(priceOf('symbols', { symbols: Array(50).fill('A').join(',') }, NOW)).toBe(5);
  });

  it('when history is asked, then each started 5,000 bars the window may hold cost a point', () => {
    expect(priceOf('bars', { symbol: 'AAPL', interval: '1d', range: '10y' }, NOW)).toBe(1);
    expect(priceOf('bars', { symbol: 'BTC-USD', interval: '1m', range: '1mo' }, NOW)).toBe(9);
    expect(priceOf('bars', { symbol: 'AAPL', interval: '1m', range: '1mo' }, NOW)).toBe(3);
    expect(priceOf('bars', { symbol: 'AAPL', interval: '1d', range: 'max' }, NOW)).toBe(3);
    expect(priceOf('bars', { symbol: 'EURUSD=X', interval: '5m', start: '2026-10-01', end: '2026-10-31' }, NOW)).toBe(2);
  });

  it('when studies are asked, then each study over the window and its warm-up is charged', () => {
    expect(priceOf('studies', { symbol: 'AAPL', interval: '1d', range: '1y', studies: 'sma:20,rsi:14,macd:12:26:9' }, NOW)).toBe(1);
    const worst = { symbol: 'BTC-USD', interval: '1m', start: '2026-11-20T00:00:00Z', end: '2026-11-23T00:00:00Z', studies: Array.from({ length: 10 }, (_, i) => `adx:${500 - i}`).join(',') };
    expect(priceOf('studies', worst, NOW)).toBe(41);
    // A list the contract will refuse is still priced before it is refused: one study per entry.
    expect(priceOf('studies', { ...worst, studies: 'nope:1,nope:2' }, NOW)).toBeGreaterThanOrEqual(1);
  });
});
