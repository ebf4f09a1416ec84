/**
 * The history store's read and fill logic over a real SQLite store: what is fetched, what is kept,
 * and what is served when the upstream is gone. The upstream is the embedded simulated provider (a
 * real implementation of the port) behind a recorder of the windows it was asked for.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DataSourceError } from '../../src/domain/errors.js';
import type { History, HistoryQuery, MarketDataProvider } from '../../src/domain/ports/market-data.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { SimulatedMarketDataProvider } from '../../src/infra/market/simulated-market-data-provider.js';
import { HistoryStore } from '../../src/services/history-store.js';

const DAY_MS = 86_400_000;
/** A Wednesday afternoon, New York open. */
const NOW = Date.UTC(2025, 2, 12, 18, 0);

interface Upstream {
  asked: HistoryQuery[];
  down: boolean;
}

function recording(provider: Pick<MarketDataProvider, 'getHistory'>, upstream: Upstream) {
  return async (query: HistoryQuery): Promise<History | undefined> => {
    upstream.asked.push(query);
    if (upstream.down) throw new DataSourceError('upstream refused the connection');
    return provider.getHistory(query);
  };
}

describe('history store: read through', () => {
  let dir: string;
  let db: OpenedUserStore;
  let now: number;
  let upstream: Upstream;
  let history: HistoryStore;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-history-store-'));
    db = await openUserStore(`sqlite:${join(dir, 'mds.sqlite')}`, { runMigrations: true });
    now = NOW;
    upstream = { asked: [], down: false };
    const simulated = new SimulatedMarketDataProvider({ now: () => now });
    history = new HistoryStore({ store: db.candles, fetch: recording(simulated, upstream), provider: () => 'simulated', now: () => now });
  });

  afterEach(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('when the same window is read twice, then the second read asks the upstream nothing and answers the same bars', async () => {
    const span = { startMs: NOW - 365 * DAY_MS, endMs: NOW - 2 * DAY_MS };
    const first = await history.read('AAPL', '1d', span);
    expect(upstream.asked).toHaveLength(1);
    expect(first.fetched).toBe(true);
    expect(first.candles.length).toBeGreaterThan(240);
    expect(first.info).toEqual({ currency: 'USD', timezone: 'America/New_York' });

    const second = await history.read('AAPL', '1d', span);

    expect(upstream.asked).toHaveLength(1);
    expect(second.fetched).toBe(false);
    expect(second.candles).toEqual(first.candles);
    expect(second.info).toEqual(first.info);
    expect(second.missing).toEqual([]);
  });

  it('when a wider window is read, then only the span before what is stored is fetched', async () => {
    const stored = { startMs: NOW - 100 * DAY_MS, endMs: NOW - 2 * DAY_MS };
    await history.read('AAPL', '1d', stored);
    upstream.asked.length = 0;

    const wider = await history.read('AAPL', '1d', { startMs: NOW - 200 * DAY_MS, endMs: NOW - 2 * DAY_MS });

    expect(upstream.asked).toEqual([{ symbol: 'AAPL', interval: '1d', startMs: NOW - 200 * DAY_MS, endMs: NOW - 100 * DAY_MS }]);
    const times = wider.candles.map((c) => c.timeMs);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(new Set(times).size).toBe(times.length);
    expect(times[0]).toBeLessThan(NOW - 195 * DAY_MS);
  });

  it('when the window reaches now, then the still-forming bar is asked again and the finished ones are not', async () => {
    const span = { startMs: NOW - 30 * DAY_MS, endMs: NOW };
    await history.read('AAPL', '1d', span);
    upstream.asked.length = 0;

    await history.read('AAPL', '1d', span);

    expect(upstream.asked).toHaveLength(1);
    expect(upstream.asked[0]!.startMs).toBe(NOW - DAY_MS);
  });

  it('when the upstream is down, then the stored window is served whole and a window reaching past it is served in part with the missing span', async () => {
    const stored = { startMs: NOW - 60 * DAY_MS, endMs: NOW - 10 * DAY_MS };
    const before = await history.read('AAPL', '1d', stored);
    upstream.down = true;

    const again = await history.read('AAPL', '1d', stored);
    expect(again.candles).toEqual(before.candles);
    expect(again.missing).toEqual([]);
    expect(again.failure).toBeUndefined();

    const wider = await history.read('AAPL', '1d', { startMs: NOW - 60 * DAY_MS, endMs: NOW - 2 * DAY_MS });
    expect(wider.candles).toEqual(before.candles);
    expect(wider.missing).toEqual([{ startMs: NOW - 10 * DAY_MS, endMs: NOW - 2 * DAY_MS, reason: 'upstream_failed' }]);
    expect(wider.failure).toBeInstanceOf(DataSourceError);
  });

  it('when the upstream is down and nothing is stored, then the read fails with the upstream failure', async () => {
    upstream.down = true;

    await expect(history.read('AAPL', '1d', { startMs: NOW - 30 * DAY_MS, endMs: NOW })).rejects.toBeInstanceOf(DataSourceError);
  });

  it('when the upstream does not know the symbol and nothing is stored, then info is undefined', async () => {
    const read = await history.read('NOSUCH', '1d', { startMs: NOW - 30 * DAY_MS, endMs: NOW });

    expect(read.info).toBeUndefined();
    expect(read.candles).toEqual([]);
  });

  it('when 1m bars are asked for beyond the upstream retention and none are stored, then nothing is fetched and the span is missing', async () => {
    const old = { startMs: NOW - 40 * DAY_MS, endMs: NOW - 39 * DAY_MS };

    const read = await history.read('AAPL', '1m', old);

    expect(upstream.asked).toEqual([]);
    expect(read.missing).toEqual([{ ...old, reason: 'beyond_reach' }]);
  });

  it('when 1m bars were stored while the upstream kept them, then they are served after it no longer does', async () => {
    const span = { startMs: NOW - 3 * DAY_MS, endMs: NOW - 2 * DAY_MS };
    const fresh = await history.read('AAPL', '1m', span);
    expect(fresh.candles.length).toBeGreaterThan(200);
    upstream.asked.length = 0;

    now = NOW + 90 * DAY_MS;
    const later = await history.read('AAPL', '1m', span);

    expect(upstream.asked).toEqual([]);
    expect(later.candles).toEqual(fresh.candles);
    expect(later.missing).toEqual([]);
  });

  it('keepCurrent: when a stored symbol\'s market closed since the last check, then its last days are read; without a close, or never stored, nothing is asked', async () => {
    await history.read('AAPL', '1d', { startMs: NOW - 30 * DAY_MS, endMs: NOW });
    upstream.asked.length = 0;

    // 18:00 UTC on a Wednesday: New York is open; nothing closed since a minute ago.
    expect(await history.keepCurrent(['AAPL', 'MSFT'], NOW - 60_000)).toBe(0);
    expect(upstream.asked).toEqual([]);

    // After the 21:00 UTC close, the day's bar is read once more; MSFT was never stored, so it is left alone.
    const before = NOW;
    now = NOW + 4 * 3_600_000;
    expect(await history.keepCurrent(['AAPL', 'MSFT'], before)).toBe(1);
    expect(upstream.asked.map((q) => q.symbol)).toEqual(['AAPL']);
  });

  it('when a window of 1m bars is longer than one upstream call may ask, then it is fetched in 7-day windows', async () => {
    await history.read('AAPL', '1m', { startMs: NOW - 20 * DAY_MS, endMs: NOW - 2 * DAY_MS });

    expect(upstream.asked.map((q) => [q.startMs, q.endMs])).toEqual([
      [NOW - 20 * DAY_MS, NOW - 13 * DAY_MS],
      [NOW - 13 * DAY_MS, NOW - 6 * DAY_MS],
      [NOW - 6 * DAY_MS, NOW - 2 * DAY_MS],
    ]);
  });
});

