/**
 * The Yahoo provider behind the whole service, over a real socket: quotes replayed by the fake
 * upstream from test/fixtures/yahoo, every way the upstream fails, the circuit breaker, the refresh
 * scheduler (alone and with two instances on one Redis) and stale-if-error. Redis is this file's own
 * redis-server, flushed before each test.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { components } from '../../src/generated/api.js';
import { expectDocumentedStatus } from '../helpers/contract-status.js';
import { startFakeUpstream, type FakeUpstream, type FakeUpstreamMode } from '../helpers/fake-upstream.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

type Quote = components['schemas']['Quote'];
type SchedulerJob = components['schemas']['SchedulerJob'];

const API_KEY = 'http-upstream-test-api-key-0123456789';
const FIXTURES = resolve(import.meta.dirname, '../fixtures/yahoo');
const SYMBOLS = ['^IXIC', '^SOX', 'KOSPI-25.KS'];
/** Crypto never closes: its quotes live CACHE_TTL_SECONDS and the scheduler refreshes them every interval. */
const OPEN = 'BTC-USD';
const TIMEOUT_MS = 500;
const KEY = 'mds:v2:indices:yahoo:configured';
const UNAVAILABLE = 'Data source is temporarily unavailable, please retry later';

let redis: RedisProcess;
let client: Redis;
let upstream: FakeUpstream;
const services = new Set<TestService>();

async function boot(env: Record<string, string> = {}, options: { scheduler?: boolean } = {}): Promise<TestService> {
  const svc = await startTestService(
    {
      CACHE_URL: redis.url,
      API_KEYS: API_KEY,
      MARKET_DATA_PROVIDER: 'yahoo',
      MARKET_DATA_BASE_URL: upstream.baseUrl,
      MARKET_INDICES: SYMBOLS.join(','),
      MARKET_DATA_TIMEOUT_MS: String(TIMEOUT_MS),
      MARKET_DATA_BREAKER_RESET_SECONDS: '1',
      CACHE_TTL_SECONDS: '2',
      // The budget has its own tests (upstream-guard.test.ts); here every failure mode must reach the upstream at once.
      UPSTREAM_MAX_RPS: '0',
      ...env,
    },
    options,
  );
  services.add(svc);
  return svc;
}

interface Read {
  res: Response;
  body: Buffer;
  ms: number;
}

async function read(svc: TestService): Promise<Read> {
  const started = performance.now();
  const res = await svc.fetch('/api/indices');
  const body = Buffer.from(await res.arrayBuffer());
  const ms = performance.now() - started;
  expectDocumentedStatus(res, 'get', '/api/indices');
  return { res, body, ms };
}

function json<T>(r: Read): T {
  return JSON.parse(r.body.toString('utf8')) as T;
}

function expectUnavailable(r: Read): void {
  expect(r.res.status).toBe(503);
  expect(json(r)).toEqual({ success: false, error: UNAVAILABLE, code: 503, detail: UNAVAILABLE });
  expect(r.res.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
}

async function datasourceHealthy(svc: TestService): Promise<boolean> {
  const res = await svc.fetch('/api/health');
  expect(res.status).toBe(200);
  return ((await res.json()) as { datasource: boolean }).datasource;
}

async function refreshJob(svc: TestService): Promise<SchedulerJob | undefined> {
  const res = await svc.fetch('/api/admin/status', { headers: { 'X-API-Key': API_KEY } });
  expect(res.status).toBe(200);
  const body = (await res.json()) as components['schemas']['AdminStatusResponse'];
  return body.data.scheduler.jobs.find((j) => j.name === 'refresh-indices');
}

async function flush(svc: TestService): Promise<void> {
  const res = await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } });
  expect(res.status).toBe(200);
}

/** Polls GET /api/indices until it answers 200 (after the breaker's reset, a probe gets through). */
async function until200(svc: TestService, timeoutMs = 5_000): Promise<Read> {
  let last: Read | undefined;
  await waitFor(
    async () => {
      last = await read(svc);
      return last.res.status === 200;
    },
    { timeoutMs, intervalMs: 100, message: 'GET /api/indices to answer 200' },
  );
  return last as Read;
}

