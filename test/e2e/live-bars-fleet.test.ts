/**
 * Live bars across a fleet (DESIGN 26): two `mds serve` processes on this file's own redis-server and
 * a local replay of Yahoo's streamer (frames made from the recorded BTC-USD capture, times moved into
 * the running minute). One bar per minute reaches the subscribers of both instances; the leader is
 * killed mid-minute (SIGKILL: no goodbye), the survivor takes the upstream over, reads the open bar
 * from Redis, skips the frames the upstream sends again, and finishes the bar: it equals the
 * reference built from every tick, each counted once.
 *
 * Needs `npm run build` (the processes run the built CLI).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { btcReplay, frameOf, referenceBars, type ReplayTick } from '../helpers/bar-replay.js';
import { startFakeYahooStreamer, type FakeYahooStreamer } from '../helpers/fake-push-upstream.js';
import { connectFailFast, startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { spawnServe, type ServeProcess } from '../helpers/serve-process.js';
import { openWs, type TestWs } from '../helpers/ws-client.js';
import { waitFor } from '../helpers/wait-for.js';

/** A crypto pair the simulated provider knows: bars every minute of every day. */
const SYMBOL = 'BTC-USD';
const MINUTE = 60_000;
const GRACE_MS = 500;

let redis: RedisProcess;
let client: Redis;
let yahoo: FakeYahooStreamer;
const dirs: string[] = [];
const instances: ServeProcess[] = [];
const clients: TestWs[] = [];

async function serve(): Promise<ServeProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'mds-live-bars-'));
  dirs.push(dir);
  const proc = await spawnServe(['--port', '0', '--host', '127.0.0.1'], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      HOME: dir,
      DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
      CACHE_URL: `${redis.url}/0`,
      SECRET_KEY: 'live-bars-test-secret-0123456789abcdef',
      DEFAULT_ADMIN_PASSWORD: 'admin-password-1',
      MARKET_DATA_PROVIDER: 'simulated',
      REFRESH_INTERVAL_SECONDS: '0',
      STREAM_REFRESH_SECONDS: '0',
      STREAM_UPSTREAMS: 'yahoo',
      YAHOO_STREAM_URL: yahoo.url,
      LIVE_BAR_GRACE_MS: String(GRACE_MS),
      METRICS_PORT: '0',
      LOG_FORMAT: 'json',
    },
  });
  instances.push(proc);
  return proc;
}

async function subscriber(proc: ServeProcess): Promise<TestWs> {
  const ws = await openWs(`${proc.url.replace(/^http/, 'ws')}/api/ws`);
  clients.push(ws);
  ws.send({ action: 'subscribe', symbols: [SYMBOL], bars: '1m' });
  await ws.waitFor((e) => e.event === 'subscribed', 'subscribed', 10_000);
  return ws;
}

type Bar = { time: string; open: number; high: number; low: number; close: number; volume: number | null; final: boolean; revised: boolean };
const barsOf = (ws: TestWs) => ws.events.filter((e) => e.event === 'bar').map((e) => e.data as unknown as Bar);
const ohlcv = (b: Bar) => ({ time: b.time, open: b.open, high: b.high, low: b.low, close: b.close, volume: b.volume });

/** The builder state the leader last wrote for the symbol (any key of it), or undefined. */
async function sharedState(): Promise<{ time?: number } | undefined> {
  const keys = await client.keys(`*live-bars:*:yahoo:${SYMBOL}`);
  if (keys.length === 0) return undefined;
  const value = await client.get(keys[0]!);
  return value === null ? undefined : (JSON.parse(value) as { time?: number });
}

beforeAll(async () => {
  redis = await startRedis();
  client = await connectFailFast(redis.port);
  yahoo = await startFakeYahooStreamer();
}, 30_000);

