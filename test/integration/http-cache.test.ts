/**
 * The cache layer over a real socket: the whole service (startTestService) against redis-servers this
 * file owns (so it can flush, kill and restart them without touching other suites), and, where
 * upstream calls must be counted, the Yahoo provider against the fake upstream.
 */
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expectDocumentedStatus } from '../helpers/contract-status.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { freePort, startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const API_KEY = 'http-cache-test-api-key-0123456789';
const TTL_SECONDS = 60;
const KEY = 'mds:v2:indices:simulated:configured';
const FIXTURES = resolve(import.meta.dirname, '../fixtures/yahoo');
const SYMBOLS = ['^IXIC', '^SOX', 'KOSPI-25.KS'];

interface Health {
  ok: boolean;
  datasource: boolean;
  cache: boolean;
  auth: boolean;
}

interface AdminStatus {
  cache: { mode: 'redis' | 'memory'; connected: boolean; hits: number; misses: number; kinds: Record<string, { hits: number; misses: number; stale: number }> };
}

interface Read {
  res: Response;
  body: Buffer;
  /** Wall time from sending the request to the last byte of the body. */
  ms: number;
}

let redis: RedisProcess;
let client: Redis;
const services = new Set<TestService>();
const ownRedis: RedisProcess[] = [];
const clients: Redis[] = [];
let upstream: FakeUpstream | undefined;

async function boot(env: Record<string, string> = {}, options: { scheduler?: boolean } = {}): Promise<TestService> {
  const svc = await startTestService({ CACHE_URL: redis.url, API_KEYS: API_KEY, CACHE_TTL_SECONDS: String(TTL_SECONDS), ...env }, options);
  services.add(svc);
  return svc;
}

async function stop(svc: TestService): Promise<void> {
  services.delete(svc);
  await svc.close();
}

async function extraRedis(options: { password?: string } = {}): Promise<RedisProcess> {
  const r = await startRedis(options);
  ownRedis.push(r);
  return r;
}

function redisClient(port: number, options: { password?: string; db?: number } = {}): Redis {
  const c = new Redis({ host: '127.0.0.1', port, lazyConnect: false, maxRetriesPerRequest: 1, ...options });
  clients.push(c);
  return c;
}

async function yahooUpstream(): Promise<FakeUpstream> {
  upstream = await startFakeUpstream({ fixturesDir: FIXTURES });
  return upstream;
}

function yahooEnv(up: FakeUpstream): Record<string, string> {
  return { MARKET_DATA_PROVIDER: 'yahoo', MARKET_DATA_BASE_URL: up.baseUrl, MARKET_INDICES: SYMBOLS.join(','), MARKET_DATA_TIMEOUT_MS: '2000' };
}

/** How many chart requests the fake upstream saw per symbol. */
function requestsPerSymbol(up: FakeUpstream): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of up.requestLog) {
    const match = /^\/v8\/finance\/chart\/([^/?]+)/.exec(r.url);
    const symbol = match?.[1] !== undefined ? decodeURIComponent(match[1]) : r.url;
    counts[symbol] = (counts[symbol] ?? 0) + 1;
  }
  return counts;
}

async function read(svc: TestService, headers: Record<string, string> = {}): Promise<Read> {
  const started = performance.now();
  const res = await svc.fetch('/api/indices', { headers });
  const body = Buffer.from(await res.arrayBuffer());
  const ms = performance.now() - started;
  expectDocumentedStatus(res, 'get', '/api/indices');
  return { res, body, ms };
}

async function health(svc: TestService): Promise<Health> {
  const res = await svc.fetch('/api/health');
  expect(res.status).toBe(200);
  return (await res.json()) as Health;
}

async function adminStatus(svc: TestService): Promise<AdminStatus> {
  const res = await svc.fetch('/api/admin/status', { headers: { 'X-API-Key': API_KEY } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: AdminStatus }).data;
}

function maxAge(res: Response): number {
  const match = /^public, max-age=(\d+)$/.exec(res.headers.get('cache-control') ?? '');
  expect(match, `Cache-Control was ${res.headers.get('cache-control')}`).not.toBeNull();
  return Number(match?.[1]);
}

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis({ host: '127.0.0.1', port: redis.port, maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  client.disconnect();
  await redis.stop();
});

beforeEach(async () => {
  await client.flushall();
});

