/**
 * Live bars (DESIGN 26) from Polygon/Massive trade messages on a local socket, through the real
 * adapter and the leader's bar service (clock injected, so a minute ends when the test says): the
 * final bar equals the reference summed from the same trades, a trade sent again is counted once, a
 * minute aggregate is taken as given, a late trade revises; and a second leader that takes over from
 * the shared state finishes the open bar with no trade counted twice.
 */
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { Broadcast } from '../../src/domain/ports/cache.js';
import type { LiveBar } from '../../src/domain/live-bar.js';
import { MemoryCacheStore } from '../../src/infra/cache/memory-cache-store.js';
import { PolygonSocket } from '../../src/infra/stream/polygon-socket.js';
import { LiveBars } from '../../src/services/live-bars.js';
import { startFakePolygonSocket, type FakePolygonSocket } from '../helpers/fake-push-upstream.js';
import { waitFor } from '../helpers/wait-for.js';
import { localBroadcast } from '../helpers/local-broadcast.js';

const logger = pino({ level: 'silent' });
const MINUTE = 60_000;
const GRACE = 2000;
const M = Date.UTC(2026, 10, 25, 15, 0);
const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

interface Trade {
  price: number;
  size: number;
  sequence: number;
  timeMs: number;
}

/** The reference bar of trades of one minute, summed here on its own. */
function reference(trades: readonly Trade[]) {
  const sorted = [...trades].sort((a, b) => a.timeMs - b.timeMs);
  return {
    time: new Date(Math.floor(sorted[0]!.timeMs / MINUTE) * MINUTE).toISOString(),
    open: sorted[0]!.price,
    high: Math.max(...trades.map((t) => t.price)),
    low: Math.min(...trades.map((t) => t.price)),
    close: sorted[sorted.length - 1]!.price,
    volume: trades.reduce((sum, t) => sum + t.size, 0),
  };
}

const ohlcv = (json: string) => {
  const b = JSON.parse(json) as { time: string; open: number; high: number; low: number; close: number; volume: number; final: boolean; revised: boolean };
  return { time: b.time, open: b.open, high: b.high, low: b.low, close: b.close, volume: b.volume };
};

async function leader(polygon: FakePolygonSocket, store: MemoryCacheStore, broadcast: Broadcast, clock: { now: number }, delivered: string[], stored: LiveBar[]) {
  const socket = new PolygonSocket({ url: polygon.url, apiKeys: ['good'], logger, minReconnectMs: 50 });
  const bars = new LiveBars({
    store,
    stateKey: (upstream, symbol) => `bars:${upstream}:${symbol}`,
    broadcast,
    channel: 'bars',
    leading: () => ['polygon'],
    symbols: () => ['AAPL'],
    deliver: (_symbol, json) => delivered.push(json),
    sink: { storeFinal: async (list) => void stored.push(...list) },
    sessionOf: () => 'regular',
    graceMs: GRACE,
    revisionWindowMs: 5 * MINUTE,
    logger,
    persistEveryMs: 0,
    now: () => clock.now,
  });
  bars.start();
  socket.start({ price: (update) => bars.accept(update, 'polygon'), connected: () => undefined });
  socket.setSymbols(['AAPL']);
  await polygon.waitForSubscribed('AAPL');
  await waitFor(() => polygon.subscribed().has('AM.AAPL'), { message: 'the aggregates subscribed beside the trades' });
  return { socket, bars };
}