afterAll(async () => {
  for (const ws of clients) ws.close();
  for (const proc of instances) await proc.stop('SIGTERM').catch(() => undefined);
  await yahoo?.close();
  client?.disconnect();
  await redis?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('live bars across two instances', () => {
  it('when the leader is killed mid-minute, then the survivor finishes the bar from the shared state, every tick counted once, and each subscriber gets one final bar', async () => {
    const [a, b] = await Promise.all([serve(), serve()]);
    const subs = await Promise.all([subscriber(a!), subscriber(b!)]);
    await yahoo.waitForSubscribed(SYMBOL, 10_000);
    await waitFor(() => yahoo.open === 1, { timeoutMs: 10_000, message: 'one upstream connection' });
    const holds = (p: ServeProcess) => p.stdout().lastIndexOf('push upstream lease taken') > p.stdout().lastIndexOf('push upstream lease lost');
    await waitFor(() => [a!, b!].filter(holds).length === 1, { timeoutMs: 5000, message: 'one instance saying it leads' });
    const leaderIndex = [a!, b!].findIndex(holds);
    const leader = [a!, b!][leaderIndex]!;
    const survivorWs = subs[1 - leaderIndex]!;

    // A minute with time left for the takeover (a lease lifetime and a tick, on a loaded machine).
    let minute = Math.floor(Date.now() / MINUTE) * MINUTE;
    if (minute + MINUTE - Date.now() < 30_000) {
      const next = minute + MINUTE;
      await waitFor(() => Date.now() >= next, { timeoutMs: MINUTE, intervalMs: 20, message: 'the next minute' });
      minute = next;
    }
    const ticks: ReplayTick[] = btcReplay([minute], 10).map((t) => ({ ...t, symbol: SYMBOL }));
    const stamp = (tick: ReplayTick, i: number) => {
      tick.timeMs = Math.min(Date.now() + i, minute + MINUTE - 100 + i);
    };
    for (const [i, tick] of ticks.slice(0, 6).entries()) {
      stamp(tick, i);
      expect(yahoo.push(frameOf(tick))).toBe(1);
    }
    // Both instances' subscribers see the open bar the leader publishes.
    for (const ws of subs) await ws.waitFor((e) => e.event === 'bar', 'an open bar on each instance', 5000);
    // The leader has written what it counted: the sixth tick is in the shared state.
    await waitFor(async () => (await sharedState())?.time === ticks[5]!.timeMs, { timeoutMs: 5000, message: 'the open bar written to Redis' });

    const accepted = yahoo.accepted;
    await leader.stop('SIGKILL');
    const killedAt = performance.now();
    await waitFor(() => yahoo.accepted === accepted + 1 && yahoo.open === 1 && yahoo.subscribed().has(SYMBOL), { timeoutMs: 8000, message: 'the survivor connected and subscribed' });
    console.log(`leader killed -> survivor subscribed after ${(performance.now() - killedAt).toFixed(0)} ms`);
    expect(Date.now()).toBeLessThan(minute + MINUTE - 2000);

    // The upstream sends the last two frames again to the new connection, then the rest of the minute.
    for (const tick of ticks.slice(4, 6)) expect(yahoo.push(frameOf(tick))).toBe(1);
    for (const [i, tick] of ticks.slice(6).entries()) {
      stamp(tick, 6 + i);
      expect(yahoo.push(frameOf(tick))).toBe(1);
    }
    const reference = referenceBars(ticks);
    const final = await survivorWs.waitFor((e) => e.event === 'bar' && (e.data as unknown as Bar).final, 'the final bar from the survivor', MINUTE + 5000);
    const due = minute + MINUTE + GRACE_MS;
    console.log(`final bar after the minute end plus grace: ${Date.now() - due} ms (upper bound: measured on arrival)`);
    expect(ohlcv(final.data as unknown as Bar)).toEqual(reference[0]);
    expect(Date.now()).toBeLessThanOrEqual(due + 1000);

    // One final bar of that minute, and no bar of any other minute.
    const finals = barsOf(survivorWs).filter((bar) => bar.final);
    expect(finals).toHaveLength(1);
    expect(new Set(barsOf(survivorWs).map((bar) => bar.time))).toEqual(new Set([new Date(minute).toISOString()]));
  }, 120_000);
});
