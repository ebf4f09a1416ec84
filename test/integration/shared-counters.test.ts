/**
 * The shared counters against a real redis-server: instances share windows and pauses through Redis,
 * memory answers while the cache is not in Redis mode, and a frozen Redis costs a caller at most the
 * command timeout before memory answers instead.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { keys, utcDay } from '../../src/domain/key-space.js';
import type { CounterWindow } from '../../src/domain/ports/counters.js';
import { loadConfig } from '../../src/config.js';
import { createCache } from '../../src/infra/cache/index.js';
import { RedisSharedCounters } from '../../src/infra/counters/redis-shared-counters.js';
import { captureLogs } from '../helpers/log-capture.js';
import { connectFailFast, startRedis } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

const unique = (label: string) => `${label}-${randomBytes(6).toString('hex')}`;
const MINUTE: CounterWindow = { limit: 5, windowMs: 60_000 };

describe('RedisSharedCounters on a shared Redis', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectFailFast(inject('redisPort'));
  });
  afterAll(async () => {
    await client.quit();
  });

  it('when two instances count one key, then together they are allowed exactly the limit and the count lives in Redis for the window', async () => {
    const a = new RedisSharedCounters({ redis: client });
    const b = new RedisSharedCounters({ redis: client });
    const key = keys.quota(unique('user:shared'));

    const answers = [];
    for (let i = 0; i < 8; i++) answers.push(await (i % 2 ? a : b).consume(key, MINUTE));

    expect(answers.map((u) => u.allowed)).toEqual([true, true, true, true, true, false, false, false]);
    expect(answers.map((u) => u.remaining)).toEqual([4, 3, 2, 1, 0, 0, 0, 0]);
    expect(answers[4]).toMatchObject({ used: 5 });
    expect(Number(await client.get(key))).toBeGreaterThanOrEqual(6);
    const ttlMs = await client.pttl(key);
    expect(ttlMs).toBeGreaterThan(50_000);
    expect(ttlMs).toBeLessThanOrEqual(60_000);
    await expect(a.peek(key, MINUTE)).resolves.toMatchObject({ allowed: false, remaining: 0 });
  });

  it('when a key reaches a limit with a block, then it stays used up for the block on every instance until reset', async () => {
    const window: CounterWindow = { limit: 2, windowMs: 10_000, blockMs: 120_000 };
    const a = new RedisSharedCounters({ redis: client });
    const b = new RedisSharedCounters({ redis: client });
    const key = keys.throttle.user(unique('blocked'));

    await a.consume(key, window);
    const reaching = await a.consume(key, window);

    expect(reaching).toMatchObject({ allowed: true, used: 2, remaining: 0 });
    expect(reaching.resetMs).toBeGreaterThan(110_000);
    const seen = await b.peek(key, window);
    expect(seen.allowed).toBe(false);
    expect(seen.resetMs).toBeGreaterThan(110_000);
    await b.reset(key, window);
    expect(await client.exists(key)).toBe(0);
    await expect(a.peek(key, window)).resolves.toEqual({ allowed: true, used: 0, remaining: 2, resetMs: 0 });
  });

  it('when a per-day limit is counted, then it refuses past the limit until the next UTC midnight', async () => {
    const now = Date.UTC(2026, 10, 25, 22, 0, 0);
    const counters = new RedisSharedCounters({ redis: client, now: () => now });
    const key = keys.upstream.daily('alpha_vantage', unique('k'), utcDay(now));
    const day: CounterWindow = { limit: 3, windowMs: 'utc-day' };

    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await counters.consume(key, day));

    expect(answers.map((u) => u.allowed)).toEqual([true, true, true, false]);
    expect(answers.every((u) => u.resetMs === 2 * 60 * 60 * 1000)).toBe(true);
    await expect(counters.peek(key, day)).resolves.toMatchObject({ used: 4, remaining: 0 });
    expect(await client.pttl(key)).toBeGreaterThan(24 * 60 * 60 * 1000);
  });

  it('when instances record pauses, then every instance reads the longest and a shorter one never ends it', async () => {
    const a = new RedisSharedCounters({ redis: client });
    const b = new RedisSharedCounters({ redis: client });
    const key = keys.upstream.pauseUntil(unique('provider'));
    const long = Date.now() + 30_000;

    await a.pauseUntil(key, long);
    await b.pauseUntil(key, long - 20_000);

    await expect(b.pausedUntil(key)).resolves.toBe(long);
    await expect(new RedisSharedCounters({ redis: client }).pausedUntil(key)).resolves.toBe(long);
    const ttlMs = await client.pttl(key);
    expect(ttlMs).toBeGreaterThan(25_000);
    expect(ttlMs).toBeLessThanOrEqual(30_000);
  });

  it('when the cache is not in Redis mode, then counts and pauses stay in memory and nothing is written to Redis', async () => {
    const counters = new RedisSharedCounters({ redis: client, useRedis: () => false });
    const key = keys.quota(unique('ip:198.51.100.1'));
    const pauseKey = keys.upstream.pauseUntil(unique('memory'));
    const until = Date.now() + 10_000;

    for (let i = 0; i < 5; i++) expect((await counters.consume(key, MINUTE)).allowed).toBe(true);
    await counters.pauseUntil(pauseKey, until);

    await expect(counters.consume(key, MINUTE)).resolves.toMatchObject({ allowed: false });
    await expect(counters.pausedUntil(pauseKey)).resolves.toBe(until);
    expect(await client.exists(key, pauseKey)).toBe(0);
  });
});

describe('RedisSharedCounters when Redis freezes', () => {
  it('when Redis stops answering, then every call is answered from memory within the command timeout and the failure is reported', async () => {
    const redis = await startRedis();
    const own = await connectFailFast(redis.port);
    const failures: unknown[] = [];
    const counters = new RedisSharedCounters({ redis: own, commandTimeoutMs: 150, onRedisError: (err) => failures.push(err) });
    const key = keys.quota(unique('user:frozen'));
    const pauseKey = keys.upstream.pauseUntil(unique('frozen'));
    const window: CounterWindow = { limit: 2, windowMs: 60_000 };
    await counters.consume(key, window);
    redis.pause();
    try {
      const timed = async <T>(call: () => Promise<T>): Promise<{ value: T; ms: number }> => {
        const started = performance.now();
        const value = await call();
        return { value, ms: performance.now() - started };
      };

      const first = await timed(() => counters.consume(key, window));
      const second = await timed(() => counters.consume(key, window));
      const third = await timed(() => counters.consume(key, window));
      const until = Date.now() + 5_000;
      const paused = await timed(() => counters.pauseUntil(pauseKey, until));
      const read = await timed(() => counters.pausedUntil(pauseKey));

      // Memory has its own count from here: the point counted in Redis before the freeze is not in it.
      expect([first.value.allowed, second.value.allowed, third.value.allowed]).toEqual([true, true, false]);
      expect(read.value).toBe(until);
      // The client's own command timeout is 500 ms: only the counters' deadline answers sooner (timers on a busy host run late).
      for (const { ms } of [first, second, third, paused, read]) expect(ms).toBeLessThan(150 + 250);
      expect(failures.length).toBe(5);
      expect(failures[0]).toBeInstanceOf(Error);
    } finally {
      redis.resume();
      own.disconnect();
      await redis.stop();
    }
  });
});

describe('The cache\'s shared counters', () => {
  it('when a counter call finds Redis frozen, then the whole cache serves from memory, later counter calls no longer wait, and both return to Redis with it', async () => {
    const redis = await startRedis();
    const { logger } = captureLogs();
    const config = loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(redis.port) }, { readFile: false });
    const cache = createCache(config.cache, logger, { commandTimeoutMs: 200, connectTimeoutMs: 500, startTimeoutMs: 2000 });
    const raw = await connectFailFast(redis.port);
    try {
      await cache.start();
      const counters = cache.sharedCounters();
      expect(cache.sharedCounters()).toBe(counters);
      const key = keys.quota(unique('user:cache'));
      await counters.consume(key, MINUTE);
      expect(Number(await raw.get(key))).toBe(1);

      redis.pause();
      let resumed = false;
      try {
        const started = performance.now();
        await counters.consume(key, MINUTE);
        const firstMs = performance.now() - started;
        expect(cache.status().mode).toBe('memory');
        const again = performance.now();
        for (let i = 0; i < 20; i++) await counters.consume(key, MINUTE);
        const laterMs = performance.now() - again;

        expect(firstMs).toBeLessThan(200 + 250);
        // In memory mode no call goes near Redis: twenty of them together take less than one timeout.
        expect(laterMs).toBeLessThan(100);
        redis.resume();
        resumed = true;
        await waitFor(() => cache.status().mode === 'redis', { timeoutMs: 10_000, message: 'the cache back on Redis' });
        // The call that timed out was still carried out by Redis once it thawed: count from what is there.
        const before = Number(await raw.get(key));
        await counters.consume(key, MINUTE);
        expect(Number(await raw.get(key))).toBe(before + 1);
      } finally {
        if (!resumed) redis.resume();
      }
    } finally {
      raw.disconnect();
      await cache.close();
      await redis.stop();
    }
  });
});
