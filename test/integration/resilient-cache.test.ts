/**
 * ResilientCache against real redis-server processes that this file starts, kills, freezes and
 * restarts. The service must keep answering from memory while Redis is gone and go back by itself.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createCache, type CreateCacheOptions } from '../../src/infra/cache/index.js';
import type { ResilientCache } from '../../src/infra/cache/resilient-cache.js';
import { captureLogs, LEVEL, type LogLine } from '../helpers/log-capture.js';
import { freePort, startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';
import { channels } from '../../src/domain/key-space.js';

const COMMAND_TIMEOUT_MS = 200;
const FAST: CreateCacheOptions = { commandTimeoutMs: COMMAND_TIMEOUT_MS, connectTimeoutMs: 500, startTimeoutMs: 1000 };

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function ownRedis(opts: { password?: string } = {}): Promise<RedisProcess> {
  const redis = await startRedis(opts);
  cleanups.push(() => redis.stop());
  return redis;
}

function cacheFor(port: number, env: Record<string, string> = {}, options: CreateCacheOptions = FAST) {
  const { logger, lines } = captureLogs();
  const config = loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(port), ...env }, { readFile: false });
  const cache = createCache(config.cache, logger, options);
  cleanups.push(() => cache.close());
  return { cache, lines };
}

function rawClient(port: number, options: { db?: number; password?: string } = {}): Redis {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1, ...options });
  client.on('error', () => undefined);
  cleanups.push(async () => client.disconnect());
  return client;
}

const warnings = (lines: LogLine[]) => lines.filter((l) => l.level === LEVEL.warn);
const infos = (lines: LogLine[]) => lines.filter((l) => l.level === LEVEL.info);

/** Keeps `workers` loops of set+get going until stopped; records every failure and each call's duration. */
function trafficOn(cache: ResilientCache, workers = 4) {
  const durationsMs: number[] = [];
  const failures: unknown[] = [];
  let running = true;
  let calls = 0;
  const loops = Array.from({ length: workers }, async (_, w) => {
    for (let i = 0; running; i++) {
      const key = `test:traffic:${w}:${i % 50}`;
      for (const call of [() => cache.set(key, `v${i}`, 60_000), () => cache.get(key)]) {
        const started = performance.now();
        try {
          await call();
        } catch (err) {
          failures.push(err);
        }
        durationsMs.push(performance.now() - started);
        calls++;
      }
      // Memory-mode calls settle as microtasks; yield so timers (and the test's polling) still run.
      await new Promise((resolve) => setImmediate(resolve));
    }
  });
  return {
    durationsMs,
    failures,
    get calls() {
      return calls;
    },
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

describe('ResilientCache', () => {
  it('when Redis is unreachable at startup, serves from memory and logs exactly one warning', async () => {
    const port = await freePort();
    const { cache, lines } = cacheFor(port);

    await cache.start();

    expect(cache.status()).toMatchObject({ mode: 'memory', connected: false });
    await cache.set('test:k', 'v', 60_000);
    expect((await cache.get('test:k'))?.value).toBe('v');
    // Let the client fail a few background reconnects: none of them may add a log line.
    const store = { downs: 0 };
    const client = cache.redisClient()!;
    client.on('close', () => store.downs++);
    await waitFor(() => store.downs >= 3, { timeoutMs: 10_000, message: 'three failed reconnect attempts' });
    const warned = warnings(lines);
    expect(warned).toHaveLength(1);
    expect(warned[0]?.msg).toMatch(/Redis is unreachable.*memory/);
  });

  it('when Redis is killed under a stream of reads and writes, no call fails or takes over 250 ms and the mode becomes memory', async () => {
    const redis = await ownRedis();
    const { cache, lines } = cacheFor(redis.port);
    await cache.start();
    expect(cache.status().mode).toBe('redis');

    const traffic = trafficOn(cache);
    await waitFor(() => traffic.calls >= 400, { message: 'traffic against Redis' });
    await redis.kill();
    const callsAtKill = traffic.calls;
    await waitFor(() => cache.status().mode === 'memory' && traffic.calls >= callsAtKill + 400, {
      message: 'memory mode and traffic after the kill',
    });
    await traffic.stop();

    expect(traffic.failures).toEqual([]);
    expect(Math.max(...traffic.durationsMs)).toBeLessThan(250);
    expect(cache.status()).toMatchObject({ mode: 'memory', connected: false });
    expect(warnings(lines).filter((l) => /connection lost/.test(l.msg))).toHaveLength(1);
  });

  it('when Redis comes back on the same port, the same cache switches back to Redis and logs it once', async () => {
    const redis = await ownRedis();
    const { cache, lines } = cacheFor(redis.port);
    await cache.start();
    await redis.kill();
    await waitFor(() => cache.status().mode === 'memory', { message: 'memory mode after the kill' });

    await redis.restart();
    await waitFor(() => cache.status().mode === 'redis', { timeoutMs: 10_000, message: 'redis mode after the restart' });

    expect(cache.status().connected).toBe(true);
    const key = `test:back:${randomUUID()}`;
    await cache.set(key, 'in-redis', 60_000);
    const raw = rawClient(redis.port);
    expect(await raw.get(key)).toBe('in-redis');
    expect(infos(lines).filter((l) => /Redis is back/.test(l.msg))).toHaveLength(1);
  });

  it('when Redis is frozen (SIGSTOP), calls return within the command timeout, and it is used again once thawed', async () => {
    const redis = await ownRedis();
    const { cache } = cacheFor(redis.port);
    await cache.start();
    await cache.set('test:frozen', 'v', 60_000);

    redis.pause();
    try {
      const started = performance.now();
      const results = await Promise.all(Array.from({ length: 20 }, () => cache.get('test:frozen')));
      const elapsedMs = performance.now() - started;

      expect(elapsedMs).toBeLessThan(COMMAND_TIMEOUT_MS + 250);
      // The write-through copy in memory answers while Redis is frozen.
      expect(results.every((r) => r?.value === 'v')).toBe(true);
      expect(cache.status().mode).toBe('memory');

      const second = performance.now();
      await cache.get('test:frozen');
      expect(performance.now() - second).toBeLessThan(50);
    } finally {
      redis.resume();
    }
    await waitFor(() => cache.status().mode === 'redis', { timeoutMs: 10_000, message: 'redis mode after SIGCONT' });
  });

  it('when an adapter on the Redis client reports a failure, then the cache serves from memory at once and returns to Redis by itself', async () => {
    const redis = await ownRedis();
    const { cache, lines } = cacheFor(redis.port);
    await cache.start();
    expect(cache.status()).toMatchObject({ mode: 'redis', topology: 'single', node: `127.0.0.1:${redis.port}` });

    cache.redisFailed(new Error('Command timed out'));

    expect(cache.status().mode).toBe('memory');
    expect(warnings(lines).at(-1)).toMatchObject({ reason: 'Command timed out' });
    // Redis itself is fine: the probe finds it answering and switches back.
    await waitFor(() => cache.status().mode === 'redis', { timeoutMs: 5_000, message: 'return to Redis' });
  });

  it('when CACHE_PASSWORD is right, uses Redis', async () => {
    const redis = await ownRedis({ password: 's3cret pass' });
    const { cache, lines } = cacheFor(redis.port, { CACHE_PASSWORD: 's3cret pass' });

    await cache.start();

    expect(cache.status()).toMatchObject({ mode: 'redis', connected: true });
    expect(warnings(lines)).toEqual([]);
  });

  it('when CACHE_PASSWORD is wrong, falls back to memory with one logged warning and keeps working', async () => {
    const redis = await ownRedis({ password: 's3cret pass' });
    const { cache, lines } = cacheFor(redis.port, { CACHE_PASSWORD: 'wrong' });

    await cache.start();

    expect(cache.status()).toMatchObject({ mode: 'memory', connected: false });
    await cache.set('test:k', 'v', 60_000);
    expect((await cache.get('test:k'))?.value).toBe('v');
    const warned = warnings(lines);
    expect(warned).toHaveLength(1);
    expect(warned[0]?.msg).toMatch(/Redis is unreachable/);
    expect(String(warned[0]?.reason)).toMatch(/WRONGPASS|invalid|password/i);
    expect(JSON.stringify(lines)).not.toContain('s3cret');
  });

  it('when CACHE_DB is set, values land in that database and nowhere else', async () => {
    const redis = await ownRedis();
    const { cache } = cacheFor(redis.port, { CACHE_DB: '5' });
    await cache.start();
    const key = `test:db:${randomUUID()}`;

    await cache.set(key, 'in-db-5', 60_000);

    expect(await rawClient(redis.port, { db: 5 }).get(key)).toBe('in-db-5');
    expect(await rawClient(redis.port, { db: 0 }).get(key)).toBeNull();
  });

  it('deleteByPrefix leaves keys under other prefixes in the same database untouched', async () => {
    const redis = await ownRedis();
    const { cache } = cacheFor(redis.port, { CACHE_DB: '2' });
    await cache.start();
    const raw = rawClient(redis.port, { db: 2 });
    await raw.set('someone-else:key', 'theirs');
    await raw.set('mds:v2:indices:simulated', 'other-version');
    await cache.set('mds:v1:indices:simulated', 'ours', 60_000);
    await cache.set('mds:v1:stale:indices:simulated', 'ours-stale', 60_000);

    await expect(cache.deleteByPrefix('mds:v1:')).resolves.toBe(2);

    expect(await raw.get('mds:v1:indices:simulated')).toBeNull();
    expect(await raw.get('someone-else:key')).toBe('theirs');
    expect(await raw.get('mds:v2:indices:simulated')).toBe('other-version');
    expect(await raw.dbsize()).toBe(2);
  });

  it('counts hits and misses of get', async () => {
    const redis = await ownRedis();
    const { cache } = cacheFor(redis.port);
    await cache.start();
    await cache.set('test:counted', 'v', 60_000);

    await cache.get('test:counted');
    await cache.get('test:counted');
    await cache.get('test:absent');

    expect(cache.status()).toMatchObject({ hits: 2, misses: 1 });
  });
});

describe('ResilientCache broadcast', () => {
  it('when an instance publishes, then Redis carries a typed envelope naming the sender, the others hear the message, and the sender hears it once', async () => {
    const redis = await ownRedis();
    const { cache: a } = cacheFor(redis.port);
    const { cache: b } = cacheFor(redis.port);
    const spy = rawClient(redis.port);
    await Promise.all([a.start(), b.start(), spy.connect()]);
    const channel = `test:bus:${randomUUID()}`;
    const wire: string[] = [];
    spy.on('message', (_channel: string, raw: string) => wire.push(raw));
    await spy.subscribe(channel);
    const heardByA: string[] = [];
    const heardByB: string[] = [];
    a.subscribe(channel, (m) => heardByA.push(m));
    b.subscribe(channel, (m) => heardByB.push(m));
    await waitFor(() => a.live() && b.live(), { message: 'both subscribed' });

    let publishes = 0;
    await waitFor(
      async () => {
        publishes++;
        await a.publish(channel, 'key:abc');
        return heardByB.length > 0 && wire.length > 0;
      },
      { intervalMs: 100, message: 'the message at the other instance' },
    );

    expect(new Set(heardByB)).toEqual(new Set(['key:abc']));
    const envelope = JSON.parse(wire[0]!) as Record<string, unknown>;
    expect(Object.keys(envelope).sort()).toEqual(['from', 'message']);
    expect(envelope.message).toBe('key:abc');
    // Every publish reached A's own listener once (locally), never again through Redis.
    await a.publish(channel, 'key:def');
    await waitFor(() => heardByB.includes('key:def') && wire.some((raw) => raw.includes('key:def')), { message: 'the second message' });
    expect(heardByA).toEqual([...Array.from({ length: publishes }, () => 'key:abc'), 'key:def']);
  });

  it('when the release before speaks on its names of the shared channels, then this release hears it there and also speaks there in its form', async () => {
    const redis = await ownRedis();
    const { cache } = cacheFor(redis.port);
    const before = rawClient(redis.port);
    const beforeListener = rawClient(redis.port);
    await Promise.all([cache.start(), before.connect(), beforeListener.connect()]);
    const heard: string[] = [];
    cache.subscribe(channels.identityChanged, (m) => heard.push(m));
    const olderHeard: string[] = [];
    beforeListener.on('message', (_channel: string, raw: string) => olderHeard.push(raw));
    await beforeListener.subscribe('mds:v1:auth:identity-changed');
    await waitFor(async () => (await before.pubsub('NUMSUB', 'mds:v1:auth:identity-changed'))[1] === 2 && cache.live(), { message: 'the subscriptions' });

    await before.publish('mds:v1:auth:identity-changed', 'an-old-instance:user:bob');
    await waitFor(() => heard.includes('user:bob'), { message: 'the old release heard' });
    await cache.publish(channels.identityChanged, 'key:k1');
    await waitFor(() => olderHeard.some((raw) => raw.endsWith(':key:k1')), { message: 'the old release told' });

    const told = olderHeard.find((raw) => raw.endsWith(':key:k1'))!;
    expect(told.slice(0, told.indexOf(':'))).not.toBe('an-old-instance');
    // The old form of our own message never comes back as a second delivery.
    expect(heard.filter((m) => m === 'key:k1')).toEqual(['key:k1']);
  });
});
