/**
 * The quota counters against a real redis-server: the batched counter in front of the shared one
 * counts every request in Redis, exactly at the limit, and two instances end on one count.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchedRequestCounter } from '../../src/infra/counters/batched-request-counter.js';
import { keys } from '../../src/domain/key-space.js';
import { QuotaCounter } from '../../src/infra/counters/quota-counter.js';
import { RedisSharedCounters } from '../../src/infra/counters/redis-shared-counters.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

/** The fail-fast client settings of STACK.md. */
async function connectRedis(port: number): Promise<Redis> {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 500, connectTimeout: 1000, retryStrategy: (t) => Math.min(t * 100, 1000) });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

const unique = (label: string) => `${label}-${randomBytes(6).toString('hex')}`;

describe('BatchedRequestCounter over QuotaCounter in Redis', () => {
  let redis: RedisProcess;
  let client: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    client = await connectRedis(redis.port);
  });

  afterAll(async () => {
    client.disconnect();
    await redis.stop();
  });

  it('when one caller sends 1,100 requests against a limit of 1,000, then exactly 1,000 are allowed and Redis counted them all', async () => {
    const counter = new BatchedRequestCounter(new QuotaCounter({ counters: new RedisSharedCounters({ redis: client }) }));
    const key = unique('ip:192.0.2.1');

    let allowed = 0;
    for (let i = 0; i < 1100; i++) if ((await counter.consume(key, 1000)).allowed) allowed++;

    expect(allowed).toBe(1000);
    await waitFor(async () => Number(await client.get(keys.quota(key))) >= 1000, { message: 'the batches reach Redis' });
    const ttlMs = await client.pttl(keys.quota(key));
    expect(ttlMs).toBeGreaterThan(50_000);
    expect(ttlMs).toBeLessThanOrEqual(60_000);
  });

  it('when an action costs several points, then all of them are counted, far from the limit as near it', async () => {
    const counter = new BatchedRequestCounter(new QuotaCounter({ counters: new RedisSharedCounters({ redis: client }) }));
    const key = unique('ip:192.0.2.5');
    await counter.consume(key, 1000); // an estimate far from the limit
    const priced = await counter.consume(key, 1000, 5);
    expect(priced.remaining).toBeLessThanOrEqual(1000 - 6);
    await waitFor(async () => Number(await client.get(keys.quota(key))) === 6, { message: 'the 6 points in Redis' });
    // A limit of 30: six actions of 5 points fill it, the next ones are refused.
    const small = unique('ip:192.0.2.6');
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push((await counter.consume(small, 30, 5)).allowed);
    expect(answers).toEqual([true, true, true, true, true, true, false, false, false, false]);
  });

  it('when far from the limit, then requests are answered in batches: Redis sees far fewer calls than requests', async () => {
    const counter = new BatchedRequestCounter(new QuotaCounter({ counters: new RedisSharedCounters({ redis: client }) }));
    const key = unique('user:batch');
    await counter.consume(key, 1_000_000); // the first request of a key always asks Redis
    const before = Number(/total_commands_processed:(\d+)/.exec(await client.info('stats'))?.[1]);

    const answers = await Promise.all(Array.from({ length: 2000 }, () => counter.consume(key, 1_000_000)));
    await waitFor(async () => Number(await client.get(keys.quota(key))) === 2001, { message: 'all 2,001 points in Redis' });
    const after = Number(/total_commands_processed:(\d+)/.exec(await client.info('stats'))?.[1]);

    expect(answers.every((a) => a.allowed)).toBe(true);
    expect(Math.min(...answers.map((a) => a.remaining))).toBeGreaterThanOrEqual(1_000_000 - 2001);
    expect(after - before).toBeLessThan(200);
  });

  it('when a key piles up points faster than the timer sends them, then its batch goes at once: Redis has them long before the timer', async () => {
    // A timer far beyond the test's wait: only the pile-up can send the points.
    const counter = new BatchedRequestCounter(new QuotaCounter({ counters: new RedisSharedCounters({ redis: client }) }), { flushMs: 60_000 });
    const key = unique('ip:192.0.2.7');
    await counter.consume(key, 1_000_000); // the first request of a key always asks Redis
    // A limit of 1,000,000 holds up to 25,000 points unconfirmed; half of it sends the batch.
    for (let i = 0; i < 12_500; i++) expect(counter.consumeNow(key, 1_000_000)?.allowed).toBe(true);

    await waitFor(async () => Number(await client.get(keys.quota(key))) === 12_501, { message: 'the piled-up points in Redis', timeoutMs: 5000 });
  });

  it('when the counter closes with points still waiting for the timer, then they reach Redis before close resolves', async () => {
    const counter = new BatchedRequestCounter(new QuotaCounter({ counters: new RedisSharedCounters({ redis: client }) }), { flushMs: 60_000 });
    const key = unique('user:leaving');
    await counter.consume(key, 1_000_000);
    for (let i = 0; i < 7; i++) counter.consumeNow(key, 1_000_000);
    expect(Number(await client.get(keys.quota(key)))).toBe(1);

    await counter.close();

    expect(Number(await client.get(keys.quota(key)))).toBe(8);
  });

  it('when the same caller comes with another limit, then the estimate learned under the old one does not answer for it', async () => {
    const counter = new BatchedRequestCounter(new QuotaCounter({ counters: new RedisSharedCounters({ redis: client }) }));
    const key = unique('key:managed');
    await counter.consume(key, 1_000_000);
    expect(counter.consumeNow(key, 1_000_000)?.remaining).toBe(1_000_000 - 2);

    // An administrator lowered the key's quota: the next request asks Redis under the new limit.
    expect(counter.consumeNow(key, 50)).toBeUndefined();
    const lowered = await counter.consume(key, 50);
    expect(lowered.allowed).toBe(true);
    expect(lowered.remaining).toBe(50 - 3);
  });

  it('when two instances count the same key, then together they allow exactly the limit and both refuse past it', async () => {
    const a = new BatchedRequestCounter(new QuotaCounter({ counters: new RedisSharedCounters({ redis: client }) }));
    const b = new BatchedRequestCounter(new QuotaCounter({ counters: new RedisSharedCounters({ redis: client }) }));
    const key = unique('key:static:0badc0de');

    let allowed = 0;
    for (let i = 0; i < 300; i++) if ((await (i % 2 ? a : b).consume(key, 250)).allowed) allowed++;

    // Refused requests stop reaching Redis once each instance has seen one refusal (in-memory block).
    await waitFor(async () => Number(await client.get(keys.quota(key))) >= 250, { message: 'both instances flushed' });
    // Near the limit every request asks Redis, and neither hides more than a few points from the other.
    expect(allowed).toBe(250);
    expect((await a.consume(key, 250)).allowed).toBe(false);
    expect((await b.consume(key, 250)).allowed).toBe(false);
  });
});
