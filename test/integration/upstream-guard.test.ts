/**
 * Upstream protection end to end: the providers `createMarketDataProvider` builds for yahoo (Yahoo
 * provider -> upstream guard -> breaker), against the fake upstream over real sockets, sharing a real
 * redis-server as two instances of the service would. Every bound is checked on the arrival times the
 * fake upstream recorded, not on what the guard believes it did.
 */
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DataSourceError } from '../../src/domain/errors.js';
import { createMarketDataProvider, UpstreamGuard, type ResilientMarketDataProvider } from '../../src/infra/market/index.js';
import { RedisSharedCounters } from '../../src/infra/counters/redis-shared-counters.js';
import { UpstreamBusyError, UpstreamRateLimitedError } from '../../src/infra/market/upstream-guard-errors.js';
import { createLogger } from '../../src/infra/logger.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { connectFailFast, startRedis, type RedisProcess } from '../helpers/redis-server.js';

const FIXTURES_DIR = fileURLToPath(new URL('../fixtures/yahoo/', import.meta.url));
const silent = createLogger({ level: 'silent', name: 'test' });

let upstream: FakeUpstream;
let redis: RedisProcess;
const clients: Redis[] = [];
const providers: ResilientMarketDataProvider[] = [];

/** A fail-fast client (see connectFailFast), closed after the tests. */
async function connectRedis(): Promise<Redis> {
  const client = await connectFailFast(redis.port);
  clients.push(client);
  return client;
}

/** One "instance": the yahoo provider as the service builds it. */
function instance(options: { maxRps: number; maxConcurrency?: number; maxWaitMs: number; redis?: Redis }): ResilientMarketDataProvider {
  const provider = createMarketDataProvider(
    { provider: 'yahoo', baseUrl: upstream.baseUrl, timeoutMs: 5000, upstreamMaxRps: options.maxRps, upstreamMaxConcurrency: options.maxConcurrency ?? 4 },
    silent,
    { counters: new RedisSharedCounters({ redis: options.redis }), upstreamMaxWaitMs: options.maxWaitMs },
  );
  providers.push(provider);
  return provider;
}

/** Arrivals at the fake upstream per calendar second (epoch second -> count), from request `since` on. */
function arrivalsPerSecond(since: number): Map<number, number> {
  const counts = new Map<number, number>();
  for (const r of upstream.requestLog.slice(since)) {
    const second = Math.floor(r.at / 1000);
    counts.set(second, (counts.get(second) ?? 0) + 1);
  }
  return counts;
}

