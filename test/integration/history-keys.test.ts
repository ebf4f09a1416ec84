/**
 * Cache keys from user input are canonical (issue 32, item 2): history requests that differ only in
 * the millisecond of `start` name the same bars, so they share one cache key and the process keeps
 * no copy per spelling. Real service, its own redis-server, the simulated provider.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';

setFlagsFromString('--expose-gc');
/** A full collection, as `node --expose-gc` offers it (made available to this process at run time). */
const fullGc = runInNewContext('gc') as () => void;

describe('history cache keys from raw milliseconds', () => {
  let redis: RedisProcess;
  let client: Redis;
  let svc: TestService;

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis({ port: redis.port, host: '127.0.0.1', lazyConnect: true });
    await client.connect();
    svc = await startTestService({ CACHE_URL: redis.url });
  });
  afterAll(async () => {
    await svc?.close();
    client?.disconnect();
    await redis?.stop();
  });

  const historyKeys = async () => (await client.keys('*')).filter((k) => k.includes('history')).length;

  it('when 1,000 history requests differ only in the millisecond of start, then Redis gains at most one key per session they name and the heap after a full GC stays within 10 MB', async () => {
    const target = (ms: number) => `/api/history/AAPL?interval=1d&start=2020-01-02T00:00:00.${String(ms).padStart(3, '0')}Z&end=2020-03-02`;
    // The same traffic for another symbol first, so the heap and the allocator have their working size.
    for (let batch = 0; batch < 200; batch += 50) {
      await Promise.all(Array.from({ length: 50 }, async (_, i) => (await svc.fetch(target(batch + i).replace('AAPL', 'MSFT'))).arrayBuffer()));
    }
    svc.logs.length = 0;
    const keysBefore = await historyKeys();
    fullGc();
    const rssBefore = process.memoryUsage().rss;
    const heapBefore = process.memoryUsage().heapUsed;

    const bodies = new Set<string>();
    for (let batch = 0; batch < 1000; batch += 50) {
      const answers = await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const res = await svc.fetch(target(batch + i));
          expect(res.status).toBe(200);
          return (await res.json()) as { data: { candles: unknown[] } };
        }),
      );
      for (const a of answers) bodies.add(JSON.stringify(a.data.candles));
    }

    // The test keeps every log line of the service in memory; they are no part of the service's own.
    svc.logs.length = 0;
    fullGc();
    const rssAfter = process.memoryUsage().rss;
    const heapAfter = process.memoryUsage().heapUsed;
    const keysAfter = await historyKeys();
    // Every start from 00:00:00.000 to .999 on 2020-01-02 names the session of 2020-01-02 (it opens at 14:30 UTC).
    const sessionsNamed = 1;
    console.log(`history keys: ${keysBefore} -> ${keysAfter} after 1,000 requests; RSS ${(rssBefore / 2 ** 20).toFixed(1)} MB -> ${(rssAfter / 2 ** 20).toFixed(1)} MB after a full GC (heap ${(heapBefore / 2 ** 20).toFixed(1)} -> ${(heapAfter / 2 ** 20).toFixed(1)} MB)`);
    expect(keysAfter - keysBefore).toBeLessThanOrEqual(sessionsNamed);
    expect(bodies.size).toBe(1);
    // Client and service share this process, so its RSS also holds the client's sockets and the
    // allocator's arenas (+15 MB here, reported above); the heap after a full GC is what the service kept.
    expect(heapAfter - heapBefore).toBeLessThan(10 * 2 ** 20);
    // 1,200 requests over HTTP on a shared machine: far beyond the default per-test time.
  }, 120_000);
});
