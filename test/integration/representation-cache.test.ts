/**
 * The representation cache over a real cache (ResilientCache on a redis-server this file starts) and
 * an in-test loader whose calls are counted and whose answers the test releases.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DataSourceError } from '../../src/domain/errors.js';
import { loadConfig } from '../../src/config.js';
import { createCache } from '../../src/infra/cache/index.js';
import type { ResilientCache } from '../../src/infra/cache/resilient-cache.js';
import { createLogger } from '../../src/infra/logger.js';
import type { CachedRepresentation, CacheRead } from '../../src/services/cache/cache-types.js';
import { RepresentationCache, type RepresentationCacheOptions } from '../../src/services/cache/representation-cache.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';
import { decodeEntry, encodeEntry } from '../../src/services/cache/cache-entry.js';

const logger = createLogger({ level: 'silent' });
const KEY = 'mds:v2:quote:simulated:AAPL';
const LOCK_KEY = 'mds:v2:lock:quote:simulated:AAPL';

/** A loader of one key: counts calls; while `hold()` is active, calls wait until `release()`. */
class ControlledLoader {
  calls = 0;
  value = JSON.stringify({ success: true, price: 5000 });
  ttlMs = 60_000;
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

  read(): CacheRead {
    return {
      kind: 'quote',
      params: 'AAPL',
      load: async () => {
        this.calls++;
        if (this.#gate) await this.#gate;
        if (this.failure) throw this.failure;
        return { outcome: 'found' as const, value: this.value, ttlMs: this.ttlMs };
      },
    };
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

/** The engine with reads narrowed to representations: this suite's loader always finds one. */
class FoundEngine extends RepresentationCache {
  override async read(read: CacheRead): Promise<CachedRepresentation> {
    const outcome = await super.read(read);
    if (outcome.outcome !== 'found') throw new Error(`expected a representation, got ${outcome.outcome}`);
    return outcome;
  }
}

function engine(cache: ResilientCache, extra: Partial<RepresentationCacheOptions> = {}) {
  return new FoundEngine({ cache, namespace: 'simulated', staleIfErrorMs: 0, logger, ...extra });
}

let cache: ResilientCache;
let provider: ControlledLoader;

/** Every key in the test's Redis (this file's Redis: nothing else writes there). */
async function rawKeys(): Promise<string[]> {
  return (await cache.redisClient()!.keys('*')).sort();
}

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
  await cache.deleteByPrefix('mds:v2:');
  provider = new ControlledLoader();
});

describe('RepresentationCache.read', () => {
  it('when 100 requests miss a cold key at once, the provider is called exactly once and all get the same body', async () => {
    const market = engine(cache);
    expect(cache.status().mode).toBe('redis');
    provider.hold();

    const pending = Array.from({ length: 100 }, () => market.read(provider.read()));
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

  it('when the cache is cold, answers MISS with the loaded value and caches exactly those bytes, behind a typed header, under mds:v2:<kind>:<provider>:<params>', async () => {
    const market = engine(cache);

    const miss = await market.read(provider.read());

    expect(miss.cacheStatus).toBe('MISS');
    expect(miss.key).toBe(KEY);
    expect(miss.maxAgeSeconds).toBe(60);
    expect(miss.body.toString('utf8')).toBe(provider.value);
    const stored = await cache.get(KEY);
    expect(decodeEntry(stored!.value, stored!.ttlMs, Date.now())?.value).toEqual({ outcome: 'found', body: miss.body.toString('utf8') });
  });

  it('a hit is byte-identical to the miss that filled the cache, with the same strong ETag and no upstream call', async () => {
    const market = engine(cache);
    const miss = await market.read(provider.read());

    const hit = await market.read(provider.read());

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
    const market = engine(cache, { now: () => now });
    const miss = await market.read(provider.read());

    const hit1 = await market.read(provider.read());
    now += 500;
    const hit2 = await market.read(provider.read());

    expect(hit1.body).toBe(miss.body);
    expect(hit2.body).toBe(miss.body);

    now += 1_000;
    const later = await market.read(provider.read());
    expect(later.body.equals(miss.body)).toBe(true);
    expect(later.etag).toBe(miss.etag);
  });

  it('when the data changes, the ETag changes; while it does not, the ETag stays', async () => {
    const market = engine(cache);
    const before = (await market.read(provider.read())).etag;
    expect((await market.read(provider.read())).etag).toBe(before);

    provider.value = JSON.stringify({ success: true, price: 5001 });
    await market.refresh(provider.read());
    const after = await market.read(provider.read());

    expect(after.cacheStatus).toBe('HIT');
    expect(after.etag).not.toBe(before);
    expect(JSON.parse(after.body.toString('utf8')).price).toBe(5001);
  });

  it('after a restart (a new service and cache over the same Redis), the first read is a HIT with no upstream call', async () => {
    const first = await engine(cache).read(provider.read());

    const restartedProvider = new ControlledLoader();
    const restarted = engine(await newCache());
    const read = await restarted.read(restartedProvider.read());

    expect(read.cacheStatus).toBe('HIT');
    expect(read.body.equals(first.body)).toBe(true);
    expect(read.etag).toBe(first.etag);
    expect(restartedProvider.calls).toBe(0);
  });

  it('when another instance holds the fill lock and fills the cache, a miss waits for it and makes no upstream call', async () => {
    const other = await newCache();
    const token = await other.acquireLock(LOCK_KEY, 10_000);
    expect(token).toBeDefined();
    const market = engine(cache);
    const readsBefore = cache.status().hits + cache.status().misses;

    const pending = market.read(provider.read());
    // The first miss, then at least one miss while polling: the service is waiting on the lock holder.
    await waitFor(() => cache.status().hits + cache.status().misses >= readsBefore + 2, { message: 'the engine to poll the cache' });
    const body = JSON.stringify({ success: true, price: 40000 });
    await other.set(KEY, encodeEntry({ outcome: 'found', body }, 0), 60_000);
    await other.releaseLock(LOCK_KEY, token!);
    const result = await pending;

    expect(result.cacheStatus).toBe('HIT');
    expect(result.body.toString('utf8')).toBe(body);
    expect(provider.calls).toBe(0);
  });

  it('when the lock holder never fills the cache, a miss fetches by itself after the wait instead of failing', async () => {
    const other = await newCache();
    await other.acquireLock(LOCK_KEY, 10_000);
    const market = engine(cache, { lockWaitMs: 100 });

    const result = await market.read(provider.read());

    expect(result.cacheStatus).toBe('MISS');
    expect(provider.calls).toBe(1);
  });

  it('when the upstream fails and nothing is cached, rejects with DataSourceError', async () => {
    provider.failure = new DataSourceError('upstream down');
    const market = engine(cache);

    await expect(market.read(provider.read())).rejects.toBeInstanceOf(DataSourceError);
  });

  it('with stale-if-error, when a fill is stored, then it is one key whose store TTL ends with the grace, and no second key', async () => {
    const market = engine(cache, { staleIfErrorMs: 600_000 });

    await market.read(provider.read());

    expect(await rawKeys()).toEqual([KEY]);
    const stored = await cache.get(KEY);
    expect(stored!.ttlMs).toBeGreaterThan(600_000);
    expect(stored!.ttlMs).toBeLessThanOrEqual(660_000);
    const entry = decodeEntry(stored!.value, stored!.ttlMs, Date.now())!;
    expect(entry.staleUntilMs - entry.freshUntilMs).toBe(600_000);
  });

  it('with stale-if-error, when the entry is past its fresh end and the upstream fails, serves the same entry as STALE', async () => {
    // An entry with 300 s left in the store of a 600 s grace: its fresh end has passed. No in-process copy may answer instead.
    const market = engine(cache, { staleIfErrorMs: 600_000, localMaxAgeMs: 0 });
    const fresh = await market.read(provider.read());
    await cache.set(KEY, encodeEntry({ outcome: 'found', body: fresh.body.toString('utf8') }, 600_000), 300_000);
    provider.failure = new DataSourceError('upstream down');

    const stale = await market.read(provider.read());

    expect(stale.cacheStatus).toBe('STALE');
    expect(stale.maxAgeSeconds).toBe(0);
    expect(stale.body.equals(fresh.body)).toBe(true);
    expect(provider.calls).toBe(2);
  });

  it('with stale-if-error, when the entry is past its fresh end and the upstream answers, then it is a MISS that stores the new body', async () => {
    const market = engine(cache, { staleIfErrorMs: 600_000, localMaxAgeMs: 0 });
    const first = await market.read(provider.read());
    await cache.set(KEY, encodeEntry({ outcome: 'found', body: first.body.toString('utf8') }, 600_000), 300_000);
    provider.value = JSON.stringify({ success: true, price: 6000 });

    const again = await market.read(provider.read());

    expect(again.cacheStatus).toBe('MISS');
    expect(again.body.toString('utf8')).toBe(provider.value);
    expect(provider.calls).toBe(2);
  });
});

describe('RepresentationCache in-process copy', () => {
  it('answers hits from the process for up to localMaxAgeMs, then asks the store again', async () => {
    let now = 1_000_000;
    const market = engine(cache, { localMaxAgeMs: 1000, now: () => now });
    const miss = await market.read(provider.read());
    expect(miss.cacheStatus).toBe('MISS');
    await cache.delete(KEY);

    now += 999;
    const local = await market.read(provider.read());
    expect(local.cacheStatus).toBe('HIT');
    expect(local.body.equals(miss.body)).toBe(true);
    expect(provider.calls).toBe(1);

    now += 2;
    const after = await market.read(provider.read());
    expect(after.cacheStatus).toBe('MISS');
    expect(provider.calls).toBe(2);
  });

  it('when another instance flushes, this instance drops its copy at once (broadcast through Redis)', async () => {
    const other = await newCache();
    const here = engine(cache, { localMaxAgeMs: 60_000, broadcast: cache });
    const there = engine(other, { localMaxAgeMs: 60_000, broadcast: other });
    expect((await here.read(provider.read())).cacheStatus).toBe('MISS');
    expect((await here.read(provider.read())).cacheStatus).toBe('HIT');

    // The subscription connects in the background; flushing until it is seen avoids racing it.
    await waitFor(
      async () => {
        await there.flush();
        return (await here.read(provider.read())).cacheStatus === 'MISS';
      },
      { timeoutMs: 3000, intervalMs: 50, message: 'the flush reaches the other instance' },
    );
    expect(provider.calls).toBeGreaterThanOrEqual(2);
  });
});

describe('RepresentationCache.refresh', () => {
  it('when another instance holds the lock, answers skipped without calling upstream', async () => {
    const other = await newCache();
    const token = await other.acquireLock(LOCK_KEY, 10_000);
    const market = engine(cache);

    await expect(market.refresh(provider.read())).resolves.toBe('skipped');
    expect(provider.calls).toBe(0);

    await other.releaseLock(LOCK_KEY, token!);
    await expect(market.refresh(provider.read())).resolves.toBe('ok');
    expect(provider.calls).toBe(1);
  });

  it('overwrites the cached entry with fresh data and a full TTL', async () => {
    const market = engine(cache);
    provider.ttlMs = 30_000;
    await cache.set(KEY, 'old', 1_000);

    await expect(market.refresh(provider.read())).resolves.toBe('ok');

    const entry = await cache.get(KEY);
    expect(entry?.value).toContain('"success":true');
    expect(entry?.ttlMs).toBeGreaterThan(25_000);
  });
});

describe('RepresentationCache.flush', () => {
  it('removes only keys under mds:v1: and the next read is a MISS', async () => {
    const market = engine(cache);
    await market.read(provider.read());
    await cache.set('other-app:key', 'theirs', 60_000);

    await expect(market.flush()).resolves.toBe(1);

    expect((await cache.get('other-app:key'))?.value).toBe('theirs');
    expect((await market.read(provider.read())).cacheStatus).toBe('MISS');
    expect(provider.calls).toBe(2);
    await cache.delete('other-app:key');
  });
});

describe('RepresentationCache background confirmation of the copy the fast path answers from', () => {
  it('when the copy is served past half its age, then one store read renews it, so it does not lapse under traffic', async () => {
    let now = 1_000_000;
    const market = engine(cache, { localMaxAgeMs: 1000, now: () => now });
    await market.read(provider.read());

    now += 600;
    expect(market.serveFresh(KEY)?.cacheStatus).toBe('HIT');
    // 1.5 s after the fill: only a copy the store confirmed since is still fresh.
    now += 900;
    await waitFor(() => market.fresh(KEY) !== undefined, { message: 'the renewed copy to outlive its first second' });
    expect(provider.calls).toBe(1);
  });

  it('when the store lost the entry, then the confirmation drops the copy instead of renewing it', async () => {
    let now = 1_000_000;
    const market = engine(cache, { localMaxAgeMs: 1000, now: () => now });
    await market.read(provider.read());
    await cache.delete(KEY);

    now += 600;
    expect(market.serveFresh(KEY)).toBeDefined();
    await waitFor(() => market.fresh(KEY) === undefined, { message: 'the copy to be dropped' });
  });
});

describe('RepresentationCache across instances', () => {
  it('when two instances sharing one Redis miss the same cold key at once, the loader runs once between them', async () => {
    const a = engine(cache);
    const b = engine(await newCache());
    provider.hold();

    const pending = [...Array.from({ length: 20 }, () => a.read(provider.read())), ...Array.from({ length: 20 }, () => b.read(provider.read()))];
    await waitFor(() => provider.calls > 0, { message: 'the upstream call' });
    provider.release();
    const results = await Promise.all(pending);

    expect(provider.calls).toBe(1);
    expect(new Set(results.map((r) => r.etag)).size).toBe(1);
  });
});

describe('RepresentationCache.flush of every kind', () => {
  it('removes fresh and stale entries of every kind, and leaves locks, counters and other apps alone', async () => {
    const market = engine(cache, { staleIfErrorMs: 60_000 });
    const kinds = ['indices', 'quote', 'quotes', 'history', 'search'] as const;
    for (const kind of kinds) await market.read({ kind, params: 'X', load: async () => ({ outcome: 'found' as const, value: `{"${kind}":1}`, ttlMs: 60_000 }) });
    await cache.set('mds:v1:throttle:login:bob', '3', 60_000);
    const lock = await cache.acquireLock('mds:v1:lock:job:refresh', 60_000);

    await cache.set('mds:v1:stale:quote:simulated:OLD', 'the format before', 60_000);

    await expect(market.flush()).resolves.toBe(kinds.length + 1);

    for (const kind of kinds) expect(await cache.get(`mds:v2:${kind}:simulated:X`)).toBeUndefined();
    expect(await cache.get('mds:v1:stale:quote:simulated:OLD')).toBeUndefined();
    expect((await cache.get('mds:v1:throttle:login:bob'))?.value).toBe('3');
    await expect(cache.acquireLock('mds:v1:lock:job:refresh', 1000)).resolves.toBeUndefined();
    await cache.releaseLock('mds:v1:lock:job:refresh', lock!);
  });
});

describe('RepresentationCache.stats', () => {
  it('counts hits, misses and stale answers per kind, and the fast path copies as hits', async () => {
    const market = engine(cache);
    await market.read(provider.read());
    await market.read(provider.read());
    await market.read({ kind: 'search', params: 'apple', load: async () => ({ outcome: 'found' as const, value: '[]', ttlMs: 60_000 }) });
    expect(market.serveFresh(KEY)?.cacheStatus).toBe('HIT');

    const stats = market.stats();
    expect(stats.kinds.quote).toEqual({ hits: 2, misses: 1, stale: 0 });
    expect(stats.kinds.search).toEqual({ hits: 0, misses: 1, stale: 0 });
    expect(stats.hits).toBe(2);
    expect(stats.misses).toBe(2);
  });

  it('reports the cache mode and counters', async () => {
    const market = engine(cache);
    await market.read(provider.read());
    await market.read(provider.read());

    expect(market.stats()).toMatchObject({ mode: 'redis', connected: true, hits: expect.any(Number), misses: expect.any(Number) });
    expect(market.stats().hits).toBeGreaterThan(0);
  });
});
