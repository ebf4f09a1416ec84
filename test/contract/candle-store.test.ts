/**
 * One CandleStore contract, run against every database the store supports: a real SQLite file in a
 * temp directory and the real PostgreSQL (a schema of its own per test).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AppError } from '../../src/domain/errors.js';
import type { CandleStore, StoredCandle } from '../../src/domain/ports/history-store.js';
import { candlesOf } from '../../src/domain/candle-columns.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { createTestSchema, findPostgres, shouldRunPostgres } from '../helpers/postgres.js';

interface Fixture {
  open(options?: { runMigrations: boolean }): Promise<OpenedUserStore>;
  dispose(): Promise<void>;
}

const DAY_MS = 86_400_000;
const T0 = Date.UTC(2023, 0, 3, 14, 30);
const YAHOO = { provider: 'yahoo', fetchedAtMs: Date.UTC(2024, 5, 27) };
const POLYGON = { provider: 'polygon', fetchedAtMs: Date.UTC(2024, 5, 28) };

/** A daily bar `day` days after T0, with prices that differ per day and per `base`. */
function bar(day: number, base = 100): StoredCandle {
  const open = base + day * 0.25;
  return { timeMs: T0 + day * DAY_MS, open, high: open + 1.125, low: open - 0.875, close: open + 0.5, adjClose: open + 0.375, volume: 1_000_000 + day };
}