const symbols = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(4, '0')}`);

beforeAll(async () => {
  [upstream, redis] = await Promise.all([startFakeUpstream({ fixturesDir: FIXTURES_DIR }), startRedis()]);
});
afterAll(async () => {
  await Promise.all([upstream.close(), redis.stop()]);
});
beforeEach(async () => {
  await upstream.setMode('replay');
  upstream.setLatencyMs(0);
  if (redis) {
    const admin = await connectRedis();
    await admin.flushall();
  }
});
afterEach(() => {
  for (const provider of providers.splice(0)) provider.close();
  for (const client of clients.splice(0)) client.disconnect();
});

describe('upstream budget (UPSTREAM_MAX_RPS)', () => {
  it('when 200 distinct cold symbols are asked at once, then no calendar second sees more than UPSTREAM_MAX_RPS arrivals upstream', async () => {
    const MAX_RPS = 40;
    const provider = instance({ maxRps: MAX_RPS, maxWaitMs: 15_000, redis: await connectRedis() });
    const before = upstream.requests;

    const answers = await Promise.all(symbols('COLD', 200).map((s) => provider.getQuote(s)));

    expect(answers.every((a) => a === undefined)).toBe(true);
    expect(upstream.requests - before).toBe(200);
    const perSecond = arrivalsPerSecond(before);
    expect(Math.max(...perSecond.values())).toBeLessThanOrEqual(MAX_RPS);
    // 200 calls at 40 a second cannot fit in fewer than five calendar seconds.
    expect(perSecond.size).toBeGreaterThanOrEqual(5);
    expect(provider.state).toBe('closed');
  });

  it('when two instances share one redis-server, then together they stay within the budget', async () => {
    const MAX_RPS = 20;
    const a = instance({ maxRps: MAX_RPS, maxWaitMs: 15_000, redis: await connectRedis() });
    const b = instance({ maxRps: MAX_RPS, maxWaitMs: 15_000, redis: await connectRedis() });
    const before = upstream.requests;

    await Promise.all([...symbols('A', 50).map((s) => a.getQuote(s)), ...symbols('B', 50).map((s) => b.getQuote(s))]);

    const log = upstream.requestLog.slice(before);
    expect(log.filter((r) => r.url.includes('/A-')).length).toBe(50);
    expect(log.filter((r) => r.url.includes('/B-')).length).toBe(50);
    const perSecond = arrivalsPerSecond(before);
    // Each instance alone could send 20 a second: unshared budgets would show up to 40 here.
    expect(Math.max(...perSecond.values())).toBeLessThanOrEqual(MAX_RPS);
    expect(perSecond.size).toBeGreaterThanOrEqual(5);
  });

  it('when Redis is away, then each instance keeps the budget in memory and calls still go through', async () => {
    const MAX_RPS = 10;
    const client = await connectRedis();
    const provider = instance({ maxRps: MAX_RPS, maxWaitMs: 10_000, redis: client });
    await redis.stop();
    try {
      const before = upstream.requests;
      const answers = await Promise.all([...symbols('MEM', 25).map((s) => provider.getQuote(s)), provider.getQuote('^IXIC')]);

      expect(answers.at(-1)?.symbol).toBe('^IXIC');
      expect(upstream.requests - before).toBe(26);
      expect(Math.max(...arrivalsPerSecond(before).values())).toBeLessThanOrEqual(MAX_RPS);
    } finally {
      await redis.restart();
    }
  });

  it('when the budget has no room within the wait bound, then calls fail with a DataSourceError carrying Retry-After, never reach the upstream, and leave the breaker closed', async () => {
    const provider = instance({ maxRps: 1, maxWaitMs: 200, redis: await connectRedis() });
    await provider.getQuote('^IXIC');
    const before = upstream.requests;

    const start = performance.now();
    const outcomes = await Promise.allSettled(symbols('BUSY', 6).map((s) => provider.getQuote(s)));
    const elapsedMs = performance.now() - start;

    const refused = outcomes.filter((o) => o.status === 'rejected').map((o) => (o as PromiseRejectedResult).reason as unknown);
    // At most one call fits in the next second within 200 ms; the rest are refused.
    expect(refused.length).toBeGreaterThanOrEqual(5);
    for (const error of refused) {
      expect(error).toBeInstanceOf(UpstreamBusyError);
      expect(error).toBeInstanceOf(DataSourceError);
      expect((error as DataSourceError).retryAfterSeconds).toBeGreaterThanOrEqual(1);
    }
    expect(upstream.requests - before).toBe(outcomes.length - refused.length);
    expect(elapsedMs).toBeLessThan(1500);
    expect(provider.state).toBe('closed');
    expect(provider.health()).toMatchObject({ healthy: true, last_error: null });
  });
});

describe('concurrency cap (UPSTREAM_MAX_CONCURRENCY)', () => {
  it('when many calls are made at once against a slow upstream, then no more than the cap are in flight', async () => {
    upstream.setLatencyMs(100);
    upstream.resetPeakInFlight();
    const provider = instance({ maxRps: 0, maxConcurrency: 3, maxWaitMs: 10_000 });

    const answers = await Promise.all(symbols('SLOW', 12).map((s) => provider.getQuote(s)));

    expect(answers).toHaveLength(12);
    expect(upstream.peakInFlight).toBe(3);
  });

  it('when every slot is taken and another provider could be asked, then a call is refused at once instead of waiting', async () => {
    upstream.setLatencyMs(300);
    const guard = new UpstreamGuard({ name: 'yahoo', maxRps: 0, maxConcurrency: 2, maxWaitMs: 10_000, refuseWhenFull: true, counters: new RedisSharedCounters() });
    const slow = () => guard.run(() => fetch(`${upstream.baseUrl}/v8/finance/chart/AAPL?interval=1d&range=1d`).then((r) => r.text()));
    const held = [slow(), slow()];

    const started = performance.now();
    const refused = await slow().then(
      () => undefined,
      (err: unknown) => err,
    );

    expect(refused).toBeInstanceOf(UpstreamBusyError);
    expect(performance.now() - started).toBeLessThan(100);
    // The two held calls hold (or are about to take) both slots; the refused one took none.
    expect(guard.load.queued + guard.load.active).toBe(2);
    await Promise.all(held);
    expect(guard.load).toEqual({ queued: 0, active: 0 });
  });

  it('when calls wait for a slot, then they reach the upstream in the order they were made', async () => {
    upstream.setLatencyMs(20);
    const provider = instance({ maxRps: 0, maxConcurrency: 1, maxWaitMs: 10_000 });
    const before = upstream.requests;
    const order = symbols('FIFO', 8);

    await Promise.all(order.map((s) => provider.getQuote(s)));

    expect(upstream.requestLog.slice(before).map((r) => r.url.split('?')[0])).toEqual(order.map((s) => `/v8/finance/chart/${s}`));
  });
});

describe('pause after a 429 with Retry-After', () => {
  it('when one instance gets a 429, then no instance calls the upstream until Retry-After has passed, and calls resume after', async () => {
    const RETRY_AFTER_S = 2;
    const a = instance({ maxRps: 50, maxWaitMs: 5000, redis: await connectRedis() });
    const b = instance({ maxRps: 50, maxWaitMs: 5000, redis: await connectRedis() });
    upstream.setRetryAfterSeconds(RETRY_AFTER_S);
    await upstream.setMode('rate-limited');

    await expect(a.getQuote('^IXIC')).rejects.toBeInstanceOf(UpstreamRateLimitedError);
    const limitedAt = upstream.requestLog.at(-1)?.at ?? Number.NaN;
    const before = upstream.requests;
    await upstream.setMode('replay');

    const answers = await Promise.all([a.getQuote('^IXIC'), b.getQuote('^SOX'), b.getQuote('AAPL'), b.search('AAPL', 3)]);

    expect(answers.slice(0, 3).map((q) => (q as { symbol: string }).symbol)).toEqual(['^IXIC', '^SOX', 'AAPL']);
    const arrivals = upstream.requestLog.slice(before).map((r) => r.at);
    expect(arrivals).toHaveLength(4);
    for (const at of arrivals) expect(at).toBeGreaterThanOrEqual(limitedAt + RETRY_AFTER_S * 1000);
    expect(Math.min(...arrivals)).toBeLessThan(limitedAt + RETRY_AFTER_S * 1000 + 1500);
    expect([a.state, b.state]).toEqual(['closed', 'closed']);
  });

  it('when the pause outlasts the wait bound, then other instances refuse at once with the pause as Retry-After', async () => {
    const a = instance({ maxRps: 50, maxWaitMs: 300, redis: await connectRedis() });
    const b = instance({ maxRps: 50, maxWaitMs: 300, redis: await connectRedis() });
    upstream.setRetryAfterSeconds(30);
    await upstream.setMode('rate-limited');
    await expect(a.getQuote('^IXIC')).rejects.toBeInstanceOf(UpstreamRateLimitedError);
    await upstream.setMode('replay');
    const before = upstream.requests;

    const start = performance.now();
    const error = await b.getQuote('^SOX').catch((e: unknown) => e);

    expect(error).toBeInstanceOf(UpstreamBusyError);
    expect((error as Error).message).toMatch(/paused/);
    expect((error as DataSourceError).retryAfterSeconds).toBeGreaterThanOrEqual(28);
    expect((error as DataSourceError).retryAfterSeconds).toBeLessThanOrEqual(30);
    expect(performance.now() - start).toBeLessThan(250);
    expect(upstream.requests).toBe(before);
    expect(b.state).toBe('closed');
  });

  it('when there is no Redis, then the pause holds the instance that got the 429', async () => {
    const a = instance({ maxRps: 50, maxWaitMs: 300 });
    upstream.setRetryAfterSeconds(30);
    await upstream.setMode('rate-limited');
    await expect(a.getQuote('^IXIC')).rejects.toBeInstanceOf(UpstreamRateLimitedError);
    await upstream.setMode('replay');
    const before = upstream.requests;

    await expect(a.getQuote('^SOX')).rejects.toBeInstanceOf(UpstreamBusyError);
    expect(upstream.requests).toBe(before);
  });
});
