/**
 * Two instances sharing one redis-server (started and killed by this test): a quote change seen by
 * one reaches the other's subscribers through Redis; with Redis gone, each still streams the changes
 * it sees itself. The refresher is off, so only the announcement can carry a change across.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { openStream, type TestStream } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait-for.js';

const API_KEY = 'stream-fleet-api-key-0123456789';

describe('streams across instances', () => {
  let redis: RedisProcess;
  let a: TestService;
  let b: TestService;
  const provider = new ControlledProvider();
  const streams: TestStream[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    const env = { CACHE_URL: `${redis.url}/0`, API_KEYS: API_KEY, STREAM_REFRESH_SECONDS: '0' };
    a = await startTestService(env, { provider });
    b = await startTestService(env, { provider });
  });

  afterAll(async () => {
    for (const s of streams) s.close();
    await a?.close();
    await b?.close();
    await redis?.stop();
  });

  async function subscribe(svc: TestService, symbol: string): Promise<TestStream> {
    const stream = await openStream(`${svc.url}/api/stream?symbols=${symbol}`);
    streams.push(stream);
    expect(stream.status).toBe(200);
    await stream.waitForEvents(1);
    return stream;
  }

  /** The provider moves `symbol` and `svc` (only) loads it again: flush, then a read. */
  async function changeOn(svc: TestService, symbol: string, price: number): Promise<void> {
    provider.set(symbol, price);
    expect((await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } })).status).toBe(200);
    expect((await svc.fetch(`/api/quotes/${symbol}`)).status).toBe(200);
  }

  it('stream: when one instance sees a change, then a subscriber of the other gets it through Redis', async () => {
    const symbol = uniqueSymbol('FLEET');
    provider.set(symbol, 100);
    const onB = await subscribe(b, symbol);
    const onA = await subscribe(a, symbol);

    await changeOn(a, symbol, 123.45);
    await onB.waitForEvents(2);
    await onA.waitForEvents(2);
    expect(onB.quotes().map((q) => q.price)).toEqual([100, 123.45]);
    expect(onA.quotes().map((q) => q.price)).toEqual([100, 123.45]);
    expect(onB.events[1]!.id).toBe(onA.events[1]!.id);
  });

  it('stream: when an instance of another provider shares the Redis, then it neither gets nor gives announcements', async () => {
    const otherProvider = new ControlledProvider('other');
    const c = await startTestService({ CACHE_URL: `${redis.url}/0`, API_KEYS: API_KEY, STREAM_REFRESH_SECONDS: '0' }, { provider: otherProvider });
    try {
      const symbol = uniqueSymbol('MIXED');
      provider.set(symbol, 100);
      otherProvider.set(symbol, 500);
      const onB = await subscribe(b, symbol);
      const onC = await subscribe(c, symbol);
      expect(onC.quotes().map((q) => q.price)).toEqual([500]);

      await changeOn(a, symbol, 150);
      await onB.waitForEvents(2);
      // C's next event is its own provider's change: A's announcement never reached it.
      otherProvider.set(symbol, 555);
      expect((await c.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } })).status).toBe(200);
      expect((await c.fetch(`/api/quotes/${symbol}`)).status).toBe(200);
      await onC.waitForEvents(2);
      expect(onC.quotes().map((q) => q.price)).toEqual([500, 555]);
      // ...and C's change never reached B.
      await changeOn(a, symbol, 160);
      await onB.waitForEvents(3);
      expect(onB.quotes().map((q) => q.price)).toEqual([100, 150, 160]);
    } finally {
      await c.close();
    }
  });

  it('stream: when Redis is down, then each instance still streams the changes it sees itself', async () => {
    const symbol = uniqueSymbol('ALONE');
    provider.set(symbol, 100);
    await redis.kill();
    for (const svc of [a, b]) {
      await waitFor(async () => ((await (await svc.fetch('/api/health')).json()) as { cache: boolean }).cache === false, { message: 'the instance noticed Redis is gone' });
    }
    const onA = await subscribe(a, symbol);
    const onB = await subscribe(b, symbol);

    await changeOn(a, symbol, 111);
    await onA.waitForEvents(2);
    expect(onA.quotes().map((q) => q.price)).toEqual([100, 111]);

    await changeOn(b, symbol, 122);
    await onB.waitForEvents(2);
    // b's cache never held 111 (a's memory is a's own): it goes from 100 to 122.
    expect(onB.quotes().map((q) => q.price)).toEqual([100, 122]);
    expect(onA.quotes().map((q) => q.price)).toEqual([100, 111]);
  });
});