function candleStoreContract(name: string, makeFixture: () => Promise<Fixture>): void {
  describe(`CandleStore contract: ${name}`, () => {
    let fixture: Fixture;
    let db: OpenedUserStore;
    let store: CandleStore;

    beforeEach(async () => {
      fixture = await makeFixture();
      db = await fixture.open();
      store = db.candles;
    });

    afterEach(async () => {
      await db.close();
      await fixture.dispose();
    });

    it('putCandles: when bars are written, then getCandles returns them exactly, oldest first, in the half-open span', async () => {
      const bars = [bar(4), bar(0), bar(2), bar(1), bar(3)];
      expect(await store.putCandles('AAPL', '1d', bars, YAHOO)).toBe(5);

      const all = await store.getCandles('AAPL', '1d', { startMs: T0, endMs: T0 + 5 * DAY_MS });
      expect(all).toEqual([bar(0), bar(1), bar(2), bar(3), bar(4)]);

      const middle = await store.getCandles('AAPL', '1d', { startMs: T0 + DAY_MS, endMs: T0 + 3 * DAY_MS });
      expect(middle.map((c) => c.timeMs)).toEqual([T0 + DAY_MS, T0 + 2 * DAY_MS]);
      expect(await store.getCandles('AAPL', '1d', { startMs: T0, endMs: T0 + 5 * DAY_MS }, 2)).toEqual([bar(0), bar(1)]);
      expect(await store.countCandles('AAPL', '1d', { startMs: T0 + DAY_MS, endMs: T0 + 3 * DAY_MS })).toBe(2);
      expect(await store.countCandles('AAPL', '1wk', { startMs: T0, endMs: T0 + 5 * DAY_MS })).toBe(0);
    });

    it('putCandles: when a bar is written again, then it replaces the stored one (same identity, no duplicate)', async () => {
      await store.putCandles('AAPL', '1d', [bar(0), bar(1)], YAHOO);
      const corrected = { ...bar(1), close: 123.456789, volume: 42 };
      await store.putCandles('AAPL', '1d', [corrected], POLYGON);

      const stored = await store.getCandles('AAPL', '1d', { startMs: T0, endMs: T0 + 2 * DAY_MS });
      expect(stored).toEqual([bar(0), corrected]);
      expect((await store.footprint()).candles).toBe(2);
    });

    it('getCandles: when symbols and intervals differ, then each series holds only its own bars', async () => {
      await store.putCandles('AAPL', '1d', [bar(0)], YAHOO);
      await store.putCandles('AAPL', '1h', [bar(0, 200)], YAHOO);
      await store.putCandles('MSFT', '1d', [bar(0, 300)], YAHOO);
      const span = { startMs: T0, endMs: T0 + DAY_MS };

      expect(await store.getCandles('AAPL', '1d', span)).toEqual([bar(0)]);
      expect(await store.getCandles('AAPL', '1h', span)).toEqual([bar(0, 200)]);
      expect(await store.getCandles('MSFT', '1d', span)).toEqual([bar(0, 300)]);
      expect(await store.getCandles('NOPE', '1d', span)).toEqual([]);
    });

    it('putCandles: when adjusted close and volume are unknown, then they come back as null', async () => {
      const index: StoredCandle = { timeMs: T0, open: 4000.5, high: 4010.25, low: 3990.125, close: 4005.75, adjClose: null, volume: null };
      await store.putCandles('^GSPC', '1d', [index], YAHOO);

      expect(await store.getCandles('^GSPC', '1d', { startMs: T0, endMs: T0 + 1 })).toEqual([index]);
    });

    it('putCandles: when 20,000 bars are written in one call, then all of them are stored', async () => {
      const many = Array.from({ length: 20_000 }, (_, i) => ({ ...bar(0), timeMs: T0 + i * 60_000, close: 100 + i / 1000 }));
      expect(await store.putCandles('BTC-USD', '1m', many, YAHOO)).toBe(20_000);

      const back = await store.getCandles('BTC-USD', '1m', { startMs: T0, endMs: T0 + 20_000 * 60_000 });
      expect(back).toHaveLength(20_000);
      expect(back[19_999]).toEqual(many[19_999]);
      const { candles, bytes } = await store.footprint();
      expect(candles).toBe(20_000);
      expect(bytes).toBeGreaterThan(0);
    });

    it('getCandleColumns: when bars are read as columns, then they are getCandles\' bars (null as NaN), in the span and the limit, a window longer than a read chunk whole', async () => {
      const many = Array.from({ length: 5_003 }, (_, i) => ({ ...bar(0), timeMs: T0 + i * 60_000, close: 100 + i / 1000, adjClose: i % 3 === 0 ? null : 100 + i / 1000, volume: i % 5 === 0 ? null : i }));
      await store.putCandles('BTC-USD', '1m', many, YAHOO);
      const span = { startMs: T0 + 60_000, endMs: T0 + 5_002 * 60_000 };
      const columns = await store.getCandleColumns('BTC-USD', '1m', span);
      expect(candlesOf(columns)).toEqual(await store.getCandles('BTC-USD', '1m', span));
      expect(columns.timeMs.length).toBe(5_001);
      expect(Number.isNaN(columns.adjClose[2]!)).toBe(true);
      expect(Number.isNaN(columns.volume[4]!)).toBe(true);
      expect(candlesOf(await store.getCandleColumns('BTC-USD', '1m', span, 4_500))).toEqual(many.slice(1, 4_501));
      expect((await store.getCandleColumns('NOPE', '1m', span)).timeMs.length).toBe(0);
    });

    it('markCovered: when spans touch or overlap, then coverage merges them; disjoint ones stay apart; answers are clipped', async () => {
      await store.markCovered('AAPL', '1d', { startMs: 0, endMs: 10 }, YAHOO);
      await store.markCovered('AAPL', '1d', { startMs: 10, endMs: 20 }, YAHOO);
      await store.markCovered('AAPL', '1d', { startMs: 15, endMs: 25 }, POLYGON);
      await store.markCovered('AAPL', '1d', { startMs: 40, endMs: 50 }, YAHOO);

      expect(await store.coverage('AAPL', '1d', { startMs: 0, endMs: 100 })).toEqual([
        { startMs: 0, endMs: 25 },
        { startMs: 40, endMs: 50 },
      ]);
      expect(await store.coverage('AAPL', '1d', { startMs: 5, endMs: 45 })).toEqual([
        { startMs: 5, endMs: 25 },
        { startMs: 40, endMs: 45 },
      ]);
      expect(await store.coverage('AAPL', '1d', { startMs: 25, endMs: 40 })).toEqual([]);
      expect(await store.coverage('AAPL', '1h', { startMs: 0, endMs: 100 })).toEqual([]);
    });

    it('markCovered: when a span bridges two covered spans, then the three become one', async () => {
      await store.markCovered('AAPL', '1d', { startMs: 0, endMs: 10 }, YAHOO);
      await store.markCovered('AAPL', '1d', { startMs: 20, endMs: 30 }, YAHOO);
      await store.markCovered('AAPL', '1d', { startMs: 5, endMs: 25 }, YAHOO);

      expect(await store.coverage('AAPL', '1d', { startMs: 0, endMs: 100 })).toEqual([{ startMs: 0, endMs: 30 }]);
    });

    it('deleteCandles: when one interval is dropped, then its bars and coverage go and the other intervals stay', async () => {
      await store.putCandles('AAPL', '1d', [bar(0), bar(1)], YAHOO);
      await store.putCandles('AAPL', '1h', [bar(0)], YAHOO);
      await store.markCovered('AAPL', '1d', { startMs: T0, endMs: T0 + 2 * DAY_MS }, YAHOO);

      expect(await store.deleteCandles('AAPL', '1d')).toBe(2);

      const span = { startMs: T0, endMs: T0 + 2 * DAY_MS };
      expect(await store.getCandles('AAPL', '1d', span)).toEqual([]);
      expect(await store.coverage('AAPL', '1d', span)).toEqual([]);
      expect(await store.getCandles('AAPL', '1h', span)).toEqual([bar(0)]);
      expect(await store.deleteCandles('AAPL')).toBe(1);
      expect((await store.footprint()).candles).toBe(0);
    });

    it('putActions: when dividends and splits are written, then getActions returns them in time order; the same kind and time replaces', async () => {
      await store.putActions(
        'AAPL',
        [
          { kind: 'dividend', timeMs: Date.UTC(2023, 4, 12), amount: 0.24 },
          { kind: 'split', timeMs: Date.UTC(2020, 7, 31), numerator: 4, denominator: 1 },
          { kind: 'dividend', timeMs: Date.UTC(2023, 1, 10), amount: 0.2 },
        ],
        YAHOO,
      );
      await store.putActions('AAPL', [{ kind: 'dividend', timeMs: Date.UTC(2023, 1, 10), amount: 0.23 }], POLYGON);

      expect(await store.getActions('AAPL', { startMs: Date.UTC(2000, 0, 1), endMs: Date.UTC(2030, 0, 1) })).toEqual([
        { kind: 'split', timeMs: Date.UTC(2020, 7, 31), numerator: 4, denominator: 1 },
        { kind: 'dividend', timeMs: Date.UTC(2023, 1, 10), amount: 0.23 },
        { kind: 'dividend', timeMs: Date.UTC(2023, 4, 12), amount: 0.24 },
      ]);
      expect(await store.getActions('AAPL', { startMs: Date.UTC(2023, 0, 1), endMs: Date.UTC(2023, 3, 1) })).toEqual([
        { kind: 'dividend', timeMs: Date.UTC(2023, 1, 10), amount: 0.23 },
      ]);
      expect(await store.getActions('MSFT', { startMs: 0, endMs: Date.UTC(2030, 0, 1) })).toEqual([]);
    });

    it('rescale: when a 4-for-1 split is applied, then earlier bars fetched before it are re-based, in every interval; later or later-fetched ones stay', async () => {
      await store.putCandles('AAPL', '1d', [bar(0, 400), bar(1, 400), bar(2, 100)], YAHOO);
      await store.putCandles('AAPL', '1h', [bar(0, 400)], YAHOO);
      await store.putCandles('AAPL', '1wk', [bar(0, 100)], POLYGON);
      await store.putCandles('MSFT', '1d', [bar(0, 400)], YAHOO);

      expect(await store.rescale('AAPL', { barsBeforeMs: T0 + 2 * DAY_MS, fetchedBeforeMs: POLYGON.fetchedAtMs }, 0.25)).toBe(3);

      const daily = await store.getCandles('AAPL', '1d', { startMs: T0, endMs: T0 + 3 * DAY_MS });
      const quarter = (c: StoredCandle): StoredCandle => ({ ...c, open: c.open * 0.25, high: c.high * 0.25, low: c.low * 0.25, close: c.close * 0.25, adjClose: c.adjClose! * 0.25, volume: c.volume! / 0.25 });
      expect(daily[0]).toEqual(quarter(bar(0, 400)));
      expect(daily[1]).toEqual(quarter(bar(1, 400)));
      expect(daily[2]).toEqual(bar(2, 100));
      expect(await store.getCandles('AAPL', '1h', { startMs: T0, endMs: T0 + 1 })).toEqual([quarter(bar(0, 400))]);
      expect(await store.getCandles('MSFT', '1d', { startMs: T0, endMs: T0 + 1 })).toEqual([bar(0, 400)]);
      expect(await store.getCandles('AAPL', '1wk', { startMs: T0, endMs: T0 + 1 })).toEqual([bar(0, 100)]);
    });

    it('purgeProvider: when two providers stored bars, then coverageProviders names both and purging one (in one series or everywhere) drops only its bars and spans', async () => {
      await store.putCandles('AAPL', '1d', [bar(0), bar(1)], YAHOO);
      await store.markCovered('AAPL', '1d', { startMs: T0, endMs: T0 + 2 * DAY_MS }, YAHOO);
      await store.putCandles('AAPL', '1d', [bar(5), bar(6)], POLYGON);
      await store.markCovered('AAPL', '1d', { startMs: T0 + 5 * DAY_MS, endMs: T0 + 7 * DAY_MS }, POLYGON);
      await store.putCandles('MSFT', '1d', [bar(0, 300)], POLYGON);
      await store.markCovered('MSFT', '1d', { startMs: T0, endMs: T0 + DAY_MS }, POLYGON);
      expect((await store.coverageProviders('AAPL', '1d')).sort()).toEqual(['polygon', 'yahoo']);
      expect(await store.coverageProviders('AAPL', '1wk')).toEqual([]);

      expect(await store.purgeProvider('polygon', { symbol: 'AAPL', interval: '1d' })).toBe(2);
      expect(await store.getCandles('AAPL', '1d', { startMs: T0, endMs: T0 + 10 * DAY_MS })).toEqual([bar(0), bar(1)]);
      expect(await store.coverage('AAPL', '1d', { startMs: T0, endMs: T0 + 10 * DAY_MS })).toEqual([{ startMs: T0, endMs: T0 + 2 * DAY_MS }]);
      expect(await store.coverageProviders('MSFT', '1d')).toEqual(['polygon']);

      expect(await store.purgeProvider('polygon')).toBe(1);
      expect(await store.getCandles('MSFT', '1d', { startMs: T0, endMs: T0 + DAY_MS })).toEqual([]);
      expect(await store.coverage('MSFT', '1d', { startMs: T0, endMs: T0 + DAY_MS })).toEqual([]);
      expect(await store.countCandles('AAPL', '1d', { startMs: T0, endMs: T0 + 10 * DAY_MS })).toBe(2);
    });

    it('pruneBefore: when bars of an interval are older than the cutoff, then they go in batches of at most the limit, their covered spans are clipped at the cutoff, and other intervals and later bars stay', async () => {
      // AAPL and MSFT daily bars on days 0..9, covered as one span each; a weekly series that must not be touched.
      for (const [symbol, base] of [['AAPL', 100], ['MSFT', 300]] as const) {
        await store.putCandles(symbol, '1d', Array.from({ length: 10 }, (_, day) => bar(day, base)), YAHOO);
        await store.markCovered(symbol, '1d', { startMs: T0, endMs: T0 + 10 * DAY_MS }, YAHOO);
      }
      // A second, older span of AAPL that lies wholly before the cutoff.
      await store.markCovered('AAPL', '1d', { startMs: T0 - 20 * DAY_MS, endMs: T0 - 10 * DAY_MS }, YAHOO);
      await store.putCandles('AAPL', '1wk', [bar(0, 500)], YAHOO);
      await store.markCovered('AAPL', '1wk', { startMs: T0, endMs: T0 + 7 * DAY_MS }, YAHOO);
      const cutoff = T0 + 6 * DAY_MS;

      // 12 bars are older than the cutoff (days 0..5 of two symbols): batches of 5, 5, then the last 2.
      expect(await store.pruneBefore('1d', cutoff, 5)).toBe(5);
      // After the first batch already, no span claims a bar before the cutoff.
      expect(await store.coverage('AAPL', '1d', { startMs: T0 - 30 * DAY_MS, endMs: T0 + 30 * DAY_MS })).toEqual([{ startMs: cutoff, endMs: T0 + 10 * DAY_MS }]);
      expect(await store.coverage('MSFT', '1d', { startMs: T0 - 30 * DAY_MS, endMs: T0 + 30 * DAY_MS })).toEqual([{ startMs: cutoff, endMs: T0 + 10 * DAY_MS }]);
      expect(await store.pruneBefore('1d', cutoff, 5)).toBe(5);
      expect(await store.pruneBefore('1d', cutoff, 5)).toBe(2);
      expect(await store.pruneBefore('1d', cutoff, 5)).toBe(0);

      for (const [symbol, base] of [['AAPL', 100], ['MSFT', 300]] as const) {
        expect(await store.getCandles(symbol, '1d', { startMs: T0 - 30 * DAY_MS, endMs: T0 + 30 * DAY_MS })).toEqual([6, 7, 8, 9].map((day) => bar(day, base)));
      }
      expect(await store.getCandles('AAPL', '1wk', { startMs: T0, endMs: T0 + 7 * DAY_MS })).toEqual([bar(0, 500)]);
      expect(await store.coverage('AAPL', '1wk', { startMs: T0, endMs: T0 + 7 * DAY_MS })).toEqual([{ startMs: T0, endMs: T0 + 7 * DAY_MS }]);
    });

    it('pruneBefore: when older bars are stored and covered again between two batches, then the next batch clips the new span before it drops them', async () => {
      await store.putCandles('AAPL', '1d', [bar(0), bar(1), bar(2)], YAHOO);
      await store.markCovered('AAPL', '1d', { startMs: T0, endMs: T0 + 3 * DAY_MS }, YAHOO);
      const cutoff = T0 + 2 * DAY_MS;
      expect(await store.pruneBefore('1d', cutoff, 1)).toBe(1);
      // A request fetched the old span again meanwhile.
      await store.putCandles('AAPL', '1d', [bar(0)], POLYGON);
      await store.markCovered('AAPL', '1d', { startMs: T0 - DAY_MS, endMs: T0 + DAY_MS }, POLYGON);
      expect(await store.pruneBefore('1d', cutoff, 10)).toBe(2);
      expect(await store.getCandles('AAPL', '1d', { startMs: T0 - DAY_MS, endMs: T0 + 3 * DAY_MS })).toEqual([bar(2)]);
      expect(await store.coverage('AAPL', '1d', { startMs: T0 - DAY_MS, endMs: T0 + 3 * DAY_MS })).toEqual([{ startMs: cutoff, endMs: T0 + 3 * DAY_MS }]);
    });

    it('providerTimes: when two providers stored bars of a series, then it gives the times of one provider\'s bars in a span, ascending; an unknown series is empty', async () => {
      await store.putCandles('AAPL', '1d', [bar(2), bar(0)], YAHOO);
      await store.putCandles('AAPL', '1d', [bar(1), bar(3)], POLYGON);

      expect(await store.providerTimes('AAPL', '1d', { startMs: T0, endMs: T0 + 4 * DAY_MS }, 'yahoo')).toEqual([T0, T0 + 2 * DAY_MS]);
      expect(await store.providerTimes('AAPL', '1d', { startMs: T0 + DAY_MS, endMs: T0 + 4 * DAY_MS }, 'polygon')).toEqual([T0 + DAY_MS, T0 + 3 * DAY_MS]);
      expect(await store.providerTimes('AAPL', '1d', { startMs: T0, endMs: T0 + 4 * DAY_MS }, 'live:yahoo')).toEqual([]);
      expect(await store.providerTimes('MSFT', '1d', { startMs: T0, endMs: T0 + DAY_MS }, 'yahoo')).toEqual([]);
    });

    it('providerCounts: when two providers stored bars of a series, then it counts the bars in a span by provider; an unknown series is empty', async () => {
      await store.putCandles('AAPL', '1d', [bar(0), bar(1), bar(2)], YAHOO);
      await store.putCandles('AAPL', '1d', [bar(2), bar(3)], POLYGON);
      expect(await store.providerCounts('AAPL', '1d', { startMs: T0, endMs: T0 + 4 * DAY_MS })).toEqual({ yahoo: 2, polygon: 2 });
      expect(await store.providerCounts('AAPL', '1d', { startMs: T0, endMs: T0 + DAY_MS })).toEqual({ yahoo: 1 });
      expect(await store.providerCounts('MSFT', '1d', { startMs: T0, endMs: T0 + DAY_MS })).toEqual({});
    });

    it('putInstrument: when an instrument is described twice, then the last description is kept; unknown ones are undefined', async () => {
      await store.putInstrument('SAP.DE', { currency: 'USD', timezone: 'UTC' }, YAHOO);
      await store.putInstrument('SAP.DE', { currency: 'EUR', timezone: 'Europe/Berlin' }, POLYGON);

      expect(await store.getInstrument('SAP.DE')).toEqual({ currency: 'EUR', timezone: 'Europe/Berlin' });
      expect(await store.getInstrument('NOPE')).toBeUndefined();
    });

    it('getCandles: when the migrations have not run, then it fails with DATABASE_NOT_INITIALIZED naming mds init', async () => {
      const bare = await makeFixture();
      const unmigrated = await bare.open({ runMigrations: false });
      try {
        const err = await unmigrated.candles.putCandles('AAPL', '1d', [bar(0)], YAHOO).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(AppError);
        expect((err as AppError).code).toBe('DATABASE_NOT_INITIALIZED');
        expect((err as AppError).message).toContain('mds init');
      } finally {
        await unmigrated.close();
        await bare.dispose();
      }
    });
  });
}

candleStoreContract('SQLite file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mds-candles-'));
  const url = `sqlite:${join(dir, 'mds.sqlite')}`;
  return {
    open: (options = { runMigrations: true }) => openUserStore(url, options),
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

const postgresUrl = await findPostgres();
if (shouldRunPostgres(postgresUrl, 'CandleStore contract on PostgreSQL')) {
  candleStoreContract('PostgreSQL', async () => {
    const schema = await createTestSchema(postgresUrl!);
    return {
      open: (options = { runMigrations: true }) => openUserStore(postgresUrl!, { ...options, schema: schema.name }),
      dispose: () => schema.drop(),
    };
  });
}
