/**
 * One push connection for the fleet (DESIGN 23): three `mds serve` processes share this file's own
 * redis-server and a local replay of Yahoo's streamer. Exactly one holds the upstream connection; it
 * is killed (SIGKILL: no goodbye, its lease left to expire) and another takes over within 5 s, while
 * the subscribers of the other instances keep receiving pushed prices.
 */
import { rmSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeYahooStreamer, type FakeYahooStreamer } from '../helpers/fake-push-upstream.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { spawnLiveInstance, type ServeProcess } from '../helpers/serve-process.js';
import { openWs, type TestWs } from '../helpers/ws-client.js';
import { waitFor } from '../helpers/wait-for.js';

/** A symbol the simulated provider knows. */
const SYMBOL = 'AAPL';

let redis: RedisProcess;
let yahoo: FakeYahooStreamer;
const dirs: string[] = [];
const instances: ServeProcess[] = [];
const clients: TestWs[] = [];

async function serve(): Promise<ServeProcess> {
  const { proc, dir } = await spawnLiveInstance({ redisUrl: redis.url, yahooUrl: yahoo.url, prefix: 'mds-live-fleet' });
  dirs.push(dir);
  instances.push(proc);
  return proc;
}

async function subscriber(proc: ServeProcess): Promise<TestWs> {
  const ws = await openWs(`${proc.url.replace(/^http/, 'ws')}/api/ws`);
  clients.push(ws);
  ws.send({ action: 'subscribe', symbols: [SYMBOL] });
  await ws.waitFor((e) => e.event === 'quote', 'the first quote', 10_000);
  return ws;
}

beforeAll(async () => {
  redis = await startRedis();
  yahoo = await startFakeYahooStreamer();
}, 30_000);

afterAll(async () => {
  for (const ws of clients) ws.close();
  for (const proc of instances) await proc.stop('SIGTERM').catch(() => undefined);
  await yahoo?.close();
  await redis?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('one push connection for the fleet', () => {
  it('when three instances share Redis, then one connects; when it is killed, another connects within 5 s and the others keep receiving', async () => {
    const t0 = performance.now();
    const phase = (name: string) => console.log(`${name}: ${(performance.now() - t0).toFixed(0)} ms`);
    const [a, b, c] = await Promise.all([serve(), serve(), serve()]);
    phase('three instances listening');
    const subs = await Promise.all([subscriber(a), subscriber(b), subscriber(c)]);
    phase('a subscriber on each');
    await yahoo.waitForSubscribed(SYMBOL, 10_000);
    phase('upstream subscribed');
    // An instance that started while Redis was slow to answer (a loaded machine) may have connected
    // alone for a moment; once Redis answers it gives that lease up: one connection remains.
    await waitFor(() => yahoo.open === 1, { timeoutMs: 10_000, message: 'one upstream connection' });
    phase('one connection');
    // Over more than a lease lifetime and a tick, no second instance opens a connection.
    const accepted = yahoo.accepted;
    const watchUntil = Date.now() + 4000;
    await waitFor(() => yahoo.accepted > accepted || yahoo.open !== 1 || Date.now() >= watchUntil, { timeoutMs: 8000, intervalMs: 50, message: 'the observation window' });
    expect(yahoo.accepted).toBe(accepted);
    expect(yahoo.open).toBe(1);

    yahoo.push({ id: SYMBOL, price: 321.5, time: Date.now() });
    for (const ws of subs) await ws.waitFor((e) => e.event === 'quote' && e.data?.price === 321.5, 'the pushed price on every instance');

    // The leader: the instance whose last word on the lease is that it took it.
    const holds = (p: ServeProcess) => p.stdout().lastIndexOf('push upstream lease taken') > p.stdout().lastIndexOf('push upstream lease lost');
    const leaders = [a, b, c].filter(holds);
    expect(leaders).toHaveLength(1);
    const leaderIndex = [a, b, c].indexOf(leaders[0]!);
    const leader = leaders[0]!;
    const killedAt = performance.now();
    await leader.stop('SIGKILL');
    await waitFor(() => yahoo.accepted === accepted + 1 && yahoo.open === 1 && yahoo.subscribed().has(SYMBOL), { timeoutMs: 5000, message: 'a new leader connected and subscribed' });
    const takeoverMs = performance.now() - killedAt;
    console.log(`leader killed -> new upstream connection subscribed after ${takeoverMs.toFixed(0)} ms (lease 2.5 s, tick 0.75 s)`);
    expect(takeoverMs).toBeLessThan(5000);

    yahoo.push({ id: SYMBOL, price: 322.5, time: Date.now() });
    const survivors = subs.filter((_, i) => i !== leaderIndex);
    for (const ws of survivors) await ws.waitFor((e) => e.event === 'quote' && e.data?.price === 322.5, 'the next pushed price on the surviving instances');
    // Still exactly one connection.
    expect(yahoo.open).toBe(1);
    // Its log line may reach the pipe a moment after the connection.
    await waitFor(() => [a, b, c].filter((p, i) => i !== leaderIndex && holds(p)).length === 1, { message: 'one surviving instance saying it took the lease' });
  }, 60_000);
});
