/**
 * Polling yields to a push upstream (DESIGN 23, docs/live.md): while Yahoo's streamer (a local replay)
 * is connected, the stream hub's refresh runs ask the upstream for nothing; when the streamer dies,
 * polling covers the subscribers; when it comes back, polling stops again.
 *
 * Synchronization: the hub counts its refresh runs in `mds_stream_refresh_runs_total{mode}` (`push`
 * when a push upstream was connected as the run began, `poll` otherwise); runs never overlap. Every
 * window below is a number of refresh runs read from the service's own metrics, never wall time, and
 * every wait is a condition with a deadline. The upstream is the controlled provider, which counts the
 * quotes it is asked for.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { startFakePolygonSocket, startFakeYahooStreamer, type FakeYahooStreamer } from '../helpers/fake-push-upstream.js';
import { sampleValue, scrape } from '../helpers/metrics.js';
import { freePort, startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { openWs, type TestWs } from '../helpers/ws-client.js';
import { waitFor } from '../helpers/wait-for.js';

/** Refresh runs each quiet window spans. */
const RUNS = 3;
/** Deadline of a wait for refresh runs (STREAM_REFRESH_SECONDS=1): generous for a loaded machine. */
const RUNS_DEADLINE_MS = 20_000;

let redis: RedisProcess;
let yahoo: FakeYahooStreamer;
let svc: TestService;
let ws: TestWs | undefined;
const provider = new ControlledProvider();

beforeAll(async () => {
  redis = await startRedis();
  yahoo = await startFakeYahooStreamer();
  svc = await startTestService(
    {
      CACHE_URL: `${redis.url}/0`,
      STREAM_UPSTREAMS: 'yahoo',
      YAHOO_STREAM_URL: yahoo.url,
      STREAM_REFRESH_SECONDS: '1',
      // Longer than the test: no quote expires, so any upstream call is the refresh's polling.
      CACHE_TTL_SECONDS: '600',
      STREAM_MAX_PER_ADDRESS: '0',
      METRICS_PORT: String(await freePort()),
    },
    { provider, pushReconnectMs: 50 },
  );
});

afterAll(async () => {
  ws?.close();
  await svc?.close();
  await yahoo?.close();
  await redis?.stop();
});

async function runs(of: TestService = svc): Promise<{ poll: number; push: number }> {
  const text = await scrape(of.metricsUrl!);
  return { poll: sampleValue(text, 'mds_stream_refresh_runs_total', { mode: 'poll' }), push: sampleValue(text, 'mds_stream_refresh_runs_total', { mode: 'push' }) };
}

/** Waits until `mode` runs reach `count`; resolves to the counts then. */
async function untilRuns(mode: 'poll' | 'push', count: number, of: TestService = svc): Promise<{ poll: number; push: number }> {
  let seen = { poll: 0, push: 0 };
  await waitFor(
    async () => {
      seen = await runs(of);
      return seen[mode] >= count;
    },
    { timeoutMs: RUNS_DEADLINE_MS, intervalMs: 50, message: `${count} refresh runs in ${mode} mode (saw ${JSON.stringify(seen)})` },
  );
  return seen;
}

const calls = (symbol: string) => provider.calls.get(symbol) ?? 0;

/**
 * While the streamer stays connected: one `push` run completes first (a `poll` run that began before
 * the connection has then ended: runs never overlap), then over RUNS more runs, all `push`, the upstream
 * is asked for no quote of `symbol`, and a pushed price still reaches the subscriber.
 */
async function expectQuietOverRuns(symbol: string, pushedPrice: number): Promise<void> {
  const start = await runs();
  const settled = await untilRuns('push', start.push + 1);
  const before = calls(symbol);
  expect(yahoo.push({ id: symbol, price: pushedPrice, time: Date.now() })).toBe(1);
  await ws!.waitFor((e) => e.event === 'quote' && e.data?.price === pushedPrice, `the pushed price ${pushedPrice}`, 10_000);
  const after = await untilRuns('push', settled.push + RUNS);
  expect(after.poll, 'no refresh run polled while the streamer was connected').toBe(settled.poll);
  expect(calls(symbol), 'quote calls to the upstream while the streamer was connected').toBe(before);
  expect(yahoo.open).toBe(1);
}

