/**
 * MarketDataService over a real cache (ResilientCache on a redis-server this file starts) and a
 * small in-test MarketDataProvider whose calls are counted and whose answers the test releases.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DataSourceError } from '../../src/errors.js';
import { loadConfig } from '../../src/config.js';
import { createCache } from '../../src/infra/cache/index.js';
import type { ResilientCache } from '../../src/infra/cache/resilient-cache.js';
import { createLogger } from '../../src/logger.js';
import type { MarketDataProvider, Quote } from '../../src/ports.js';
import { MarketDataService, type MarketDataServiceOptions } from '../../src/services/market-data.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

const logger = createLogger({ level: 'silent' });
const KEY = 'mds:v1:indices:simulated';
const LOCK_KEY = 'mds:v1:lock:indices:simulated';

function quote(symbol: string, price: number): Quote {
  return {
    symbol,
    name: `Index ${symbol}`,
    price,
    change: 1.5,
    change_percent: 0.03,
    open: price - 1,
    high: price + 2,
    low: price - 3,
    prev_close: price - 1.5,
    volume: 1000,
    currency: 'USD',
    timestamp: '2026-01-02T03:04:05.000Z',
  };
}

/** A provider of our port: counts calls; while `hold()` is active, calls wait until `release()`. */
class ControlledProvider implements MarketDataProvider {
  readonly name = 'simulated';
  calls = 0;
  quotes: Quote[] = [quote('^GSPC', 5000)];
  failure: Error | undefined;
  #gate: Promise<void> | undefined;
  #open: (() => void) | undefined;

  hold(): void {
    this.#gate = new Promise((resolve) => (this.#open = resolve));
  }

  release(): void {
    this.#open?.();
    this.#gate = undefined;
  }

  async getIndices(): Promise<Quote[]> {
    this.calls++;
    if (this.#gate) await this.#gate;
    if (this.failure) throw this.failure;
    return this.quotes;
  }
}

let redis: RedisProcess;
const caches: ResilientCache[] = [];

async function newCache(): Promise<ResilientCache> {
  const config = loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(redis.port) }, { readFile: false });
  const cache = createCache(config.cache, logger);
  await cache.start();
  caches.push(cache);
  return cache;
}

function service(cache: ResilientCache, provider: MarketDataProvider, extra: Partial<MarketDataServiceOptions> = {}) {
  return new MarketDataService({ cache, provider, ttlMs: 60_000, staleIfErrorMs: 0, logger, ...extra });
}

let cache: ResilientCache;
let provider: ControlledProvider;

beforeAll(async () => {
  redis = await startRedis();
  cache = await newCache();
});
afterAll(async () => {
  for (const c of caches) await c.close();
  await redis.stop();
});
beforeEach(async () => {
  await cache.deleteByPrefix('mds:v1:');
  provider = new ControlledProvider();
});

