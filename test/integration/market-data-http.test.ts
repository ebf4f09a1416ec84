/**
 * Quotes of any symbol, history, search and the calendar over a real socket: the whole service with
 * the simulated provider, against a redis-server this file owns. What the upstream sees (calls per
 * key, unknown symbols, the budget) is in market-data-upstream.test.ts.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { schemaViolations } from '../helpers/contract-schema.js';
import { expectDocumentedStatus } from '../helpers/contract-status.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const API_KEY = 'market-data-http-test-api-key-0123456789';
const DAY_MS = 86_400_000;
/** The date (YYYY-MM-DD, UTC) `days` days before now. */
const daysAgo = (days: number) => new Date(Date.now() - days * DAY_MS).toISOString().slice(0, 10);

interface Envelope {
  success: false;
  error: string;
  code: number;
  detail: string;
  violations?: Array<{ path: string; message: string }>;
}

let redis: RedisProcess;
let client: Redis;
let svc: TestService;

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis({ port: redis.port, host: '127.0.0.1', lazyConnect: true });
  await client.connect();
  svc = await startTestService({ CACHE_URL: redis.url, API_KEYS: API_KEY });
});
afterAll(async () => {
  await svc?.close();
  client?.disconnect();
  await redis?.stop();
});
beforeEach(async () => {
  const res = await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } });
  expect(res.status).toBe(200);
});

async function get(path: string, headers: Record<string, string> = {}) {
  const res = await svc.fetch(path, { headers });
  const body = Buffer.from(await res.arrayBuffer());
  return { res, body, text: body.toString('utf8') };
}

function json<T>(r: { text: string }): T {
  return JSON.parse(r.text) as T;
}

function expectEnvelope(r: { res: Response; text: string }, status: number, message: string | RegExp): Envelope {
  expect(r.res.status).toBe(status);
  const body = json<Envelope>(r);
  expect(body.success).toBe(false);
  expect(body.code).toBe(status);
  expect(body.detail).toBe(body.error);
  if (typeof message === 'string') expect(body.error).toBe(message);
  else expect(body.error).toMatch(message);
  return body;
}

describe('GET /api/quotes', () => {
  it('when several symbols are asked for, then the quotes come in request order and unknown ones are listed in missing', async () => {
    const r = await get('/api/quotes?symbols=MSFT,nosuch,aapl,^GSPC');

    expect(r.res.status).toBe(200);
    const body = json<{ data: Array<{ symbol: string }>; missing: string[]; source: string }>(r);
    expect(body.data.map((q) => q.symbol)).toEqual(['MSFT', 'AAPL', '^GSPC']);
    expect(body.missing).toEqual(['NOSUCH']);
    expect(body.source).toBe('simulated');
    expect(schemaViolations('QuotesResponse', body)).toEqual([]);
  });

  it('when no symbol of the batch is known, then 404 in the envelope', async () => {
    const r = await get('/api/quotes?symbols=NOSUCH1,NOSUCH2');
    expectEnvelope(r, 404, 'None of the symbols is known: NOSUCH1, NOSUCH2');
    expectDocumentedStatus(r.res, 'get', '/api/quotes');
  });

  it.each([
    ['a malformed symbol', '/api/quotes?symbols=AAPL,MS%24FT', 'query.symbols'],
    ['a symbol of 33 characters', `/api/quotes?symbols=${'A'.repeat(33)}`, 'query.symbols'],
    ['more than 50 symbols', `/api/quotes?symbols=${Array.from({ length: 51 }, (_, i) => `S${i}`).join(',')}`, 'query.symbols'],
    ['an empty list', '/api/quotes?symbols=', 'query.symbols'],
    ['no list at all', '/api/quotes', 'query.symbols'],
    ['a repeated symbol, case aside', '/api/quotes?symbols=AAPL,msft,aapl', 'query.symbols'],
    ['an unknown parameter', '/api/quotes?symbols=AAPL&format=csv', 'query.format'],
  ])('when the request has %s, then 422 naming the parameter', async (_what, path, violation) => {
    const r = await get(path);
    const body = expectEnvelope(r, 422, /^Invalid request parameters: /);
    expect(body.violations?.map((v) => v.path)).toContain(violation);
    // The rule in words, never the contract's regular expression.
    expect(r.text).not.toContain('[A-Za-z0-9');
  });

  it('when a symbol list or a symbol breaks the pattern, then the violation says the rule in words', async () => {
    for (const path of ['/api/quotes?symbols=AAPL,,MSFT', '/api/quotes?symbols=AAPL,', '/api/stream?symbols=A%20B']) {
      const body = expectEnvelope(await get(path), 422, /^Invalid request parameters: /);
      expect(body.violations, path).toEqual([{ path: 'query.symbols', message: 'must be 1 to 50 symbols separated by commas (no empty one, no space), each 1 to 32 of A-Z a-z 0-9 ^ . = - (not starting with a dot)' }]);
    }
    const one = expectEnvelope(await get('/api/history/A%20B'), 422, /^Invalid request parameters: /);
    expect(one.violations).toEqual([{ path: 'path.symbol', message: 'must be a symbol of 1 to 32 of A-Z a-z 0-9 ^ . = - (not starting with a dot)' }]);
  });

  it('when the batch is read twice, then the second is a HIT with identical bytes and ETag, and If-None-Match gets 304', async () => {
    const path = '/api/quotes?symbols=AAPL,MSFT';
    const first = await get(path);
    const second = await get(path);

    expect(first.res.headers.get('x-cache')).toBe('MISS');
    expect(second.res.headers.get('x-cache')).toBe('HIT');
    expect(second.body.equals(first.body)).toBe(true);
    expect(second.res.headers.get('etag')).toBe(first.res.headers.get('etag'));
    const revalidated = await get(path, { 'If-None-Match': first.res.headers.get('etag') ?? '' });
    expect(revalidated.res.status).toBe(304);
    expect(revalidated.body.length).toBe(0);
  });
});