describe('polling and a push upstream', () => {
  it('when the streamer is connected polling pauses; when it dies polling covers the subscriber; when it returns polling pauses again', async () => {
    const symbol = uniqueSymbol('PAUSE');
    provider.set(symbol, 100);
    ws = await openWs(`${svc.url.replace(/^http/, 'ws')}/api/ws`);
    ws.send({ action: 'subscribe', symbols: [symbol] });
    expect(await ws.waitFor((e) => e.event === 'subscribed', 'subscribed')).toMatchObject({ symbols: [symbol], missing: [] });
    await ws.waitFor((e) => e.event === 'quote' && e.data?.price === 100, 'the first quote');
    await yahoo.waitForSubscribed(symbol, 10_000);

    // (a) Connected: RUNS refresh runs, no quote calls, pushes arrive.
    await expectQuietOverRuns(symbol, 120);

    // (b) The streamer dies: the runs poll again and the provider's new price reaches the subscriber.
    await yahoo.stop();
    const killed = await runs();
    const beforePolling = calls(symbol);
    provider.set(symbol, 131);
    await ws.waitFor((e) => e.event === 'quote' && e.data?.price === 131, 'the polled price after the streamer died', RUNS_DEADLINE_MS);
    const polled = await untilRuns('poll', killed.poll + 1);
    expect(polled.poll).toBeGreaterThan(killed.poll);
    expect(calls(symbol), 'quote calls once polling covers').toBeGreaterThan(beforePolling);

    // (c) The streamer comes back: the adapter reconnects and subscribes again, and polling pauses again.
    const acceptedBefore = yahoo.accepted;
    await yahoo.start();
    await waitFor(() => yahoo.accepted > acceptedBefore && yahoo.subscribed().has(symbol), { timeoutMs: RUNS_DEADLINE_MS, message: 'the adapter to reconnect and subscribe again' });
    await expectQuietOverRuns(symbol, 140);
    expect(ws.quotes(symbol)).toEqual([100, 120, 131, 140]);
  }, 180_000);
});

describe("polling beside Polygon's socket, which prices stock tickers only", () => {
  it('when the socket is connected, then a stock ticker is not polled while an index followed beside it is', async () => {
    const ownRedis = await startRedis();
    const polygon = await startFakePolygonSocket(['good-polygon-key-0003']);
    const calls2 = new ControlledProvider();
    const service = await startTestService(
      {
        CACHE_URL: `${ownRedis.url}/0`,
        STREAM_UPSTREAMS: 'polygon',
        POLYGON_STREAM_URL: polygon.url,
        POLYGON_API_KEYS: 'good-polygon-key-0003',
        STREAM_REFRESH_SECONDS: '1',
        CACHE_TTL_SECONDS: '600',
        METRICS_PORT: String(await freePort()),
      },
      { provider: calls2, pushReconnectMs: 50 },
    );
    const client = await openWs(`${service.url.replace(/^http/, 'ws')}/api/ws`);
    try {
      const [stock, index] = ['PSHP', '^PSHP'];
      calls2.set(stock, 100);
      calls2.set(index, 100);
      client.send({ action: 'subscribe', symbols: [stock, index] });
      expect(await client.waitFor((e) => e.event === 'subscribed', 'subscribed')).toMatchObject({ symbols: [stock, index], missing: [] });
      await polygon.waitForSubscribed(stock, 10_000);
      expect(polygon.subscribed().has(index)).toBe(false);

      // The index is polled, so every run counts as `poll`: the window is RUNS of them, after one
      // that began once the socket was connected.
      const start = await runs(service);
      const settled = await untilRuns('poll', start.poll + 1, service);
      const [stockBefore, indexBefore] = [calls2.calls.get(stock) ?? 0, calls2.calls.get(index) ?? 0];
      expect(polygon.trade(stock, 101.5)).toBe(1);
      await client.waitFor((e) => e.event === 'quote' && e.data?.symbol === stock && e.data.price === 101.5, 'the traded price', 10_000);
      await untilRuns('poll', settled.poll + RUNS, service);
      expect(calls2.calls.get(stock) ?? 0, 'quote calls for the stock Polygon prices').toBe(stockBefore);
      expect(calls2.calls.get(index) ?? 0, 'quote calls for the index Polygon does not price').toBeGreaterThanOrEqual(indexBefore + RUNS);
    } finally {
      client.close();
      await service.close();
      await polygon.close();
      await ownRedis.stop();
    }
  }, 180_000);
});
