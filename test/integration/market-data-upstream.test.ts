/**
 * What the upstream sees when the service is used over a real socket: the Yahoo provider behind the
 * whole service, against the fake upstream replaying the recorded responses of
 * test/fixtures/yahoo/recorded (values below are read from those files, not from the parser), and a
 * redis-server this file owns. Calls per key across requests and instances, unknown symbols and the
 * breaker, the upstream budget, history and search.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { schemaViolations } from '../helpers/contract-schema.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const FIXTURES = resolve(import.meta.dirname, '../fixtures/yahoo');
const API_KEY = 'market-data-upstream-test-api-key-0123456789';

interface Recording {
  response: { body: Record<string, unknown> };
}

function recorded(name: string): Recording {
  return JSON.parse(readFileSync(resolve(FIXTURES, 'recorded', name), 'utf8')) as Recording;
}

let redis: RedisProcess;
let client: Redis;
let upstream: FakeUpstream;
const services = new Set<TestService>();

async function boot(env: Record<string, string> = {}): Promise<TestService> {
  const svc = await startTestService({
    CACHE_URL: redis.url,
    API_KEYS: API_KEY,
    MARKET_DATA_PROVIDER: 'yahoo',
    MARKET_DATA_BASE_URL: upstream.baseUrl,
    MARKET_INDICES: 'AAPL',
    MARKET_DATA_TIMEOUT_MS: '2000',
    UPSTREAM_MAX_RPS: '0',
    ...env,
  });
  services.add(svc);
  return svc;
}

function chartCalls(symbol: string): number {
  const path = `/v8/finance/chart/${encodeURIComponent(symbol)}`;
  return upstream.requestLog.filter((r) => r.url === path || r.url.startsWith(`${path}?`)).length;
}

async function getJson<T>(svc: TestService, path: string): Promise<{ res: Response; body: T }> {
  const res = await svc.fetch(path);
  return { res, body: (await res.json()) as T };
}

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis({ port: redis.port, host: '127.0.0.1', lazyConnect: true });
  await client.connect();
  upstream = await startFakeUpstream({ fixturesDir: FIXTURES, retryAfterSeconds: 1 });
});
afterAll(async () => {
  client?.disconnect();
  await upstream?.close();
  await redis?.stop();
});
beforeEach(async () => {
  await client.flushall();
  await upstream.setMode('replay');
  upstream.setNotFound([]);
  upstream.setLatencyMs(0);
});
afterEach(async () => {
  for (const svc of services) await svc.close();
  services.clear();
});

describe('one upstream call per key', () => {
  it('when 40 clients read one cold quote at once, then the upstream is asked once and all get the same bytes', async () => {
    const svc = await boot();
    upstream.setLatencyMs(150);
    const before = chartCalls('AAPL');

    const answers = await Promise.all(Array.from({ length: 40 }, () => svc.fetch('/api/quotes/AAPL').then(async (r) => ({ status: r.status, etag: r.headers.get('etag'), body: await r.text() }))));

    expect(chartCalls('AAPL') - before).toBe(1);
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.body).toBe(answers[0]?.body);
      expect(a.etag).toBe(answers[0]?.etag);
    }
  });

  it('when two instances sharing one Redis read the same cold keys at once, then one upstream call per key between them', async () => {
    const a = await boot();
    const b = await boot();
    upstream.setLatencyMs(150);
    const paths = ['/api/quotes/AAPL', '/api/quotes?symbols=AAPL,BTC-USD', '/api/quotes/btc-usd'];
    const before = { aapl: chartCalls('AAPL'), btc: chartCalls('BTC-USD') };

    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).fetch(paths[i % paths.length]!).then((r) => r.status)));

    expect(answers.every((s) => s === 200)).toBe(true);
    expect(chartCalls('AAPL') - before.aapl).toBe(1);
    expect(chartCalls('BTC-USD') - before.btc).toBe(1);
  });
});

describe('unknown symbols', () => {
  it('when the upstream answers 404 for a run of unknown symbols, then each is a 404 envelope, the breaker stays closed and a known symbol answers at once', async () => {
    const svc = await boot();
    for (let i = 0; i < 12; i++) {
      const { res, body } = await getJson<{ code: number; error: string }>(svc, `/api/quotes/NOSUCH${i}`);
      expect(res.status).toBe(404);
      expect(body).toMatchObject({ code: 404, error: `Unknown symbol 'NOSUCH${i}'` });
    }
    const started = Date.now();
    const known = await svc.fetch('/api/quotes/AAPL');
    expect(known.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(svc.logs.some((l) => typeof l.msg === 'string' && l.msg.includes('circuit breaker opened'))).toBe(false);
    const health = (await (await svc.fetch('/api/health')).json()) as { datasource: boolean };
    expect(health.datasource).toBe(true);
  });

  it('when an unknown symbol is asked for again, then the cached answer says so without another upstream call', async () => {
    const svc = await boot();
    expect((await svc.fetch('/api/quotes/NOSUCHX')).status).toBe(404);
    const calls = chartCalls('NOSUCHX');
    expect((await svc.fetch('/api/quotes/nosuchx')).status).toBe(404);
    expect(chartCalls('NOSUCHX')).toBe(calls);
  });
});

describe('the upstream budget', () => {
  it('when a batch of 30 cold symbols arrives with UPSTREAM_MAX_RPS=5, then the upstream never sees more than 5 requests in one second, nor more than UPSTREAM_MAX_CONCURRENCY at once', async () => {
    const svc = await boot({ UPSTREAM_MAX_RPS: '5', UPSTREAM_MAX_CONCURRENCY: '2', MARKET_DATA_TIMEOUT_MS: '10000' });
    upstream.resetPeakInFlight();
    upstream.setLatencyMs(50);
    const first = upstream.requestLog.length;
    const symbols = Array.from({ length: 30 }, (_, i) => `COLD${i}`);

    const res = await svc.fetch(`/api/quotes?symbols=${symbols.join(',')}`);

    expect(res.status).toBe(404);
    const arrivals = upstream.requestLog.slice(first);
    expect(arrivals.length).toBe(30);
    const perSecond = new Map<number, number>();
    for (const r of arrivals) perSecond.set(Math.floor(r.at / 1000), (perSecond.get(Math.floor(r.at / 1000)) ?? 0) + 1);
    expect(Math.max(...perSecond.values())).toBeLessThanOrEqual(5);
    expect(upstream.peakInFlight).toBeLessThanOrEqual(2);
  }, 30_000);
});

describe('history from the recorded chart responses', () => {
  it('when the AAPL daily window of the recording is asked for, then 49 candles from 127.58, prices without float32 noise, the 4:1 split and the dividend', async () => {
    const svc = await boot();
    const file = recorded('yahoo-chart-AAPL-1d-2020-08-31-to-2020-11-07.json').response.body as {
      chart: { result: Array<{ timestamp: number[]; events: { dividends: Record<string, { amount: number; date: number }>; splits: Record<string, { date: number; numerator: number; denominator: number }> } }> };
    };
    const result = file.chart.result[0]!;

    const { res, body } = await getJson<{ data: { symbol: string; currency: string; timezone: string; candles: Array<{ time: string; open: number; close: number }>; events: { dividends: Array<{ time: string; amount: number }>; splits: Array<{ time: string; numerator: number; denominator: number }> } } }>(
      svc,
      '/api/history/AAPL?interval=1d&start=2020-08-31&end=2020-11-07',
    );

    expect(res.status).toBe(200);
    expect(schemaViolations('HistoryResponse', body)).toEqual([]);
    expect(body.data.candles).toHaveLength(result.timestamp.length);
    expect(body.data.candles).toHaveLength(49);
    expect(body.data.candles[0]?.open).toBe(127.58);
    expect(body.data.candles[0]?.time).toBe(new Date(result.timestamp[0]! * 1000).toISOString());
    for (const c of body.data.candles) expect(String(c.open).replace(/^\d+\.?/, '').length).toBeLessThanOrEqual(4);
    expect(body.data.timezone).toBe('America/New_York');
    const [split] = Object.values(result.events.splits);
    expect(body.data.events.splits).toEqual([{ time: new Date(split!.date * 1000).toISOString(), numerator: 4, denominator: 1 }]);
    expect(body.data.events.splits[0]?.time.startsWith('2020-08-31')).toBe(true);
    const [dividend] = Object.values(result.events.dividends);
    expect(body.data.events.dividends).toEqual([{ time: new Date(dividend!.date * 1000).toISOString(), amount: dividend!.amount }]);
  });

  it('when the recorded weekend of 1m bars is asked for, then 422: 1m bars reach back 30 days, so no upstream is asked (the provider test maps that recording to no candles)', async () => {
    const svc = await boot();
    const { res, body } = await getJson<{ violations: Array<{ path: string; message: string }> }>(svc, '/api/history/AAPL?interval=1m&start=2025-02-01&end=2025-02-02');
    expect(res.status).toBe(422);
    expect(body.violations).toEqual([expect.objectContaining({ path: 'query.start', message: expect.stringMatching(/^1m candles reach back 30 days at most/) })]);
  });

  it('when the BTC-USD recording is asked for, then it keeps its UTC zone', async () => {
    const svc = await boot();
    const { res, body } = await getJson<{ data: { timezone: string; candles: unknown[] } }>(svc, '/api/history/BTC-USD?interval=1d&start=2020-01-01&end=2020-01-03');
    expect(res.status).toBe(200);
    expect(body.data.timezone).toBe('UTC');
    expect(body.data.candles.length).toBeGreaterThan(0);
  });

  it('when the symbol is unknown upstream, then 404 and the breaker stays closed', async () => {
    const svc = await boot();
    for (let i = 0; i < 5; i++) expect((await svc.fetch(`/api/history/GONE${i}?range=5d`)).status).toBe(404);
    expect((await svc.fetch('/api/history/AAPL?interval=1d&start=2020-08-31&end=2020-11-07')).status).toBe(200);
    expect(svc.logs.some((l) => typeof l.msg === 'string' && l.msg.includes('circuit breaker opened'))).toBe(false);
  });
});

describe('search from the recorded responses', () => {
  it('when searching by ticker, then the recorded quotes come back with instrument types mapped and options left out', async () => {
    const svc = await boot();
    const quotes = (recorded('yahoo-search-AAPL.json').response.body as { quotes: Array<{ symbol?: string; quoteType?: string }> }).quotes;

    const { res, body } = await getJson<{ data: Array<{ symbol: string; instrument_type: string; exchange: string }> }>(svc, '/api/search?q=AAPL&limit=6');

    expect(res.status).toBe(200);
    expect(schemaViolations('SearchResponse', body)).toEqual([]);
    const expected = quotes.filter((q) => q.symbol && (q.quoteType === 'EQUITY' || q.quoteType === 'ETF')).map((q) => q.symbol);
    expect(body.data.map((r) => r.symbol)).toEqual(expected);
    expect(body.data[0]).toMatchObject({ symbol: 'AAPL', instrument_type: 'equity', exchange: 'NASDAQ' });
    expect(body.data.find((r) => r.symbol === 'AAPU')?.instrument_type).toBe('etf');
  });

  it('when searching by company name, then the listings on several exchanges come back', async () => {
    const svc = await boot();
    const quotes = (recorded('yahoo-search-bmw-by-name.json').response.body as { quotes: Array<{ symbol: string }> }).quotes;

    const { res, body } = await getJson<{ data: Array<{ symbol: string; name: string; instrument_type: string }> }>(svc, `/api/search?q=${encodeURIComponent('Bayerische Motoren Werke AG')}&limit=6`);

    expect(res.status).toBe(200);
    expect(body.data.map((r) => r.symbol)).toEqual(quotes.map((q) => q.symbol));
    expect(body.data.every((r) => r.instrument_type === 'equity')).toBe(true);
    expect(body.data[0]?.name).toMatch(/Bayerische Motoren Werke/);
  });

  it('when searched again, then it is a HIT without another upstream call', async () => {
    const svc = await boot();
    await svc.fetch('/api/search?q=AAPL&limit=6');
    const calls = upstream.requestLog.length;
    const again = await svc.fetch('/api/search?q=AAPL&limit=6');
    expect(again.headers.get('x-cache')).toBe('HIT');
    expect(upstream.requestLog.length).toBe(calls);
  });
});