// ---- expected quotes, computed from the fixture files with the documented field mapping ----

interface Meta {
  regularMarketPrice: number;
  chartPreviousClose?: number;
  previousClose?: number;
  currency: string;
  longName?: string;
  shortName?: string;
  regularMarketTime: number;
  regularMarketDayHigh?: number;
  regularMarketDayLow?: number;
  regularMarketVolume?: number;
  priceHint?: number;
  instrumentType?: string;
  fullExchangeName?: string;
  exchangeName?: string;
  exchangeTimezoneName?: string;
}

interface Chart {
  chart: { result: Array<{ meta: Meta; indicators: { quote: Array<Record<'open' | 'high' | 'low' | 'volume', Array<number | null>>> } }> };
}

function fixtureOf(symbol: string): Chart {
  const candidates = [`chart-${encodeURIComponent(symbol)}.json`, `yahoo-chart-${symbol}-200.json`];
  for (const name of candidates) {
    try {
      return JSON.parse(readFileSync(resolve(FIXTURES, name), 'utf8')) as Chart;
    } catch {
      // try the other naming scheme
    }
  }
  throw new Error(`no fixture for ${symbol}`);
}

const round = (v: number, d: number) => Math.round(v * 10 ** d) / 10 ** d;
const pos = (v: number | null | undefined) => (typeof v === 'number' && v > 0 ? v : undefined);

function expectedQuote(symbol: string): Quote {
  const result = fixtureOf(symbol).chart.result[0];
  if (!result) throw new Error(`fixture of ${symbol} has no result`);
  const { meta } = result;
  const bars = result.indicators.quote[0] ?? { open: [], high: [], low: [], volume: [] };
  const d = meta.priceHint ?? 2;
  const positives = (values: Array<number | null>) => values.filter((v): v is number => pos(v) !== undefined);
  const barHigh = positives(bars.high);
  const barLow = positives(bars.low);
  const barOpen = positives(bars.open)[0];
  const barVolume = bars.volume.filter((v): v is number => typeof v === 'number' && v >= 0);
  const price = round(meta.regularMarketPrice, d);
  const prev = round((pos(meta.chartPreviousClose) ?? pos(meta.previousClose)) as number, d);
  const dayHigh = pos(meta.regularMarketDayHigh);
  const dayLow = pos(meta.regularMarketDayLow);
  return {
    symbol,
    name: meta.longName ?? meta.shortName ?? symbol,
    price,
    change: round(price - prev, d),
    change_percent: round(((price - prev) / prev) * 100, 2),
    open: barOpen === undefined ? null : round(barOpen, d),
    high: dayHigh !== undefined ? round(dayHigh, d) : barHigh.length > 0 ? round(Math.max(...barHigh), d) : null,
    low: dayLow !== undefined ? round(dayLow, d) : barLow.length > 0 ? round(Math.min(...barLow), d) : null,
    prev_close: prev,
    volume:
      typeof meta.regularMarketVolume === 'number' && meta.regularMarketVolume >= 0
        ? meta.regularMarketVolume
        : barVolume.length > 0
          ? Math.round(barVolume.reduce((a, b) => a + b, 0))
          : null,
    currency: meta.currency,
    timestamp: new Date(meta.regularMarketTime * 1000).toISOString(),
    exchange: meta.fullExchangeName ?? meta.exchangeName ?? '',
    instrument_type: meta.instrumentType === 'INDEX' ? 'index' : 'equity',
    timezone: meta.exchangeTimezoneName ?? 'UTC',
    // Recorded sessions are long over.
    market_state: 'closed',
  };
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
  upstream = await startFakeUpstream({ fixturesDir: FIXTURES });
});