describe('GET /api/quotes/{symbol}', () => {
  it('when aapl and then AAPL are read, then they share one cache entry: the second is a HIT with the same ETag', async () => {
    const lower = await get('/api/quotes/aapl');
    const upper = await get('/api/quotes/AAPL');

    expect(lower.res.status).toBe(200);
    expect(lower.res.headers.get('x-cache')).toBe('MISS');
    expect(upper.res.headers.get('x-cache')).toBe('HIT');
    expect(upper.res.headers.get('etag')).toBe(lower.res.headers.get('etag'));
    expect(await client.keys('mds:v2:quote:*')).toEqual(['mds:v2:quote:simulated:AAPL']);
    const body = json<{ data: Record<string, unknown> }>(upper);
    expect(body.data).toMatchObject({ symbol: 'AAPL', instrument_type: 'equity', timezone: 'America/New_York' });
    expect(['open', 'closed', 'pre', 'post']).toContain(body.data.market_state);
    expect(schemaViolations('QuoteResponse', body)).toEqual([]);
  });

  it('when a quote was read by itself, then a batch and the next single read reuse its entry', async () => {
    const kindsNow = async () => {
      const status = await svc.fetch('/api/admin/status', { headers: { 'X-API-Key': API_KEY } });
      return ((await status.json()) as { data: { cache: { kinds: Record<string, { hits: number; misses: number }> } } }).data.cache.kinds;
    };
    const before = await kindsNow();
    const single = await get('/api/quotes/MSFT');
    const batch = await get('/api/quotes?symbols=MSFT');
    const quote = json<{ data: unknown }>(single).data;

    expect(json<{ data: unknown[] }>(batch).data).toEqual([quote]);
    const after = await kindsNow();
    expect((after.quote?.misses ?? 0) - (before.quote?.misses ?? 0)).toBe(1);
    expect((after.quote?.hits ?? 0) - (before.quote?.hits ?? 0)).toBe(1);
    // Nothing was fetched for the batch: a HIT; one with a symbol not yet cached is a MISS.
    expect(batch.res.headers.get('x-cache')).toBe('HIT');
    const mixed = await get('/api/quotes?symbols=MSFT,NVDA');
    expect(mixed.res.headers.get('x-cache')).toBe('MISS');
  });

  it('when the symbol is unknown, then 404 in the envelope naming it', async () => {
    expectEnvelope(await get('/api/quotes/nosuch'), 404, "Unknown symbol 'NOSUCH'");
  });

  it('when the symbol breaks the contract, then 422', async () => {
    const body = expectEnvelope(await get('/api/quotes/AA%20PL'), 422, /^Invalid request parameters: /);
    expect(body.violations?.[0]?.path).toBe('path.symbol');
  });

  it('when the market state is known, then Cache-Control max-age follows it: CACHE_TTL_SECONDS while trading, up to the next open (at most an hour) while closed', async () => {
    const crypto = await get('/api/quotes/BTC-USD');
    expect(json<{ data: { market_state: string } }>(crypto).data.market_state).toBe('open');
    const cryptoAge = Number(/max-age=(\d+)/.exec(crypto.res.headers.get('cache-control') ?? '')?.[1]);
    expect(cryptoAge).toBeLessThanOrEqual(svc.config.cache.ttlMs / 1000);
    expect(cryptoAge).toBeGreaterThanOrEqual(svc.config.cache.ttlMs / 1000 - 1);

    const markets = json<{ data: Array<{ market: string; state: string; next_open: string | null }> }>(await get('/api/markets')).data;
    const us = markets.find((m) => m.market === 'US');
    const stock = await get('/api/quotes/AAPL');
    const age = Number(/max-age=(\d+)/.exec(stock.res.headers.get('cache-control') ?? '')?.[1]);
    if (us?.state === 'closed' && us.next_open !== null) {
      const untilOpen = Math.floor((Date.parse(us.next_open) - Date.now()) / 1000);
      expect(age).toBeLessThanOrEqual(3600);
      expect(age).toBeGreaterThanOrEqual(Math.min(3600, Math.max(svc.config.cache.ttlMs / 1000, untilOpen)) - 2);
    } else {
      expect(age).toBeLessThanOrEqual(svc.config.cache.ttlMs / 1000);
    }
  });
});

