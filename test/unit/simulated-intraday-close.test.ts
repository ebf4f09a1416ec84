import { describe, expect, it } from 'vitest';
import { SIMULATED_DIRECTORY, SimulatedMarketDataProvider } from '../../src/infra/market/simulated-market-data-provider.js';

const DAY = 86_400_000;
/** Monday 23 November 2026, 10:07:30 in New York: the five sessions before it are whole. */
const MONDAY_US_SESSION = Date.parse('2026-11-23T15:07:30.000Z');

describe('simulated intraday bars near the close', () => {
  it('when a week of 1m bars of 30 US stocks is read, then no session ramps into its close: every 3-minute move of the last 10 minutes stays under 0.3 of a daily move', async () => {
    const provider = new SimulatedMarketDataProvider({ now: () => MONDAY_US_SESSION });
    const stocks = SIMULATED_DIRECTORY.filter((i) => i.exchange === 'NASDAQ' || i.exchange === 'NYSE').slice(0, 30);
    let sessions = 0;
    let biggestAtTheClose = 0;
    for (const instrument of stocks) {
      const history = await provider.getHistory({ symbol: instrument.symbol, interval: '1m', startMs: MONDAY_US_SESSION - 7 * DAY, endMs: MONDAY_US_SESSION - DAY });
      const byDay = new Map<string, number[]>();
      for (const c of history!.candles) {
        const day = c.time.slice(0, 10);
        byDay.set(day, [...(byDay.get(day) ?? []), c.close]);
      }
      for (const closes of byDay.values()) {
        sessions += 1;
        const moves = closes.slice(3).map((close, i) => Math.abs(Math.log(close / closes[i]!)));
        const lastTen = moves.slice(-10);
        expect(Math.max(...lastTen), `${instrument.symbol}: a 3-minute move near the close`).toBeLessThan(0.3 * instrument.dailyVolatility);
        if (moves.indexOf(Math.max(...moves)) >= moves.length - 5) biggestAtTheClose += 1;
      }
    }
    expect(sessions).toBeGreaterThanOrEqual(100);
    // Anywhere in a 390-minute session, the day's biggest move lands in its last 5 minutes about 1 % of the time.
    expect(biggestAtTheClose / sessions).toBeLessThan(0.04);
  });
});