describe('live bars from Polygon trades on a local socket', () => {
  it('when trades are sent (one twice), then the final bar equals the reference, an aggregate is taken as given, and a late trade revises', async () => {
    const polygon = await startFakePolygonSocket(['good']);
    cleanups.push(() => polygon.close());
    const clock = { now: M + 500 };
    const delivered: string[] = [];
    const stored: LiveBar[] = [];
    const { socket, bars } = await leader(polygon, new MemoryCacheStore({ maxEntries: 1000 }), localBroadcast(), clock, delivered, stored);
    cleanups.push(() => socket.stop(), () => bars.close());

    const trades: Trade[] = [
      { price: 227.41, size: 100, sequence: 101, timeMs: M + 1000 },
      { price: 227.62, size: 40, sequence: 102, timeMs: M + 9000 },
      { price: 227.3, size: 300, sequence: 103, timeMs: M + 31_000 },
      { price: 227.55, size: 7, sequence: 104, timeMs: M + 58_000 },
    ];
    for (const t of trades) polygon.trade('AAPL', t.price, t.timeMs, t);
    polygon.trade('AAPL', trades[1]!.price, trades[1]!.timeMs, trades[1]); // the same trade again
    await waitFor(() => bars.accepted === 5, { message: 'the five messages taken' });
    clock.now = M + MINUTE + GRACE;
    bars.tick();
    await waitFor(() => delivered.some((j) => (JSON.parse(j) as { final: boolean }).final), { message: 'the final bar' });
    const final = delivered.find((j) => (JSON.parse(j) as { final: boolean }).final)!;
    expect(ohlcv(final)).toEqual(reference(trades));
    expect(JSON.parse(final)).toMatchObject({ symbol: 'AAPL', interval: '1m', final: true, revised: false, session: 'regular' });
    await waitFor(() => stored.length === 1, { message: 'the final bar stored' });
    expect(stored[0]).toMatchObject({ symbol: 'AAPL', timeMs: M, final: true, upstream: 'polygon', volume: 447 });

    // A late trade of that minute (a later sequence): the bar again, revised, and stored again.
    const late: Trade = { price: 228, size: 3, sequence: 105, timeMs: M + 59_500 };
    clock.now = M + MINUTE + GRACE + 3000;
    polygon.trade('AAPL', late.price, late.timeMs, late);
    await waitFor(() => delivered.some((j) => (JSON.parse(j) as { revised: boolean }).revised), { message: 'the revised bar' });
    expect(ohlcv(delivered.find((j) => (JSON.parse(j) as { revised: boolean }).revised)!)).toEqual(reference([...trades, late]));
    await waitFor(() => { bars.tick(); return stored.length === 2; }, { message: 'the revised bar stored' });
    expect(stored[1]).toMatchObject({ revised: true, volume: 450 });

    // The upstream's own aggregate of the minute replaces what the trades built.
    const given = { startMs: M, open: 227.4, high: 228.1, low: 227.2, close: 228, volume: 1200 };
    expect(polygon.aggregate('AAPL', given)).toBe(1);
    await waitFor(() => delivered.some((j) => ohlcv(j).volume === 1200), { message: 'the aggregate bar' });
    expect(ohlcv(delivered.find((j) => ohlcv(j).volume === 1200)!)).toEqual({ time: new Date(M).toISOString(), open: 227.4, high: 228.1, low: 227.2, close: 228, volume: 1200 });
  });

  it('when the leader goes mid-minute and another takes over from the shared state, then it finishes the bar with no trade counted twice, and no bar is invented for minutes without trades', async () => {
    const polygon = await startFakePolygonSocket(['good']);
    cleanups.push(() => polygon.close());
    const store = new MemoryCacheStore({ maxEntries: 1000 });
    const broadcast = localBroadcast();
    const clock = { now: M + 500 };
    const delivered: string[] = [];
    const stored: LiveBar[] = [];
    const first = await leader(polygon, store, broadcast, clock, delivered, stored);
    const trades: Trade[] = Array.from({ length: 10 }, (_, i) => ({ price: 100 + ((i * 7) % 5), size: 10 + i, sequence: 500 + i, timeMs: M + 2000 + i * 5000 }));
    for (const t of trades.slice(0, 6)) polygon.trade('AAPL', t.price, t.timeMs, t);
    await waitFor(() => first.bars.accepted === 6, { message: 'the first six trades taken' });
    first.bars.tick(); // its state is written (as every persist round does)
    await first.bars.flush();
    // Gone without a goodbye: its socket cut, its timer stopped, nothing more written.
    await first.socket.stop();
    await first.bars.close();

    const second = await leader(polygon, store, broadcast, clock, delivered, stored);
    cleanups.push(() => second.socket.stop(), () => second.bars.close());
    // The upstream repeats the last two trades to the new connection, then goes on.
    for (const t of trades.slice(4)) polygon.trade('AAPL', t.price, t.timeMs, t);
    await waitFor(() => second.bars.accepted === 6, { message: 'the trades the second leader heard' });
    clock.now = M + 4 * MINUTE + GRACE;
    second.bars.tick();
    await waitFor(() => stored.length >= 1, { message: 'the final bar stored by the second leader' });
    expect(stored).toHaveLength(1);
    expect(stored[0]).toMatchObject({ timeMs: M, final: true, revised: false, volume: reference(trades).volume });
    const finals = delivered.filter((j) => (JSON.parse(j) as { final: boolean }).final);
    expect(finals.map(ohlcv)).toEqual([reference(trades)]);
  });
});

describe('live bars publishing', () => {
  it('when a symbol trades many times within a second, then its open bar is published at most once that second (the latest state next), and the final bar at once', async () => {
    const polygon = await startFakePolygonSocket(['good']);
    cleanups.push(() => polygon.close());
    const clock = { now: M + 500 };
    const delivered: string[] = [];
    const { socket, bars } = await leader(polygon, new MemoryCacheStore({ maxEntries: 1000 }), localBroadcast(), clock, delivered, []);
    cleanups.push(() => socket.stop(), () => bars.close());
    for (let i = 0; i < 20; i++) polygon.trade('AAPL', 100 + i, M + 1000 + i, { size: 1, sequence: 900 + i });
    await waitFor(() => bars.accepted === 20, { message: 'twenty trades taken' });
    bars.tick();
    // Within the same second: only the first state went out.
    expect(delivered.map((j) => (JSON.parse(j) as { close: number; volume: number }).volume)).toEqual([1]);
    clock.now += 1000;
    bars.tick();
    expect(delivered.map((j) => (JSON.parse(j) as { volume: number }).volume)).toEqual([1, 20]);
    expect(JSON.parse(delivered[1]!)).toMatchObject({ close: 119, high: 119, low: 100, final: false });
    clock.now = M + MINUTE + GRACE;
    bars.tick();
    expect(delivered.map((j) => (JSON.parse(j) as { final: boolean }).final)).toEqual([false, false, true]);
  });
});