describe('GET /api/history/{symbol}', () => {
  it('when daily candles of a year are asked for, then they ascend, hold no weekend bar, keep low <= open, close <= high, and end at the quote price', async () => {
    const r = await get('/api/history/aapl?interval=1d&range=1y');
    expect(r.res.status).toBe(200);
    const body = json<{ data: { symbol: string; timezone: string; interval: string; candles: Array<{ time: string; open: number; high: number; low: number; close: number }> } }>(r);
    expect(schemaViolations('HistoryResponse', body)).toEqual([]);
    const { candles } = body.data;
    expect(body.data).toMatchObject({ symbol: 'AAPL', timezone: 'America/New_York', interval: '1d' });
    expect(candles.length).toBeGreaterThan(240);
    expect(candles.length).toBeLessThan(265);
    for (let i = 1; i < candles.length; i++) expect(Date.parse(candles[i]!.time)).toBeGreaterThan(Date.parse(candles[i - 1]!.time));
    for (const c of candles) {
      const weekday = new Date(Date.parse(c.time)).getUTCDay();
      expect(weekday === 0 || weekday === 6, `weekend bar at ${c.time}`).toBe(false);
      expect(c.low).toBeLessThanOrEqual(Math.min(c.open, c.close));
      expect(c.high).toBeGreaterThanOrEqual(Math.max(c.open, c.close));
    }
    const quote = json<{ data: { price: number } }>(await get('/api/quotes/AAPL')).data;
    expect(candles.at(-1)?.close).toBe(quote.price);
  });

  it('when the same history is asked for twice, then the bytes are the same and the second is a HIT', async () => {
    const first = await get('/api/history/MSFT?interval=1wk&range=6mo');
    const second = await get('/api/history/MSFT?interval=1wk&range=6mo');
    expect(second.res.headers.get('x-cache')).toBe('HIT');
    expect(second.body.equals(first.body)).toBe(true);
  });

  it('when crypto is asked for, then it has weekend bars', async () => {
    const r = await get('/api/history/BTC-USD?interval=1d&range=1mo');
    const candles = json<{ data: { candles: Array<{ time: string }> } }>(r).data.candles;
    expect(candles.some((c) => [0, 6].includes(new Date(Date.parse(c.time)).getUTCDay()))).toBe(true);
  });

  it.each([
    ['range and start together', '/api/history/AAPL?range=1mo&start=2026-01-01', 'query.range', /cannot be combined with start/],
    ['end without start', '/api/history/AAPL?end=2026-01-01', 'query.end', /needs a start/],
    ['end before start', '/api/history/AAPL?start=2026-02-01&end=2026-01-01', 'query.end', /must be after start/],
    ['1m beyond 7 days', '/api/history/AAPL?interval=1m&range=1mo', 'query.interval', /1m candles cover at most 7 days/],
    ['1m over a 10-day window', '/api/history/AAPL?interval=1m&start=2026-01-01&end=2026-01-11', 'query.interval', /1m candles cover at most 7 days/],
    ['1m starting over 30 days ago', `/api/history/AAPL?interval=1m&start=${daysAgo(40)}&end=${daysAgo(38)}`, 'query.start', /1m candles reach back 30 days at most/],
    ['5m starting over 60 days ago', '/api/history/AAPL?interval=5m&start=2020-01-01&end=2020-01-10', 'query.start', /5m candles reach back 60 days at most/],
    ['intraday beyond 60 days', '/api/history/AAPL?interval=5m&range=3mo', 'query.interval', /intraday candles \(5m\) cover at most 60 days/],
    ['more than 5,000 candles', '/api/history/BTC-USD?interval=5m&range=1mo', 'query.interval', /more than the 5000 one answer carries/],
    ['an interval outside the enum', '/api/history/AAPL?interval=2d', 'query.interval', /must be equal to one of the allowed values/],
    ['a date that is not ISO 8601', '/api/history/AAPL?start=2026-1-2', 'query.start', /must match pattern/],
    ['a first-century end before its start', '/api/history/AAPL?start=0001-02-01&end=0001-01-01', 'query.end', /must be after start/],
    ['5m candles in the year 0099', '/api/history/AAPL?interval=5m&start=0099-01-01&end=0099-01-02', 'query.start', /5m candles reach back 60 days at most/],
  ])('when the query has %s, then 422 naming the rule', async (_what, path, violation, message) => {
    const body = expectEnvelope(await get(path), 422, /^Invalid request parameters: /);
    const found = body.violations?.find((v) => v.path === violation);
    expect(found, JSON.stringify(body.violations)).toBeDefined();
    expect(found?.message).toMatch(message);
  });

  it('when the symbol is unknown, then 404', async () => {
    expectEnvelope(await get('/api/history/NOSUCH?range=5d'), 404, "Unknown symbol 'NOSUCH'");
  });

  it('when the window lies in years 0001 to 0099, then it is read as those years (not 19xx) and answered', async () => {
    // Until now: every bar the upstream has, from the first century on.
    const open = await get('/api/history/AAPL?start=0001-01-01');
    expect(open.res.status, open.body.toString()).toBe(200);
    expect(json<{ data: { candles: unknown[] } }>(open).data.candles.length).toBeGreaterThan(0);
    for (const path of ['/api/history/AAPL?start=0001-01-01&end=0001-02-01', '/api/history/AAPL?start=0099-12-01T00:00:00Z&end=0099-12-31T00:00:00Z']) {
      const r = await get(path);
      expect(r.res.status, `${path}: ${r.body.toString()}`).toBe(200);
      const data = json<{ data: { interval: string; candles: Array<{ time: string }> } }>(r).data;
      expect(data.interval).toBe('1d');
      // Nothing traded in the first century.
      expect(data.candles).toEqual([]);
    }
  });

  it('when start and end are date-times typed with plain colons, then they are taken as they are', async () => {
    const start = new Date(Date.now() - 3 * DAY_MS).toISOString().slice(0, 19) + 'Z';
    const end = new Date(Date.now() - 1 * DAY_MS).toISOString().slice(0, 19) + 'Z';
    const r = await get(`/api/history/BTC-USD?interval=1h&start=${start}&end=${end}`);
    expect(r.res.status, r.body.toString()).toBe(200);
    const candles = json<{ data: { candles: Array<{ time: string }> } }>(r).data.candles;
    expect(candles.length).toBeGreaterThan(40);
    expect(Date.parse(candles[0]!.time)).toBeGreaterThanOrEqual(Date.parse(start));
    expect(Date.parse(candles.at(-1)!.time)).toBeLessThan(Date.parse(end));
    // A 5m window of the last 60 days is still served.
    expect((await get(`/api/history/BTC-USD?interval=5m&start=${daysAgo(50)}&end=${daysAgo(49)}`)).res.status).toBe(200);
  });
});

