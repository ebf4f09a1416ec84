/**
 * LoginThrottle against a real redis-server: counters shared between instances, the key layout, and
 * the fall back to process memory when Redis dies or freezes.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { TooManyRequestsError } from '../../src/domain/errors.js';
import { THROTTLE_KEY_PREFIX } from '../../src/domain/key-space.js';
import { LoginThrottle } from '../../src/infra/auth/login-throttle.js';
import { RedisSharedCounters } from '../../src/infra/counters/redis-shared-counters.js';
import { connectFailFast, startRedis, type RedisProcess } from '../helpers/redis-server.js';

const MAX_FAILURES = 3;
const BLOCK_MS = 120_000;


/** Names no other test run (sharing this Redis) will use. */
const unique = (label: string) => `${label}-${randomBytes(6).toString('hex')}`;

async function failTimes(throttle: LoginThrottle, username: string, ip: string, times: number): Promise<void> {
  for (let i = 0; i < times; i++) await throttle.recordFailure(username, ip);
}

describe('LoginThrottle with the shared Redis', () => {
  let client: Redis;

  beforeAll(async () => {
    client = await connectFailFast(inject('redisPort'));
  });

  afterAll(async () => {
    await client.quit();
  });

  it('when one instance records the failures, then another instance on the same Redis refuses the username from that address', async () => {
    const first = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS, counters: new RedisSharedCounters({ redis: client }) });
    const second = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS, counters: new RedisSharedCounters({ redis: client }) });
    const username = unique('alice');
    const ip = unique('ip');

    await failTimes(first, username, ip, MAX_FAILURES);

    const err = await second.begin(username, ip).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TooManyRequestsError);
    expect((err as TooManyRequestsError).retryAfterSeconds).toBeGreaterThan(BLOCK_MS / 1000 - 30);
    expect((err as TooManyRequestsError).retryAfterSeconds).toBeLessThanOrEqual(BLOCK_MS / 1000);
  });

  it('when failures are recorded, then the counters live under mds:v1:throttle: with the block as their TTL', async () => {
    const throttle = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS, counters: new RedisSharedCounters({ redis: client }) });
    const username = unique('bob');
    const ip = unique('203.0.113.7');

    await failTimes(throttle, username, ip, MAX_FAILURES);

    expect(THROTTLE_KEY_PREFIX).toBe('mds:v1:throttle:');
    expect(await client.exists(`mds:v1:throttle:user:${username}`, `mds:v1:throttle:ip:${ip}`, `mds:v1:throttle:pair:${ip}:${username}`)).toBe(3);
    const ttlMs = await client.pttl(`mds:v1:throttle:pair:${ip}:${username}`);
    expect(ttlMs).toBeGreaterThan(BLOCK_MS - 30_000);
    expect(ttlMs).toBeLessThanOrEqual(BLOCK_MS);
  });

  it('when fewer failures than the limit were recorded, then the username may still try', async () => {
    const throttle = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS, counters: new RedisSharedCounters({ redis: client }) });
    const username = unique('carol');
    const ip = unique('ip');

    await failTimes(throttle, username, ip, MAX_FAILURES - 1);

    await expect(throttle.check(username, ip)).resolves.toBeUndefined();
  });

  it('when a login succeeds, then the pair counter is removed from Redis, the address keeps its earlier failures and gets this attempt back', async () => {
    const throttle = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS, counters: new RedisSharedCounters({ redis: client }) });
    const username = unique('dave');
    const ip = unique('ip');
    await failTimes(throttle, username, ip, MAX_FAILURES - 1);

    const slot = await throttle.begin(username, ip);
    expect(Number(await client.get(`mds:v1:throttle:ip:${ip}`))).toBe(MAX_FAILURES);
    await slot.succeeded();

    expect(await client.exists(`mds:v1:throttle:pair:${ip}:${username}`)).toBe(0);
    expect(Number(await client.get(`mds:v1:throttle:ip:${ip}`))).toBe(MAX_FAILURES - 1);
  });
});

