import { describe, expect, it } from 'vitest';
import { SIMULATED_INDICES, SimulatedMarketDataProvider } from '../../src/infra/market/simulated-market-data-provider.js';
import type { Quote } from '../../src/ports.js';

const MINUTE = 60_000;
const DAY = 86_400_000;
const T0 = Date.parse('2026-11-20T14:37:12.345Z');

function at(time: number, symbols?: string[]): Promise<Quote[]> {
  return new SimulatedMarketDataProvider({ now: () => time, ...(symbols ? { symbols } : {}) }).getIndices();
}

function decimals(value: number): number {
  return (String(value).split('.')[1] ?? '').length;
}

describe('SimulatedMarketDataProvider', () => {
  it('when asked twice within the same minute, gives identical quotes (also from a second instance)', async () => {
    const first = await at(T0);
    const sameMinuteLater = await at(T0 + 30_000);
    expect(sameMinuteLater).toEqual(first);
  });

  it('when the minute changes, the prices move', async () => {
    const now = await at(T0);
    const nextMinute = await at(T0 + MINUTE);
    const moved = now.filter((q, i) => q.price !== nextMinute[i]?.price);
    expect(moved.length).toBeGreaterThan(now.length / 2);
    expect(nextMinute[0]?.timestamp).not.toBe(now[0]?.timestamp);
  });

  it('by default quotes the ten well-known indices with their names and currencies', async () => {
    const quotes = await at(T0);
    expect(quotes.map((q) => q.symbol)).toEqual(['^GSPC', '^DJI', '^IXIC', '^FTSE', '^GDAXI', '^N225', '^HSI', '000001.SS', '000300.SS', '^STOXX50E']);
    expect(quotes.map((q) => q.currency)).toEqual(['USD', 'USD', 'USD', 'GBP', 'EUR', 'JPY', 'HKD', 'CNY', 'CNY', 'EUR']);
    expect(quotes.find((q) => q.symbol === '^GSPC')?.name).toBe('S&P 500');
  });

  it('over a week of minutes, every quote is internally consistent and stays near its base level', async () => {
    const base = new Map(SIMULATED_INDICES.map((i) => [i.symbol, i.baseLevel]));
    for (let time = T0; time < T0 + 7 * DAY; time += 397 * MINUTE) {
      for (const q of await at(time)) {
        const { open, high, low, volume } = q;
        if (open === null || high === null || low === null || volume === null) throw new Error(`${q.symbol}: missing field`);
        expect(low).toBeLessThanOrEqual(Math.min(open, q.price));
        expect(high).toBeGreaterThanOrEqual(Math.max(open, q.price));
        expect(q.change).toBeCloseTo(q.price - q.prev_close, 2);
        expect(q.change_percent).toBeCloseTo(((q.price - q.prev_close) / q.prev_close) * 100, 2);
        for (const v of [q.price, open, high, low, q.prev_close, q.change, q.change_percent]) expect(decimals(v)).toBeLessThanOrEqual(2);
        expect(Number.isInteger(volume) && volume > 0).toBe(true);
        expect(new Date(q.timestamp).toISOString()).toBe(q.timestamp);
        // A day's move stays within what index markets do, and the level within a band around the base.
        expect(Math.abs(q.change_percent)).toBeLessThan(8);
        const level = base.get(q.symbol) ?? Number.NaN;
        expect(q.price / level).toBeGreaterThan(0.7);
        expect(q.price / level).toBeLessThan(1.4);
      }
    }
  });

  it('the timestamp is the start of the current minute', async () => {
    const [quote] = await at(T0);
    expect(quote?.timestamp).toBe(new Date(Math.floor(T0 / MINUTE) * MINUTE).toISOString());
  });

  it("a day's last price becomes the next day's previous close", async () => {
    const dayStart = Math.floor(T0 / DAY) * DAY;
    const lastMinute = await at(dayStart + DAY - MINUTE);
    const nextDay = await at(dayStart + DAY + 5 * MINUTE);
    expect(nextDay.map((q) => q.prev_close)).toEqual(lastMinute.map((q) => q.price));
  });

  it('during a day, the open stays fixed, the range only widens and the volume only grows', async () => {
    const early = await at(T0);
    const later = await at(T0 + 90 * MINUTE);
    later.forEach((q, i) => {
      const before = early[i];
      if (!before || q.high === null || q.low === null || before.high === null || before.low === null) throw new Error('missing quote');
      expect(q.open).toBe(before.open);
      expect(q.prev_close).toBe(before.prev_close);
      expect(q.high).toBeGreaterThanOrEqual(before.high);
      expect(q.low).toBeLessThanOrEqual(before.low);
      expect(q.volume ?? 0).toBeGreaterThan(before.volume ?? 0);
    });
  });

  it('with a symbol list, quotes those symbols in that order and generates a generic series for unknown ones', async () => {
    const quotes = await at(T0, ['^N225', 'ACME', '^GSPC']);
    expect(quotes.map((q) => q.symbol)).toEqual(['^N225', 'ACME', '^GSPC']);
    const acme = quotes[1];
    expect(acme?.name).toBe('ACME');
    expect(acme?.currency).toBe('USD');
    expect(acme?.price).toBeGreaterThan(0);
    expect(await at(T0, ['ACME'])).toEqual([acme]);
  });
});