describe('GET /api/search', () => {
  it('when the query is a ticker, then the exact symbol comes first, then symbol prefixes, then names', async () => {
    const r = await get('/api/search?q=AAPL');
    expect(r.res.status).toBe(200);
    const body = json<{ data: Array<{ symbol: string; name: string; instrument_type: string }> }>(r);
    expect(schemaViolations('SearchResponse', body)).toEqual([]);
    expect(body.data[0]).toMatchObject({ symbol: 'AAPL', instrument_type: 'equity' });
  });

  it('when the query is a name word, then instruments with that word in their name are found', async () => {
    const body = json<{ data: Array<{ symbol: string; name: string }> }>(await get('/api/search?q=apple&limit=3'));
    expect(body.data.length).toBeGreaterThan(0);
    expect(body.data.length).toBeLessThanOrEqual(3);
    expect(body.data[0]?.symbol).toBe('AAPL');
  });

  it('when nothing matches, then 200 with an empty list', async () => {
    const r = await get('/api/search?q=zzzzqqqq');
    expect(r.res.status).toBe(200);
    expect(json<{ data: unknown[] }>(r).data).toEqual([]);
  });

  it.each([
    ['an empty q', '/api/search?q=', 'query.q'],
    ['a q of 65 characters', `/api/search?q=${'a'.repeat(65)}`, 'query.q'],
    ['a limit of 26', '/api/search?q=a&limit=26', 'query.limit'],
    ['a limit of 0', '/api/search?q=a&limit=0', 'query.limit'],
  ])('when the request has %s, then 422', async (_what, path, violation) => {
    const body = expectEnvelope(await get(path), 422, /^Invalid request parameters: /);
    expect(body.violations?.map((v) => v.path)).toContain(violation);
  });
});