afterEach(async () => {
  const errors: unknown[] = [];
  for (const svc of [...services]) await stop(svc).catch((err: unknown) => errors.push(err));
  for (const c of clients.splice(0)) c.disconnect();
  for (const r of ownRedis.splice(0)) await r.stop();
  await upstream?.close();
  upstream = undefined;
  if (errors.length > 0) throw errors[0];
});

describe('GET /api/indices caching, over a real socket', () => {
  it('when read twice, then MISS then HIT with byte-identical bodies, one ETag and a max-age within the TTL', async () => {
    const svc = await boot();

    const first = await read(svc);
    const second = await read(svc);

    expect(first.res.status).toBe(200);
    expect(first.res.headers.get('x-cache')).toBe('MISS');
    expect(first.res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(second.res.status).toBe(200);
    expect(second.res.headers.get('x-cache')).toBe('HIT');
    expect(second.body.equals(first.body)).toBe(true);
    const etag = first.res.headers.get('etag');
    expect(etag).toMatch(/^"[^"]+"$/);
    expect(second.res.headers.get('etag')).toBe(etag);
    for (const r of [first, second]) {
      const n = maxAge(r.res);
      expect(n).toBeGreaterThan(0);
      expect(n).toBeLessThanOrEqual(TTL_SECONDS);
    }
    const parsed = JSON.parse(first.body.toString('utf8')) as { success: boolean; source: string; data: unknown[] };
    expect(parsed).toMatchObject({ success: true, source: 'simulated' });
    expect(parsed.data.length).toBeGreaterThan(0);
  });

  it('when If-None-Match names the ETag, then 304 with no body and the cache headers; another ETag gets 200', async () => {
    const svc = await boot();
    const first = await read(svc);
    const etag = first.res.headers.get('etag') ?? '';

    const notModified = await read(svc, { 'If-None-Match': etag });
    expect(notModified.res.status).toBe(304);
    expect(notModified.body.length).toBe(0);
    expect(notModified.res.headers.get('etag')).toBe(etag);
    expect(notModified.res.headers.get('x-cache')).toBe('HIT');
    expect(maxAge(notModified.res)).toBeGreaterThan(0);

    const weak = await read(svc, { 'If-None-Match': `"other", W/${etag}` });
    expect(weak.res.status).toBe(304);

    const other = await read(svc, { 'If-None-Match': '"not-the-etag"' });
    expect(other.res.status).toBe(200);
    expect(other.body.equals(first.body)).toBe(true);
    expect(other.res.headers.get('etag')).toBe(etag);
  });

  it('when admin status is read, then cache.kinds.indices counts the HIT and MISS reads, and the totals include the component quotes', async () => {
    const svc = await boot();
    const before = (await adminStatus(svc)).cache;
    expect(before).toMatchObject({ mode: 'redis', connected: true, hits: 0, misses: 0 });
    expect(before.kinds.indices).toEqual({ hits: 0, misses: 0, stale: 0 });

    const seen = { HIT: 0, MISS: 0 };
    const first = await read(svc);
    const etag = first.res.headers.get('etag') ?? '';
    const reads = [first, await read(svc), await read(svc), await read(svc, { 'If-None-Match': etag })];
    for (const r of reads) seen[r.res.headers.get('x-cache') as 'HIT' | 'MISS'] += 1;
    expect(seen).toEqual({ MISS: 1, HIT: 3 });

    const after = (await adminStatus(svc)).cache;
    expect(after.kinds.indices).toEqual({ hits: seen.HIT, misses: seen.MISS, stale: 0 });
    // The miss assembled the indices from one cold quote per configured index.
    expect(after.kinds.quote).toEqual({ hits: 0, misses: svc.config.market.symbols.length, stale: 0 });
    expect(after.hits).toBe(seen.HIT);
    expect(after.misses).toBe(seen.MISS + svc.config.market.symbols.length);
  });

  it('when DELETE /api/admin/cache is called with an API key, then only market data keys go and the next read is a MISS', async () => {
    const svc = await boot();
    await read(svc);
    expect(await client.exists(KEY)).toBe(1);
    await client.set('other:app:key', 'keep-me');
    await client.set('mds:v1:throttle:login:someone', '3');
    await client.set('mds:v1:lock:job:unrelated', 'token');

    const res = await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { success: boolean; data: { removed: number } };
    expect(body.success).toBe(true);
    expect(body.data.removed).toBeGreaterThanOrEqual(1);

    expect(await client.exists(KEY)).toBe(0);
    expect(await client.get('other:app:key')).toBe('keep-me');
    expect(await client.get('mds:v1:throttle:login:someone')).toBe('3');
    expect(await client.get('mds:v1:lock:job:unrelated')).toBe('token');
    const next = await read(svc);
    expect(next.res.status).toBe(200);
    expect(next.res.headers.get('x-cache')).toBe('MISS');
  });
});

describe('upstream calls behind the cache (yahoo provider, fake upstream)', () => {
  it('when 100 reads arrive at once on a cold key, then the upstream sees one request per symbol', async () => {
    const up = await yahooUpstream();
    const svc = await boot(yahooEnv(up));

    const reads = await Promise.all(Array.from({ length: 100 }, () => read(svc)));

    expect(reads.map((r) => r.res.status)).toEqual(Array(100).fill(200));
    expect(new Set(reads.map((r) => r.res.headers.get('etag'))).size).toBe(1);
    expect(reads.filter((r) => r.res.headers.get('x-cache') === 'MISS').length).toBeGreaterThanOrEqual(1);
    expect(requestsPerSymbol(up)).toEqual(Object.fromEntries(SYMBOLS.map((s) => [s, 1])));
  });

  it('when the service restarts on the same Redis, then its first read is a HIT and the upstream is not called', async () => {
    const up = await yahooUpstream();
    const env = yahooEnv(up);
    const first = await boot(env);
    const filled = await read(first);
    expect(filled.res.headers.get('x-cache')).toBe('MISS');
    await stop(first);
    const calls = up.requests;
    expect(calls).toBe(SYMBOLS.length);

    const second = await boot(env);
    const again = await read(second);

    expect(again.res.status).toBe(200);
    expect(again.res.headers.get('x-cache')).toBe('HIT');
    expect(again.body.equals(filled.body)).toBe(true);
    expect(up.requests).toBe(calls);
  });

  it('when Redis is not there, then the memory fallback does not survive a restart (MISS again)', async () => {
    const up = await yahooUpstream();
    const env = { ...yahooEnv(up), CACHE_URL: `redis://127.0.0.1:${await freePort()}/0` };
    const first = await boot(env);
    expect((await read(first)).res.headers.get('x-cache')).toBe('MISS');
    expect((await read(first)).res.headers.get('x-cache')).toBe('HIT');
    await stop(first);
    expect(up.requests).toBe(SYMBOLS.length);

    const second = await boot(env);
    const again = await read(second);

    expect(again.res.status).toBe(200);
    expect(again.res.headers.get('x-cache')).toBe('MISS');
    expect(up.requests).toBe(2 * SYMBOLS.length);
  });
});

describe('Redis unavailable or misconfigured', () => {
  it('when Redis is unreachable at startup, then the service runs on memory, says so, and still caches', async () => {
    const svc = await boot({ CACHE_URL: `redis://127.0.0.1:${await freePort()}/0` });

    expect(await health(svc)).toEqual({ ok: true, datasource: true, cache: false, auth: true });
    expect((await adminStatus(svc)).cache.mode).toBe('memory');
    const line = svc.logs.find((l) => typeof l.msg === 'string' && /Redis is unreachable/.test(l.msg));
    expect(line?.msg).toMatch(/memory/);
    const first = await read(svc);
    const second = await read(svc);
    expect(first.res.status).toBe(200);
    expect(first.res.headers.get('x-cache')).toBe('MISS');
    expect(second.res.status).toBe(200);
    expect(second.res.headers.get('x-cache')).toBe('HIT');
    expect(second.body.equals(first.body)).toBe(true);
  });

  it('when Redis is killed under a stream of reads, then every read is a fast 200, memory takes over, and Redis is used again once back', async () => {
    const r = await extraRedis();
    const svc = await boot({ CACHE_URL: r.url });
    expect((await health(svc)).cache).toBe(true);
    expect((await read(svc)).res.headers.get('x-cache')).toBe('MISS');

    const samples: Array<{ status: number; ms: number; afterKill: boolean }> = [];
    let killed = false;
    let kill: Promise<void> | undefined;
    const take = async () => {
      const afterKill = killed;
      const { res, ms } = await read(svc);
      samples.push({ status: res.status, ms, afterKill });
    };
    const start = performance.now();
    for (let i = 0; performance.now() - start < 2000; i++) {
      if (kill === undefined && performance.now() - start >= 600) {
        kill = r.kill().then(() => {
          killed = true;
        });
      }
      if (i % 5 === 4) await Promise.all(Array.from({ length: 8 }, take));
      else await take();
    }
    await kill;

    expect(samples.filter((s) => s.status !== 200)).toEqual([]);
    const slowest = Math.max(...samples.map((s) => s.ms));
    expect(slowest, `slowest read took ${slowest.toFixed(1)} ms`).toBeLessThanOrEqual(250);
    expect(samples.filter((s) => s.afterKill).length).toBeGreaterThan(10);
    expect((await adminStatus(svc)).cache).toMatchObject({ mode: 'memory', connected: false });
    expect((await health(svc)).cache).toBe(false);

    await r.restart();
    await waitFor(async () => (await health(svc)).cache && (await adminStatus(svc)).cache.mode === 'redis', {
      timeoutMs: 10_000,
      intervalMs: 100,
      message: 'health cache true and admin status mode redis after Redis restarted',
    });
    const flushed = await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } });
    expect(flushed.status).toBe(200);
    expect((await read(svc)).res.status).toBe(200);
    expect(await redisClient(r.port).exists(KEY)).toBe(1);
  });

  it('when Redis stalls with the connection up, then health cache is false while memory serves, and true again once Redis answers', async () => {
    const r = await extraRedis();
    const svc = await boot({ CACHE_URL: r.url });
    expect((await health(svc)).cache).toBe(true);

    r.pause();
    try {
      // A read of something not cached in process goes to Redis, times out there, and falls back.
      expect((await svc.fetch('/api/quotes/MSFT')).status).toBe(200);
      await waitFor(async () => (await adminStatus(svc)).cache.mode === 'memory', { timeoutMs: 5_000, intervalMs: 50, message: 'the fallback to memory' });
      expect((await adminStatus(svc)).cache).toMatchObject({ mode: 'memory', connected: true });
      expect((await health(svc)).cache).toBe(false);
    } finally {
      r.resume();
    }
    await waitFor(async () => (await health(svc)).cache && (await adminStatus(svc)).cache.mode === 'redis', {
      timeoutMs: 10_000,
      intervalMs: 100,
      message: 'health cache true again once Redis answers',
    });
  });

  it('when CACHE_PASSWORD is right, then the service caches in Redis through CACHE_HOST/CACHE_PORT', async () => {
    const password = 'cache-password-0123';
    const r = await extraRedis({ password });
    const svc = await boot({ CACHE_URL: '', CACHE_HOST: '127.0.0.1', CACHE_PORT: String(r.port), CACHE_PASSWORD: password });

    expect((await health(svc)).cache).toBe(true);
    expect((await read(svc)).res.status).toBe(200);
    expect(await redisClient(r.port, { password }).exists(KEY)).toBe(1);
  });

  it('when CACHE_PASSWORD is wrong, then the service starts on memory, logs the fallback and still answers', async () => {
    const r = await extraRedis({ password: 'the-real-password' });
    const svc = await boot({ CACHE_URL: '', CACHE_HOST: '127.0.0.1', CACHE_PORT: String(r.port), CACHE_PASSWORD: 'a-wrong-password' });

    expect((await health(svc)).cache).toBe(false);
    expect((await adminStatus(svc)).cache.mode).toBe('memory');
    const line = svc.logs.find((l) => typeof l.msg === 'string' && /Redis is unreachable/.test(l.msg));
    expect(line?.msg).toMatch(/memory/);
    expect(String(line?.reason)).toMatch(/WRONGPASS|invalid username-password|NOAUTH/i);
    const first = await read(svc);
    expect(first.res.status).toBe(200);
    expect((await read(svc)).res.headers.get('x-cache')).toBe('HIT');
  });

  it('when CACHE_DB=5, then the cached indices land in database 5 and not in 0', async () => {
    const svc = await boot({ CACHE_URL: '', CACHE_HOST: '127.0.0.1', CACHE_PORT: String(redis.port), CACHE_DB: '5' });

    expect((await health(svc)).cache).toBe(true);
    expect((await read(svc)).res.status).toBe(200);
    expect(await redisClient(redis.port, { db: 5 }).exists(KEY)).toBe(1);
    expect(await client.exists(KEY)).toBe(0);
  });
});
