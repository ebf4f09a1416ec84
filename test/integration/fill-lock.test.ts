/**
 * A miss never waits long on another instance's fill: a lock left behind by a dead instance, and a
 * Redis that dies or freezes while a miss waits, over a real redis-server this file starts.
 */
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createCache, type ResilientCache } from '../../src/infra/cache/index.js';
import { createLogger } from '../../src/infra/logger.js';
import type { CacheRead } from '../../src/services/cache/cache-types.js';
import { RepresentationCache, type RepresentationCacheOptions } from '../../src/services/cache/representation-cache.js';
import { connectFailFast, startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

const logger = createLogger({ level: 'silent' });
/** The value and lock keys of symbol `LOCKED<n>` (each test its own: memory mode keeps what the cache wrote before). */
const keyOf = (n: number) => `mds:v2:quote:simulated:LOCKED${n}`;
const lockKeyOf = (n: number) => `mds:v2:lock:quote:simulated:LOCKED${n}`;
const BODY = '{"success":true,"price":1}';

let redis: RedisProcess;
let raw: Redis;
let cache: ResilientCache;
let calls = 0;

const read = (n: number): CacheRead => ({
  kind: 'quote',
  params: `LOCKED${n}`,
  load: async () => {
    calls += 1;
    return { outcome: 'found', value: BODY, ttlMs: 60_000 };
  },
});

function engine(extra: Partial<RepresentationCacheOptions> = {}): RepresentationCache {
  return new RepresentationCache({ cache, namespace: 'simulated', staleIfErrorMs: 0, logger, broadcast: cache, ...extra });
}

/** What a dead instance leaves: the fill lock taken, its value never stored, its release never sent. */
async function lockLeftBehind(n: number): Promise<void> {
  expect(await raw.set(lockKeyOf(n), 'token-of-a-dead-instance', 'PX', 10_000, 'NX')).toBe('OK');
}

/** Cache reads so far: one per poll of a waiting miss. */
const reads = () => cache.status().hits + cache.status().misses;

beforeAll(async () => {
  redis = await startRedis();
  const config = loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(redis.port) }, { readFile: false });
  cache = createCache(config.cache, logger);
  await cache.start();
  raw = await connectFailFast(redis.port);
});
afterAll(async () => {
  raw.disconnect();
  await cache.close();
  await redis.stop();
});
beforeEach(async () => {
  calls = 0;
  await waitFor(() => cache.live(), { timeoutMs: 10_000, message: 'the cache in Redis mode' });
  await raw.flushdb().catch(async () => {
    raw.disconnect();
    raw = await connectFailFast(redis.port);
    await raw.flushdb();
  });
});

describe('the fill lock', () => {
  it('when a dead instance left the fill lock of a key behind, then a read of that key answers from the upstream within a second', async () => {
    await lockLeftBehind(1);

    const started = Date.now();
    const rep = await engine().read(read(1));
    const elapsedMs = Date.now() - started;

    expect(rep.cacheStatus).toBe('MISS');
    expect(rep.outcome === 'found' && rep.body.toString('utf8')).toBe(BODY);
    expect(calls).toBe(1);
    expect(elapsedMs).toBeLessThan(1_000);
    expect((await raw.get(keyOf(1)))?.endsWith(`\n${BODY}`)).toBe(true);
    // The dead instance's lock is left to its own TTL, never taken over.
    expect(await raw.get(lockKeyOf(1))).toBe('token-of-a-dead-instance');
  });

  it('when Redis dies while a miss waits on another instance\'s fill, then the wait ends at once and the read fills from the upstream', async () => {
    await lockLeftBehind(2);
    const before = reads();
    const pending = engine({ lockWaitMs: 10_000 }).read(read(2));
    await waitFor(() => reads() >= before + 2, { message: 'the miss to poll the holder' });

    const stoppedAt = Date.now();
    await redis.stop();
    const rep = await pending;
    const elapsedMs = Date.now() - stoppedAt;
    await redis.restart();

    expect(rep.cacheStatus).toBe('MISS');
    expect(calls).toBe(1);
    expect(elapsedMs).toBeLessThan(1_000);
  });

  it('when Redis freezes while a miss waits on another instance\'s fill, then the read answers within the command timeout and a second', async () => {
    await lockLeftBehind(3);
    const before = reads();
    const pending = engine({ lockWaitMs: 10_000 }).read(read(3));
    await waitFor(() => reads() >= before + 2, { message: 'the miss to poll the holder' });

    const frozenAt = Date.now();
    redis.pause();
    let elapsedMs: number;
    let status: string;
    try {
      const rep = await pending;
      elapsedMs = Date.now() - frozenAt;
      status = rep.cacheStatus;
    } finally {
      redis.resume();
    }

    expect(status).toBe('MISS');
    expect(calls).toBe(1);
    expect(elapsedMs).toBeLessThan(1_000);
  });
});