describe('GET /api/markets', () => {
  it('when read, then every market has a state and, unless it never closes, a next open and close in the future', async () => {
    const r = await get('/api/markets');
    expect(r.res.status).toBe(200);
    const body = json<{ data: Array<{ market: string; state: string; next_open: string | null; next_close: string | null }> }>(r);
    expect(schemaViolations('MarketsResponse', body)).toEqual([]);
    expect(body.data.map((m) => m.market)).toEqual(['US', 'UK', 'DE', 'EU', 'JP', 'HK', 'CN', 'CRYPTO', 'FX']);
    const crypto = body.data.find((m) => m.market === 'CRYPTO');
    expect(crypto).toMatchObject({ state: 'open', next_open: null, next_close: null });
    for (const m of body.data.filter((x) => x.market !== 'CRYPTO')) {
      expect(Date.parse(m.next_open ?? '')).toBeGreaterThan(Date.now() - 1000);
      expect(Date.parse(m.next_close ?? '')).toBeGreaterThan(Date.now() - 1000);
    }
    expect(r.res.headers.get('cache-control')).toMatch(/^public, max-age=\d+$/);
  });
});

describe('the fast path for any cached public GET', () => {
  afterEach(() => {
    svc.logs.length = 0;
  });

  function loggedRequests(url: string): number {
    return svc.logs.filter((l) => (l.req as { url?: string } | undefined)?.url === url && l.msg === 'request completed').length;
  }

  it('when a validated target is read again within a second, then it is answered before Express (no request log line) with the same bytes', async () => {
    const path = '/api/quotes?symbols=AAPL,MSFT';
    const first = await get(path);
    expect(first.res.status).toBe(200);
    const reads = [];
    for (let i = 0; i < 20; i++) reads.push(await get(path));

    for (const r of reads) {
      expect(r.res.status).toBe(200);
      expect(r.body.equals(first.body)).toBe(true);
      expect(r.res.headers.get('x-request-id')).toMatch(/\S/);
      expect(schemaViolations('QuotesResponse', json(r))).toEqual([]);
    }
    // The first went through Express; after it, at most one a second does.
    expect(loggedRequests(path)).toBeLessThan(10);
  });

  it('when a target was never validated, then it always goes through Express, even right after a valid one', async () => {
    await get('/api/quotes/AAPL');
    const bad = await get('/api/quotes/AAPL?extra=1');
    expectEnvelope(bad, 422, /^Invalid request parameters: /);
    const long = await get('/api/quotes/AAPL', { 'If-None-Match': `"${'x'.repeat(600)}"` });
    expectEnvelope(long, 422, /^Invalid request parameters: /);
  });

  it('when the cache is flushed, then the next read is a MISS, not the fast path copy', async () => {
    const path = '/api/search?q=micro';
    await get(path);
    expect((await get(path)).res.headers.get('x-cache')).toBe('HIT');
    await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } });
    expect((await get(path)).res.headers.get('x-cache')).toBe('MISS');
  });
});