describe('LoginThrottle when Redis fails', () => {
  let redis: RedisProcess;
  let client: Redis;

  beforeAll(async () => {
    redis = await startRedis();
  });

  afterEach(async () => {
    client?.disconnect();
  });

  afterAll(async () => {
    await redis.stop();
  });

  it('when Redis has been killed, then failures are counted in memory and the username is still blocked from that address', async () => {
    await redis.restart();
    client = await connectFailFast(redis.port);
    const throttle = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS, counters: new RedisSharedCounters({ redis: client }) });
    const closed = once(client, 'close');
    await redis.kill();
    await closed;

    await failTimes(throttle, 'eve', '198.51.100.1', MAX_FAILURES);

    await expect(throttle.check('eve', '198.51.100.1')).rejects.toBeInstanceOf(TooManyRequestsError);
    await expect(throttle.check('frank', '198.51.100.3')).resolves.toBeUndefined();
  });

  it('when Redis is frozen, then calls fall back to memory after the command timeout instead of hanging', async () => {
    await redis.restart();
    client = await connectFailFast(redis.port);
    const throttle = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS, counters: new RedisSharedCounters({ redis: client }) });
    redis.pause();
    try {
      await failTimes(throttle, 'grace', '198.51.100.4', MAX_FAILURES);

      await expect(throttle.check('grace', '198.51.100.4')).rejects.toBeInstanceOf(TooManyRequestsError);
    } finally {
      redis.resume();
    }
  });
});

describe('LoginThrottle on counters told whether Redis is available', () => {
  let client: Redis;
  beforeAll(async () => {
    client = await connectFailFast(inject('redisPort'));
  });
  afterAll(async () => {
    await client.quit();
  });

  it('when useRedis says no, then the counters stay in memory and nothing is written to Redis', async () => {
    const user = unique('memory-only');
    const throttle = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS, counters: new RedisSharedCounters({ redis: client, useRedis: () => false }) });
    await failTimes(throttle, user, '198.51.100.20', MAX_FAILURES);

    await expect(throttle.check(user, '198.51.100.20')).rejects.toBeInstanceOf(TooManyRequestsError);
    await expect(client.exists(`${THROTTLE_KEY_PREFIX}user:${user}`)).resolves.toBe(0);
  });

  it('when a Redis command fails, then onRedisError hears of it and the attempt is counted in memory', async () => {
    const redis = await startRedis();
    const own = await connectFailFast(redis.port);
    const errors: unknown[] = [];
    const throttle = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS, counters: new RedisSharedCounters({ redis: own, onRedisError: (err) => errors.push(err) }) });
    try {
      redis.pause();
      const user = unique('reported');
      await failTimes(throttle, user, '198.51.100.22', MAX_FAILURES);
      await expect(throttle.check(user, '198.51.100.22')).rejects.toBeInstanceOf(TooManyRequestsError);
      expect(errors.length).toBeGreaterThanOrEqual(MAX_FAILURES);
      expect(errors[0]).toBeInstanceOf(Error);
    } finally {
      redis.resume();
      own.disconnect();
      await redis.stop();
    }
  });
});

describe('LoginThrottle without Redis', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('when the block time has passed, then the username may try again', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const throttle = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS });
    await failTimes(throttle, 'heidi', '192.0.2.1', MAX_FAILURES);
    await expect(throttle.check('heidi', '192.0.2.1')).rejects.toBeInstanceOf(TooManyRequestsError);

    vi.advanceTimersByTime(BLOCK_MS + 1000);

    await expect(throttle.check('heidi', '192.0.2.1')).resolves.toBeUndefined();
  });

  it('when one address fails for many usernames, then the address is blocked after 4 × maxFailures', async () => {
    const throttle = new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS });
    for (let i = 0; i < MAX_FAILURES * 4 - 1; i++) await throttle.recordFailure(`user${i}`, '192.0.2.9');
    await expect(throttle.check('someone-new', '192.0.2.9')).resolves.toBeUndefined();

    await throttle.recordFailure('last-one', '192.0.2.9');

    await expect(throttle.check('someone-new', '192.0.2.9')).rejects.toBeInstanceOf(TooManyRequestsError);
    await expect(throttle.check('someone-new', '192.0.2.10')).resolves.toBeUndefined();
  });

  it('when maxFailuresPerIp is given, then the address limit follows it', async () => {
    const throttle = new LoginThrottle({ maxFailures: MAX_FAILURES, maxFailuresPerIp: 2, blockMs: BLOCK_MS });

    await throttle.recordFailure('a', '192.0.2.20');
    await throttle.recordFailure('b', '192.0.2.20');

    await expect(throttle.check('c', '192.0.2.20')).rejects.toBeInstanceOf(TooManyRequestsError);
  });
});