afterEach(async () => {
  const errors: unknown[] = [];
  for (const svc of [...services]) {
    services.delete(svc);
    await svc.close().catch((err: unknown) => errors.push(err));
  }
  await upstream.close();
  if (errors.length > 0) throw errors[0];
});

describe('GET /api/indices from Yahoo (fake upstream), over a real socket', () => {
  it('when the upstream replays the fixtures, then the quotes carry their values, source yahoo and an ISO updated_at', async () => {
    const symbols = ['^IXIC', '^SOX', 'KOSPI-25.KS', '^SP500TR', 'AAPL'];
    const before = Date.now();
    const svc = await boot({ MARKET_INDICES: symbols.join(',') });

    const r = await read(svc);

    expect(r.res.status).toBe(200);
    const body = json<components['schemas']['IndicesResponse']>(r);
    expect(body.success).toBe(true);
    expect(body.source).toBe('yahoo');
    expect(body.updated_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(Date.parse(body.updated_at)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(body.updated_at)).toBeLessThanOrEqual(Date.now());
    expect(body.data).toEqual(symbols.map(expectedQuote));
    // Spot checks straight from the files, independent of the mapping above.
    expect(body.data[0]).toMatchObject({ symbol: '^IXIC', price: 19524.01 /* 19524.006 in the file, priceHint 2 */, prev_close: 19310.79, currency: 'USD', name: 'NASDAQ Composite' });
    expect(body.data[2]).toMatchObject({ symbol: 'KOSPI-25.KS', currency: 'KRW' });
    expect(body.data[2]?.high).not.toBe(0);
  });

  it('when one configured symbol is unknown upstream, then 200 with the others', async () => {
    const svc = await boot({ MARKET_INDICES: '^IXIC,NO-SUCH-SYMBOL.XX,^SOX' });

    const r = await read(svc);

    expect(r.res.status).toBe(200);
    expect(json<{ data: Quote[] }>(r).data.map((q) => q.symbol)).toEqual(['^IXIC', '^SOX']);
    expect(upstream.requestLog.some((q) => q.url.includes('NO-SUCH-SYMBOL.XX'))).toBe(true);
  });

  it('when the upstream fails in each way with nothing cached, then a prompt 503 with Retry-After, and 200 again after recovery', async () => {
    // A 429 pauses every upstream call for its Retry-After: keep it short so the next cases reach the upstream.
    upstream.setRetryAfterSeconds(1);
    const svc = await boot();
    const cases: Array<{ mode: FakeUpstreamMode; logged: RegExp; retryAfter?: string }> = [
      { mode: 'error500', logged: /HTTP 500/ },
      { mode: 'rate-limited', logged: /HTTP 429/, retryAfter: '1' },
      { mode: 'garbage', logged: /not JSON/ },
      { mode: 'unexpected', logged: /unexpected response shape|upstream error/ },
      { mode: 'hang', logged: new RegExp(`timed out after ${TIMEOUT_MS} ms`) },
      { mode: 'refuse', logged: /connection refused/ },
    ];

    for (const c of cases) {
      await upstream.setMode(c.mode);
      const calls = upstream.requests;
      const logsBefore = svc.logs.length;

      const failed = await read(svc);

      expectUnavailable(failed);
      expect(failed.ms, `${c.mode}: answered in ${failed.ms.toFixed(0)} ms`).toBeLessThanOrEqual(TIMEOUT_MS + 750);
      if (c.retryAfter) expect(failed.res.headers.get('retry-after')).toBe(c.retryAfter);
      if (c.mode !== 'refuse') expect(upstream.requests, `${c.mode}: the upstream was asked`).toBeGreaterThan(calls);
      const failure = svc.logs.slice(logsBefore).find((l) => l.msg === 'Market data source failed');
      expect(String(failure?.err), `${c.mode}: logged cause`).toMatch(c.logged);
      expect(await datasourceHealthy(svc)).toBe(false);

      await upstream.setMode('replay');
      const recovered = await until200(svc);
      expect(recovered.res.headers.get('x-cache')).toBe('MISS');
      expect(await datasourceHealthy(svc)).toBe(true);
      await flush(svc);
    }
  });

  it('when two instances miss at once while the upstream hangs, then the one waiting on the lock answers 503 without sitting out the lock wait', async () => {
    const a = await boot();
    const b = await boot();
    await upstream.setMode('hang');

    const reads = await Promise.all([read(a), read(b)]);

    // The waiter takes the lock once the holder gives up and asks the upstream itself: two timeouts at
    // most, not the 5 s lock wait.
    for (const r of reads) {
      expectUnavailable(r);
      expect(r.ms, `answered in ${r.ms.toFixed(0)} ms`).toBeLessThanOrEqual(2 * TIMEOUT_MS + 750);
    }
  });

  it('when the breaker has opened, then reads answer 503 at once without calling the upstream', async () => {
    const svc = await boot({ MARKET_DATA_BREAKER_RESET_SECONDS: '30' });
    await upstream.setMode('error500');
    for (let i = 0; i < 3; i++) expectUnavailable(await read(svc));
    await waitFor(() => svc.logs.some((l) => l.msg === 'Market data circuit breaker opened: failing fast until the next probe'), {
      message: 'the breaker to open',
    });
    const calls = upstream.requests;
    // Even an upstream that answers again is left alone until the reset.
    await upstream.setMode('replay');

    const reads: Read[] = [];
    for (let i = 0; i < 5; i++) reads.push(await read(svc));
    reads.push(...(await Promise.all(Array.from({ length: 10 }, () => read(svc)))));

    for (const r of reads) {
      expectUnavailable(r);
      expect(Number(r.res.headers.get('retry-after'))).toBeLessThanOrEqual(30);
      expect(r.ms).toBeLessThanOrEqual(250);
    }
    expect(upstream.requests).toBe(calls);
    expect(await datasourceHealthy(svc)).toBe(false);
  });

  it('when stale-if-error is on and the entry expired while the upstream fails, then 200 STALE with the last good body', async () => {
    const svc = await boot({ CACHE_TTL_SECONDS: '1', CACHE_STALE_IF_ERROR_SECONDS: '30', MARKET_INDICES: OPEN });
    const good = await read(svc);
    expect(good.res.headers.get('x-cache')).toBe('MISS');
    await upstream.setMode('error500');
    // One key holds the entry through its grace: its fresh end has passed once the store TTL is within the 30 s of grace.
    await waitFor(async () => (await client.pttl(KEY)) <= 30_000, { timeoutMs: 3_000, message: 'the cached entry to expire' });
    expect(await client.exists(KEY)).toBe(1);
    // The service's in-process copy ends with the entry, give or take the milliseconds between Redis's
    // clock and ours: a HIT in that moment is still a correct answer, so read until it has passed.
    let stale = await read(svc);
    await waitFor(
      async () => {
        if (stale.res.headers.get('x-cache') !== 'HIT') return true;
        stale = await read(svc);
        return false;
      },
      { timeoutMs: 2_000, message: 'the in-process copy to expire too' },
    );

    expect(stale.res.status).toBe(200);
    expect(stale.res.headers.get('x-cache')).toBe('STALE');
    expect(stale.body.equals(good.body)).toBe(true);
    expect(stale.res.headers.get('etag')).toBe(good.res.headers.get('etag'));
    expect(stale.res.headers.get('cache-control')).toBe('public, max-age=0');
  });

  it('when stale-if-error is off and the entry expired while the upstream fails, then 503', async () => {
    const svc = await boot({ CACHE_TTL_SECONDS: '1', CACHE_STALE_IF_ERROR_SECONDS: '0', MARKET_INDICES: OPEN });
    expect((await read(svc)).res.status).toBe(200);
    await upstream.setMode('error500');
    await waitFor(async () => (await client.exists(KEY)) === 0, { timeoutMs: 3_000, message: 'the cached entry to expire' });
    // As above: the in-process copy may outlive the entry by a few milliseconds.
    let after = await read(svc);
    await waitFor(
      async () => {
        if (after.res.headers.get('x-cache') !== 'HIT') return true;
        after = await read(svc);
        return false;
      },
      { timeoutMs: 2_000, message: 'the in-process copy to expire too' },
    );

    expectUnavailable(after);
  });
});

describe('the refresh scheduler', () => {
  it('when REFRESH_INTERVAL_SECONDS=1, then it refreshes without readers, reports its runs, and survives a failing upstream', async () => {
    const svc = await boot({ REFRESH_INTERVAL_SECONDS: '1', CACHE_TTL_SECONDS: '5', MARKET_INDICES: OPEN }, { scheduler: true });

    await waitFor(() => upstream.requests >= 2, { timeoutMs: 5_000, message: 'two scheduled refreshes' });
    const hit = await read(svc);
    expect(hit.res.status).toBe(200);
    expect(hit.res.headers.get('x-cache')).toBe('HIT');
    const job = await refreshJob(svc);
    expect(job).toMatchObject({ name: 'refresh-indices', interval_s: 1, last_result: 'ok' });
    expect(Date.parse(job?.last_run_at ?? '')).not.toBeNaN();
    expect(Date.parse(job?.next_run_at ?? '')).toBeGreaterThan(Date.parse(job?.last_run_at ?? ''));
    // The run's lock is the provider's own, so instances of another provider on this Redis refresh theirs.
    let locks: string[] = [];
    await waitFor(async () => (locks = await client.keys('mds:v1:lock:job:*')).includes('mds:v1:lock:job:yahoo:refresh-indices'), { timeoutMs: 3_000, intervalMs: 50, message: 'a run holding its lock' });
    // The history retention job's lock may be held beside it (it runs once at start).
    expect(locks.filter((lock) => !lock.startsWith('mds:v1:lock:job:yahoo:'))).toEqual([]);

    await upstream.setMode('error500');
    await waitFor(async () => (await refreshJob(svc))?.last_result === 'failed', { timeoutMs: 10_000, intervalMs: 100, message: 'a failed run' });
    expect((await refreshJob(svc))?.last_error).toEqual(expect.any(String));

    await upstream.setMode('replay');
    const calls = upstream.requests;
    await waitFor(async () => upstream.requests >= calls + 2 && (await refreshJob(svc))?.last_result === 'ok', {
      timeoutMs: 15_000,
      intervalMs: 100,
      message: 'scheduled refreshes to reach the upstream again',
    });
  });

  it('when two instances share one Redis, then about one refresh per interval reaches the upstream in total', async () => {
    const env = { REFRESH_INTERVAL_SECONDS: '1', CACHE_TTL_SECONDS: '60', MARKET_INDICES: OPEN };
    const a = await boot(env, { scheduler: true });
    const b = await boot(env, { scheduler: true });
    await waitFor(async () => (await refreshJob(a))?.last_run_at != null && (await refreshJob(b))?.last_run_at != null, {
      timeoutMs: 5_000,
      intervalMs: 100,
      message: 'both schedulers to run',
    });

    const windowS = 4;
    const calls = upstream.requests;
    const end = Date.now() + windowS * 1000;
    let skippedSeen = false;
    // Watching the window pass: a job that lost the lock reports 'skipped', proving both schedulers ran.
    await waitFor(
      async () => {
        const results = [(await refreshJob(a))?.last_result, (await refreshJob(b))?.last_result];
        skippedSeen ||= results.includes('skipped');
        return Date.now() >= end;
      },
      { timeoutMs: windowS * 1000 + 2_000, intervalMs: 200, message: 'the observation window to pass' },
    );
    const refreshes = upstream.requests - calls;

    expect(skippedSeen).toBe(true);
    // One instance refreshing per interval: about windowS; both refreshing every interval would be 2 * windowS.
    expect(refreshes).toBeLessThanOrEqual(windowS + 1);
    expect(refreshes).toBeGreaterThanOrEqual(windowS - 2);
  });
});