describe('history store: a split that becomes known later', () => {
  const SPLIT_MS = Date.UTC(2020, 7, 31, 13, 30);
  let dir: string;
  let db: OpenedUserStore;

  /** An upstream that, like every real one, gives prices on the basis of the day it is asked. */
  function splittingUpstream(clock: () => number) {
    return async (query: HistoryQuery): Promise<History> => {
      const afterSplit = clock() >= SPLIT_MS;
      const candles = [];
      for (let t = Math.ceil(query.startMs! / DAY_MS) * DAY_MS + 13.5 * 3_600_000; t < query.endMs! && t <= clock(); t += DAY_MS) {
        const preSplit = t < SPLIT_MS;
        const price = preSplit ? (afterSplit ? 125 : 500) : 130;
        const volume = preSplit && !afterSplit ? 1000 : 4000;
        candles.push({ time: new Date(t).toISOString(), open: price, high: price + 1, low: price - 1, close: price, adj_close: price, volume });
      }
      const splits = afterSplit && query.startMs! <= SPLIT_MS && SPLIT_MS < query.endMs! ? [{ time: new Date(SPLIT_MS).toISOString(), numerator: 4, denominator: 1 }] : [];
      return { symbol: query.symbol, currency: 'USD', timezone: 'America/New_York', interval: query.interval, candles, events: { dividends: [], splits } };
    };
  }

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-history-split-'));
    db = await openUserStore(`sqlite:${join(dir, 'mds.sqlite')}`, { runMigrations: true });
  });

  afterEach(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('when bars stored before a 4-for-1 split meet bars fetched after it, then no answer mixes the two bases', async () => {
    let now = Date.UTC(2020, 7, 20, 20, 0);
    const history = new HistoryStore({ store: db.candles, fetch: splittingUpstream(() => now), provider: () => 'test', now: () => now });
    const before = await history.read('AAPL', '1d', { startMs: Date.UTC(2020, 7, 1), endMs: Date.UTC(2020, 7, 19) });
    expect(before.candles.every((c) => c.close === 500 && c.volume === 1000)).toBe(true);

    now = Date.UTC(2020, 8, 10, 20, 0);
    const after = await history.read('AAPL', '1d', { startMs: Date.UTC(2020, 7, 1), endMs: Date.UTC(2020, 8, 9) });

    const pre = after.candles.filter((c) => c.timeMs < SPLIT_MS);
    const post = after.candles.filter((c) => c.timeMs >= SPLIT_MS);
    expect(pre.length).toBeGreaterThan(10);
    expect(post.length).toBeGreaterThan(5);
    expect(pre.every((c) => c.close === 125 && c.volume === 4000)).toBe(true);
    expect(post.every((c) => c.close === 130)).toBe(true);
    expect(after.actions).toEqual([{ kind: 'split', timeMs: SPLIT_MS, numerator: 4, denominator: 1 }]);
  });
});