describe('MarketDataService.getIndices', () => {
  it('when 100 requests miss a cold key at once, the provider is called exactly once and all get the same body', async () => {
    const market = service(cache, provider);
    expect(cache.status().mode).toBe('redis');
    provider.hold();

    const pending = Array.from({ length: 100 }, () => market.getIndices());
    await waitFor(() => provider.calls > 0, { message: 'the upstream call' });
    provider.release();
    const results = await Promise.all(pending);

    expect(provider.calls).toBe(1);
    const first = results[0]!;
    for (const r of results) {
      expect(r.body.equals(first.body)).toBe(true);
      expect(r.etag).toBe(first.etag);
    }
  });

  it('when the cache is cold, answers MISS with the serialized IndicesResponse and caches exactly those bytes', async () => {
    const now = Date.parse('2026-03-04T05:06:07.000Z');
    const market = service(cache, provider, { now: () => now });

    const miss = await market.getIndices();

    expect(miss.cacheStatus).toBe('MISS');
    expect(miss.maxAgeSeconds).toBe(60);
    expect(JSON.parse(miss.body.toString('utf8'))).toEqual({
      success: true,
      data: provider.quotes,
      source: 'simulated',
      updated_at: '2026-03-04T05:06:07.000Z',
    });
    expect((await cache.get(KEY))?.value).toBe(miss.body.toString('utf8'));
  });

  it('a hit is byte-identical to the miss that filled the cache, with the same strong ETag and no upstream call', async () => {
    const market = service(cache, provider);
    const miss = await market.getIndices();

    const hit = await market.getIndices();

    expect(hit.cacheStatus).toBe('HIT');
    expect(hit.body.equals(miss.body)).toBe(true);
    expect(hit.etag).toBe(miss.etag);
    expect(hit.etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    expect(hit.maxAgeSeconds).toBeGreaterThanOrEqual(58);
    expect(hit.maxAgeSeconds).toBeLessThanOrEqual(60);
    expect(provider.calls).toBe(1);
  });

  it('repeated hits reuse the body bytes and ETag computed at fill time instead of hashing again', async () => {
    let now = 1_000_000;
    const market = service(cache, provider, { now: () => now });
    const miss = await market.getIndices();

    const hit1 = await market.getIndices();
    now += 500;
    const hit2 = await market.getIndices();

    expect(hit1.body).toBe(miss.body);
    expect(hit2.body).toBe(miss.body);

    now += 1_000;
    const later = await market.getIndices();
    expect(later.body.equals(miss.body)).toBe(true);
    expect(later.etag).toBe(miss.etag);
  });

  it('when the data changes, the ETag changes; while it does not, the ETag stays', async () => {
    const market = service(cache, provider);
    const before = (await market.getIndices()).etag;
    expect((await market.getIndices()).etag).toBe(before);

    provider.quotes = [quote('^GSPC', 5001)];
    await market.refresh();
    const after = await market.getIndices();

    expect(after.cacheStatus).toBe('HIT');
    expect(after.etag).not.toBe(before);
    expect(JSON.parse(after.body.toString('utf8')).data[0].price).toBe(5001);
  });

  it('after a restart (a new service and cache over the same Redis), the first read is a HIT with no upstream call', async () => {
    const first = await service(cache, provider).getIndices();

    const restartedProvider = new ControlledProvider();
    const restarted = service(await newCache(), restartedProvider);
    const read = await restarted.getIndices();

    expect(read.cacheStatus).toBe('HIT');
    expect(read.body.equals(first.body)).toBe(true);
    expect(read.etag).toBe(first.etag);
    expect(restartedProvider.calls).toBe(0);
  });

  it('when another instance holds the fill lock and fills the cache, a miss waits for it and makes no upstream call', async () => {
    const other = await newCache();
    const token = await other.acquireLock(LOCK_KEY, 10_000);
    expect(token).toBeDefined();
    const market = service(cache, provider);
    const missesBefore = cache.status().misses;

    const pending = market.getIndices();
    // The first miss, then at least one miss while polling: the service is waiting on the lock holder.
    await waitFor(() => cache.status().misses >= missesBefore + 2, { message: 'the service to poll the cache' });
    const body = JSON.stringify({ success: true, data: [quote('^DJI', 40000)], source: 'simulated', updated_at: '2026-01-01T00:00:00.000Z' });
    await other.set(KEY, body, 60_000);
    await other.releaseLock(LOCK_KEY, token!);
    const result = await pending;

    expect(result.cacheStatus).toBe('HIT');
    expect(result.body.toString('utf8')).toBe(body);
    expect(provider.calls).toBe(0);
  });

  it('when the lock holder never fills the cache, a miss fetches by itself after the wait instead of failing', async () => {
    const other = await newCache();
    await other.acquireLock(LOCK_KEY, 10_000);
    const market = service(cache, provider, { lockWaitMs: 100 });

    const result = await market.getIndices();

    expect(result.cacheStatus).toBe('MISS');
    expect(provider.calls).toBe(1);
  });

  it('when the upstream fails and nothing is cached, rejects with DataSourceError', async () => {
    provider.failure = new DataSourceError('upstream down');
    const market = service(cache, provider);

    await expect(market.getIndices()).rejects.toBeInstanceOf(DataSourceError);
  });

  it('with stale-if-error, when the entry has expired and the upstream fails, serves the last body as STALE', async () => {
    // The key is deleted behind the service's back: no in-process copy may answer instead.
    const market = service(cache, provider, { staleIfErrorMs: 600_000, localMaxAgeMs: 0 });
    const fresh = await market.getIndices();
    expect((await cache.get('mds:v1:stale:indices:simulated'))?.ttlMs).toBeGreaterThan(60_000);
    await cache.delete(KEY);
    provider.failure = new DataSourceError('upstream down');

    const stale = await market.getIndices();

    expect(stale.cacheStatus).toBe('STALE');
    expect(stale.maxAgeSeconds).toBe(0);
    expect(stale.body.equals(fresh.body)).toBe(true);
  });
});

describe('MarketDataService in-process copy', () => {
  it('answers hits from the process for up to localMaxAgeMs, then asks the store again', async () => {
    let now = 1_000_000;
    const market = service(cache, provider, { localMaxAgeMs: 1000, now: () => now });
    const miss = await market.getIndices();
    expect(miss.cacheStatus).toBe('MISS');
    await cache.delete(KEY);

    now += 999;
    const local = await market.getIndices();
    expect(local.cacheStatus).toBe('HIT');
    expect(local.body.equals(miss.body)).toBe(true);
    expect(provider.calls).toBe(1);

    now += 2;
    const after = await market.getIndices();
    expect(after.cacheStatus).toBe('MISS');
    expect(provider.calls).toBe(2);
  });

  it('when another instance flushes, this instance drops its copy at once (broadcast through Redis)', async () => {
    const other = await newCache();
    const here = service(cache, provider, { localMaxAgeMs: 60_000, broadcast: cache });
    const there = service(other, provider, { localMaxAgeMs: 60_000, broadcast: other });
    expect((await here.getIndices()).cacheStatus).toBe('MISS');
    expect((await here.getIndices()).cacheStatus).toBe('HIT');

    // The subscription connects in the background; flushing until it is seen avoids racing it.
    await waitFor(
      async () => {
        await there.flush();
        return (await here.getIndices()).cacheStatus === 'MISS';
      },
      { timeoutMs: 3000, intervalMs: 50, message: 'the flush reaches the other instance' },
    );
    expect(provider.calls).toBeGreaterThanOrEqual(2);
  });
});

describe('MarketDataService.refresh', () => {
  it('when another instance holds the lock, answers skipped without calling upstream', async () => {
    const other = await newCache();
    const token = await other.acquireLock(LOCK_KEY, 10_000);
    const market = service(cache, provider);

    await expect(market.refresh()).resolves.toBe('skipped');
    expect(provider.calls).toBe(0);

    await other.releaseLock(LOCK_KEY, token!);
    await expect(market.refresh()).resolves.toBe('ok');
    expect(provider.calls).toBe(1);
  });

  it('overwrites the cached entry with fresh data and a full TTL', async () => {
    const market = service(cache, provider, { ttlMs: 30_000 });
    await cache.set(KEY, 'old', 1_000);

    await expect(market.refresh()).resolves.toBe('ok');

    const entry = await cache.get(KEY);
    expect(entry?.value).toContain('"success":true');
    expect(entry?.ttlMs).toBeGreaterThan(25_000);
  });
});

describe('MarketDataService.flush', () => {
  it('removes only keys under mds:v1: and the next read is a MISS', async () => {
    const market = service(cache, provider);
    await market.getIndices();
    await cache.set('other-app:key', 'theirs', 60_000);

    await expect(market.flush()).resolves.toBe(1);

    expect((await cache.get('other-app:key'))?.value).toBe('theirs');
    expect((await market.getIndices()).cacheStatus).toBe('MISS');
    expect(provider.calls).toBe(2);
    await cache.delete('other-app:key');
  });
});

describe('MarketDataService.stats', () => {
  it('reports the cache mode and counters', async () => {
    const market = service(cache, provider);
    await market.getIndices();
    await market.getIndices();

    expect(market.stats()).toMatchObject({ mode: 'redis', connected: true, hits: expect.any(Number), misses: expect.any(Number) });
    expect(market.stats().hits).toBeGreaterThan(0);
  });
});
