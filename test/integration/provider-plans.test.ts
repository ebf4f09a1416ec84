/**
 * Provider plans honoured (DESIGN 19), through the real service with each provider replayed by a local
 * server: callers' reads answered on a free plan while the index refresh runs, a spent budget a 503
 * with Retry-After (never 404, nothing remembered as unknown), a plan's reach deciding who serves an
 * old window (and a 422 saying how to reach it), a straddling window partial, and the ECB quote from
 * the daily file alone.
 */
import { createHash } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { keys as keySpace, utcDay } from '../../src/domain/key-space.js';
import { connectFailFast, startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { fixture, startReplayUpstream, type ReplayRoute, type ReplayUpstream } from '../helpers/replay-upstream.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { openStream, type TestStream } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait-for.js';

const JSON_TYPE = 'application/json';
const POLYGON_KEY = 'polygon-plan-key-0001';
const DAY_MS = 86_400_000;
const POLYGON_AGGS = fixture('polygon-aggs-AAPL-1day-2023-01-01-2023-01-10.json');
/** Tickers the replayed Polygon has daily bars for (the recorded AAPL bars, whatever the ticker). */
const KNOWN = ['X:BTCUSD', 'AAPL', 'MSFT', 'NVDA', 'AMZN', 'META', 'GOOG', 'TSLA', 'NFLX', 'ORCL', 'INTC', 'AMD', 'IBM', 'I:SPX', 'I:DJI', 'I:COMP'];

/** The first day of the two weeks a quote asks for (the service computes it the same way, at the same UTC day). */
const RECENT_FROM = new Date(Date.now() - 14 * DAY_MS).toISOString().slice(0, 10);
/** Polygon's ticker details (`/v3/reference/tickers/{ticker}`) of a ticker it knows, in its documented shape. */
const polygonTickerDetails = (ticker: string) =>
  JSON.stringify({ request_id: `r-${ticker}`, status: 'OK', results: { ticker, name: `${ticker} Holdings Inc.`, market: 'stocks', locale: 'us', primary_exchange: 'XNAS', type: 'CS', active: true, currency_name: 'usd' } });
const POLYGON_EMPTY_AGGS = (ticker: string) => `{"ticker":"${ticker}","queryCount":0,"resultsCount":0,"adjusted":true,"status":"OK","request_id":"e2","count":0}`;

const POLYGON_ROUTES: ReplayRoute[] = [
  // HALT: a real ticker with no bar in the last two weeks (a long halt), whose last bars are older.
  { path: new RegExp(`^/v2/aggs/ticker/HALT/range/1/day/${RECENT_FROM}/`), status: 200, contentType: JSON_TYPE, body: POLYGON_EMPTY_AGGS('HALT') },
  { path: /^\/v2\/aggs\/ticker\/HALT\//, status: 200, contentType: JSON_TYPE, gzip: true, body: POLYGON_AGGS },
  { path: '/v3/reference/tickers/HALT', status: 200, contentType: JSON_TYPE, body: polygonTickerDetails('HALT') },
  // DARK: a real ticker with no bar at all within the lookback.
  { path: /^\/v2\/aggs\/ticker\/DARK\//, status: 200, contentType: JSON_TYPE, body: POLYGON_EMPTY_AGGS('DARK') },
  { path: '/v3/reference/tickers/DARK', status: 200, contentType: JSON_TYPE, body: polygonTickerDetails('DARK') },
  // A real ticker with no bar in the window, and a reference lookup that finds nothing: unknown.
  { path: /^\/v2\/aggs\/ticker\/QQQQ\//, status: 200, contentType: JSON_TYPE, body: '{"ticker":"QQQQ","queryCount":0,"resultsCount":0,"adjusted":true,"status":"OK","request_id":"e1","count":0}' },
  { path: new RegExp(`^/v2/aggs/ticker/(${KNOWN.join('|')})/range/1/day/`), status: 200, contentType: JSON_TYPE, gzip: true, body: POLYGON_AGGS },
  { path: '/v3/reference/dividends', status: 200, contentType: JSON_TYPE, body: '{"results":[],"status":"OK","request_id":"d1"}' },
  { path: '/v3/reference/splits', status: 200, contentType: JSON_TYPE, body: '{"results":[],"status":"OK","request_id":"s1"}' },
];
/** Polygon's answer for a ticker it does not have (aggregates and reference alike). */
const POLYGON_NOT_FOUND = { status: 404, contentType: JSON_TYPE, body: '{"status":"NOT_FOUND","request_id":"n1","message":"Ticker not found."}' };

interface ErrorBody {
  success: false;
  error: string;
  code: number;
  violations?: Array<{ path: string; message: string }>;
}

/** Every unknown-symbol member the service remembered in Redis, whatever the provider. */
async function rememberedUnknowns(raw: Redis): Promise<string[]> {
  const keys = await raw.keys('mds:v1:unknown:*');
  const members: string[] = [];
  for (const key of keys) members.push(...Object.keys(JSON.parse((await raw.get(key)) ?? '{}') as Record<string, number>));
  return members;
}

function aggsRequestsFor(upstream: ReplayUpstream, ticker: string) {
  return upstream.requests.filter((r) => r.path.startsWith(`/v2/aggs/ticker/${ticker}/`));
}

let redis: RedisProcess;
let raw: Redis;
let polygon: ReplayUpstream;

beforeAll(async () => {
  redis = await startRedis();
  raw = await connectFailFast(redis.port);
  polygon = await startReplayUpstream({ routes: POLYGON_ROUTES, notFound: POLYGON_NOT_FOUND });
});
afterAll(async () => {
  raw.disconnect();
  await polygon.close();
  await redis.stop();
});

/** A service on its own Redis database (budgets, pauses and unknown symbols apart from the other cases). */
function start(db: number, env: Record<string, string>, scheduler = false): Promise<TestService> {
  return startTestService({ CACHE_URL: `${redis.url}/${db}`, POLYGON_API_KEYS: POLYGON_KEY, POLYGON_BASE_URL: polygon.baseUrl, ...env }, { init: true, scheduler });
}

describe('Polygon on its free (basic) plan with the default indices and refresh interval', () => {
  let svc: TestService;
  /** Polygon's requests before this service started: the refresh may also have run on its own timer since. */
  let startedAt = 0;
  beforeAll(async () => {
    await raw.select(0);
    await raw.flushdb();
    startedAt = polygon.requests.length;
    svc = await start(0, { MARKET_DATA_PROVIDERS: 'polygon', REFRESH_INTERVAL_SECONDS: '30' }, true);
  });
  afterAll(() => svc.close());

  it('when the service starts, then the log and GET /api/admin/providers show the plan, its reach and budget, and the index refresh lengthened once to fit half the budget', async () => {
    const line = svc.logs.find((l) => l.provider === 'polygon' && l.plan === 'basic');
    expect(line).toMatchObject({ plan: 'basic', reach: { historyDays: 730, intradayDays: 730 }, dailyLimit: 0, background: { perWindow: 2, windowS: 60, perDay: null } });
    const lengthened = svc.logs.filter((l) => typeof l.msg === 'string' && l.msg.includes('the index refresh runs every'));
    expect(lengthened).toHaveLength(1);
    // ^GSPC, ^DJI and ^IXIC are the default indices Polygon can spell: 3 calls in 2 a minute.
    expect(lengthened[0]?.msg).toContain('every 90 s instead of every 30 s');
    const token = await svc.login(ADMIN.username, ADMIN.password);
    const res = await svc.fetch('/api/admin/providers', { headers: { authorization: `Bearer ${token}` } });
    const body = (await res.json()) as { data: Array<{ name: string; plan: unknown; budget: { max_rps: number | null; daily_limit: number | null } }> };
    expect(body.data[0]).toMatchObject({ name: 'polygon', plan: { name: 'basic', history_days: 730, intraday_days: 730 }, budget: { daily_limit: null } });
    expect(body.data[0]?.budget.max_rps).toBeCloseTo(5 / 60, 5);
  });

  it('when the index refresh has run, then three callers are answered 200 by Polygon, a read once the budget is spent is 503 with Retry-After, and no symbol is remembered as unknown', async () => {
    // Run now, unless the timer's first run holds the job's lock (then that run was the refresh).
    await svc.runJob('refresh-indices');
    // Background work took at most half of the 5 calls a minute (2): the three indices Polygon spells compete for them.
    const indexRequests = () => polygon.requests.slice(startedAt).filter((r) => r.path.startsWith('/v2/aggs/ticker/I:'));
    // When the timer's first run holds the job's lock, runJob returns at once: wait for that run's calls.
    await waitFor(() => indexRequests().length > 0, { timeoutMs: 10_000, message: 'the index refresh asking Polygon' });
    const indexCalls = indexRequests();
    // The exact share (2 of 5) is the guard's unit test; here the counters may fall back to memory for a moment when
    // Redis answers slowly on a loaded host, so the bound is the three calls one refresh asks at most.
    expect(indexCalls.length, JSON.stringify(indexCalls.map((r) => r.path))).toBeLessThanOrEqual(3);
    expect(indexCalls.length).toBeGreaterThan(0);

    for (const symbol of ['AAPL', 'MSFT', 'NVDA']) {
      const res = await svc.fetch(`/api/quotes/${symbol}`);
      expect(res.status, symbol).toBe(200);
      const body = (await res.json()) as { source: string; data: { symbol: string; price: number } };
      expect(body).toMatchObject({ source: 'polygon', data: { symbol, price: 130.73 } });
    }

    // The budget is spent now (or, if a minute began meanwhile, within the next few reads): a 503, never a 404.
    let spent: Response | undefined;
    for (const symbol of ['AMZN', 'META', 'GOOG', 'TSLA', 'NFLX', 'ORCL', 'INTC', 'AMD', 'IBM']) {
      const res = await svc.fetch(`/api/quotes/${symbol}`);
      expect([200, 503], symbol).toContain(res.status);
      if (res.status === 503) {
        spent = res;
        break;
      }
      await res.arrayBuffer();
    }
    expect(spent?.status).toBe(503);
    const retryAfter = Number(spent?.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    const error = (await spent?.json()) as ErrorBody;
    expect(error).toMatchObject({ success: false, code: 503 });

    // History of an existing symbol with the budget spent: 503 too, never "unknown".
    const history = await svc.fetch('/api/history/MSFT?interval=1d&range=1mo');
    expect(history.status).toBe(503);
    expect(history.headers.get('retry-after')).not.toBeNull();
    expect(await rememberedUnknowns(raw)).toEqual([]);
  });

  it('when a symbol no configured provider can spell is asked (^FTSE with Polygon alone), then 422 says which markets Polygon covers, and nothing is remembered', async () => {
    const res = await svc.fetch('/api/quotes/%5EFTSE');
    expect(res.status).toBe(422);
    const body = (await res.json()) as ErrorBody;
    expect(body.violations?.[0]?.path).toBe('path.symbol');
    expect(body.error).toContain("no configured provider serves quotes of '^FTSE'");
    expect(body.error).toContain('polygon: US stocks and ETFs, US indices');
    const history = await svc.fetch('/api/history/%5EFTSE?interval=1d&range=1mo');
    expect(history.status).toBe(422);
    expect(await rememberedUnknowns(raw)).toEqual([]);
  });
});

describe("The stream's refresh on Polygon's free plan", () => {
  let svc: TestService;
  let stream: TestStream | undefined;
  beforeAll(async () => {
    await raw.select(9);
    await raw.flushdb();
    // No scheduler (no index refresh): the stream's refresh is the only work not asked by a caller.
    svc = await start(9, { MARKET_DATA_PROVIDERS: 'polygon', STREAM_REFRESH_SECONDS: '1' });
  });
  afterAll(async () => {
    stream?.close();
    await svc.close();
  });

  it("when a streamed symbol is refreshed every second, then the refresh runs as background work within its share of the 5 calls a minute, and a caller's read is still answered by Polygon", async () => {
    const btcCalls = () => aggsRequestsFor(polygon, 'X:BTCUSD').length;
    const before = btcCalls();
    // BTC-USD trades around the clock: each tick reloads it, whatever its cache lifetime.
    stream = await openStream(`${svc.url}/api/stream?symbols=BTC-USD`);
    await stream.waitForEvents(1);
    const token = await svc.login(ADMIN.username, ADMIN.password);
    const polygonFailures = async () => {
      const res = await svc.fetch('/api/admin/providers', { headers: { authorization: `Bearer ${token}` } });
      return ((await res.json()) as { data: Array<{ failures: number }> }).data[0]?.failures ?? 0;
    };
    // A refresh that found no room: the background share (2 a minute) is spent, not the callers' budget.
    let failures = 0;
    await waitFor(async () => (failures = await polygonFailures()) > 0, { timeoutMs: 15_000, intervalMs: 200, message: 'a stream refresh refused for want of budget' });
    expect(failures).toBeGreaterThan(0);
    // The subscription's first load (a caller's) and at most the share's 2 refreshes in this minute (4 if a minute began meanwhile).
    expect(btcCalls() - before).toBeLessThanOrEqual(5);
    const res = await svc.fetch('/api/quotes/AAPL');
    expect(res.status).toBe(200);
    expect(((await res.json()) as { source: string }).source).toBe('polygon');
  });
});

describe("Polygon's reach follows its plan", () => {
  let svc: TestService | undefined;
  let yahoo: ReplayUpstream | undefined;
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
    await yahoo?.close();
    yahoo = undefined;
  });

  it('when POLYGON_PLAN=developer, then a 2023 daily window is asked of Polygon and served by it', async () => {
    svc = await start(1, { MARKET_DATA_PROVIDERS: 'polygon', POLYGON_PLAN: 'developer' });
    const before = aggsRequestsFor(polygon, 'AAPL').length;
    const res = await svc.fetch('/api/history/AAPL?interval=1d&start=2023-01-03&end=2023-01-10');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { source: string; data: { candles: Array<{ time: string; close: number }>; partial?: boolean } };
    expect(body.source).toBe('polygon');
    expect(body.data.candles[0]).toMatchObject({ time: '2023-01-03T14:30:00.000Z', close: 125.07 });
    expect(body.data.partial).toBeUndefined();
    expect(aggsRequestsFor(polygon, 'AAPL').length).toBeGreaterThan(before);
  });

  it('when POLYGON_HISTORY_DAYS=3650 on the basic plan, then the same window is served by Polygon', async () => {
    svc = await start(1, { MARKET_DATA_PROVIDERS: 'polygon', POLYGON_HISTORY_DAYS: '3650' });
    const res = await svc.fetch('/api/history/MSFT?interval=1d&start=2023-01-03&end=2023-01-10');
    expect(res.status).toBe(200);
    expect(((await res.json()) as { source: string }).source).toBe('polygon');
  });

  it('when Polygon alone is on basic, then the 2023 window is a 422 naming its reach and POLYGON_PLAN, without asking it, and nothing is remembered', async () => {
    await raw.select(2);
    await raw.flushdb();
    svc = await start(2, { MARKET_DATA_PROVIDERS: 'polygon' });
    const before = aggsRequestsFor(polygon, 'NVDA').length;
    const res = await svc.fetch('/api/history/NVDA?interval=1d&start=2023-01-03&end=2023-01-10');
    expect(res.status).toBe(422);
    const body = (await res.json()) as ErrorBody;
    expect(body.violations?.[0]?.path).toBe('query.start');
    expect(body.error).toContain('polygon reaches 730 days on its basic plan: POLYGON_PLAN or POLYGON_HISTORY_DAYS extends it');
    expect(aggsRequestsFor(polygon, 'NVDA').length).toBe(before);
    expect(await rememberedUnknowns(raw)).toEqual([]);
  });

  it('when the chain is polygon,yahoo on basic, then the 2023 window is served by Yahoo', async () => {
    yahoo = await startReplayUpstream({
      routes: [{ path: '/v8/finance/chart/AMZN', status: 200, contentType: JSON_TYPE, body: yahooChart() }],
      notFound: { status: 404, contentType: JSON_TYPE, body: '{"chart":{"result":null,"error":{"code":"Not Found","description":"No data found, symbol may be delisted"}}}' },
    });
    svc = await start(1, { MARKET_DATA_PROVIDERS: 'polygon,yahoo', YAHOO_BASE_URL: yahoo.baseUrl });
    const before = aggsRequestsFor(polygon, 'AMZN').length;
    const res = await svc.fetch('/api/history/AMZN?interval=1d&start=2023-01-03&end=2023-01-05');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { source: string; data: { candles: Array<{ time: string; close: number }> } };
    expect(body.source).toBe('yahoo');
    expect(body.data.candles.map((c) => c.close)).toEqual([85.82, 85.14]);
    expect(aggsRequestsFor(polygon, 'AMZN').length).toBe(before);
  });

  it('when a window straddles the basic reach, then the reachable part is answered with partial: true and the rest under missing', async () => {
    svc = await start(1, { MARKET_DATA_PROVIDERS: 'polygon' });
    const now = Date.now();
    // A weekday: a window starting on a weekend has its missing span start at the next session (the store knows no bars on weekends).
    let fromMs = now - 760 * DAY_MS;
    while ([0, 6].includes(new Date(fromMs).getUTCDay())) fromMs -= DAY_MS;
    const from = new Date(fromMs).toISOString().slice(0, 10);
    const to = new Date(now - 700 * DAY_MS).toISOString().slice(0, 10);
    const res = await svc.fetch(`/api/history/GOOG?interval=1d&start=${from}&end=${to}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { source: string; data: { partial?: boolean; missing?: Array<{ start: string; end: string }> } };
    expect(body.data.partial).toBe(true);
    expect(body.data.missing).toHaveLength(1);
    expect(body.data.missing?.[0]?.start).toBe(`${from}T00:00:00.000Z`);
    // The unreachable span ends where the plan's 730 days begin (measured from the request's now).
    const reachStart = Date.parse(body.data.missing?.[0]?.end ?? '');
    expect(Math.abs(reachStart - (now - 730 * DAY_MS))).toBeLessThan(60_000);
    // The reachable part was asked of Polygon from the reach's start on.
    const asked = aggsRequestsFor(polygon, 'GOOG').at(-1)?.path ?? '';
    expect(asked).toContain(`/range/1/day/${new Date(reachStart).toISOString().slice(0, 10)}/`);
  });

  it('when Polygon answers NOT_FOUND for a ticker, or finds no bar and no reference ticker, then 404 (and only then)', async () => {
    svc = await start(1, { MARKET_DATA_PROVIDERS: 'polygon', POLYGON_PLAN: 'developer' });
    expect((await svc.fetch('/api/quotes/ZZZZ')).status).toBe(404);
    expect((await svc.fetch('/api/history/ZZZZ?interval=1d&start=2023-01-03&end=2023-01-10')).status).toBe(404);
    // Weekdays: a window with sessions is asked of Polygon (a weekend window is answered without asking it; see the docs' known limits).
    const empty = await svc.fetch('/api/history/QQQQ?interval=1d&start=2023-01-03&end=2023-01-10');
    expect(empty.status).toBe(404);
    expect(polygon.requests.some((r) => r.path === '/v3/reference/tickers/QQQQ')).toBe(true);
  });

  it("when a quote finds no bar in two weeks, then Polygon's reference decides: a ticker it knows is quoted from its last bar (dated), one with no bar in two years is 503 (never unknown), and only one it does not know is Polygon's \"no such symbol\" (with Yahoo down, the chain answers 503)", async () => {
    await raw.select(7);
    await raw.flushdb();
    svc = await start(7, { MARKET_DATA_PROVIDERS: 'polygon,yahoo', YAHOO_BASE_URL: 'http://127.0.0.1:9' });
    const referenceAsked = (ticker: string) => polygon.requests.filter((r) => r.path === `/v3/reference/tickers/${ticker}`).length;

    const halted = await svc.fetch('/api/quotes/HALT');
    expect(halted.status).toBe(200);
    const body = (await halted.json()) as { source: string; data: { symbol: string; price: number; prev_close: number; timestamp: string } };
    // The last recorded bars (January 2023), with their own date: an honest, old price.
    expect(body).toMatchObject({ source: 'polygon', data: { symbol: 'HALT', price: 130.73 } });
    expect(body.data.timestamp.startsWith('2023-01-')).toBe(true);
    expect(referenceAsked('HALT')).toBe(1);
    expect(aggsRequestsFor(polygon, 'HALT').map((r) => r.path.split('/')[8])).toEqual([RECENT_FROM, new Date(Date.now() - 730 * DAY_MS).toISOString().slice(0, 10)]);

    // Known to the reference, no bar within two years: not unknown; Yahoo (down here) cannot answer either: 503.
    const dark = await svc.fetch('/api/quotes/DARK');
    expect(dark.status).toBe(503);
    expect(dark.headers.get('retry-after')).not.toBeNull();
    expect(((await dark.json()) as ErrorBody).code).toBe(503);

    // The reference does not know QQQQ (NOT_FOUND): Polygon's own "no such symbol"; Yahoo is down, so it is not a 404 of the chain.
    const before = referenceAsked('QQQQ');
    const unknown = await svc.fetch('/api/quotes/QQQQ');
    expect(unknown.status).toBe(503);
    expect(referenceAsked('QQQQ')).toBe(before + 1);
    expect(await rememberedUnknowns(raw)).toEqual([]);
  });

  it('when Polygon alone finds no bar in two weeks and its reference says NOT_FOUND, then the quote is 404', async () => {
    svc = await start(1, { MARKET_DATA_PROVIDERS: 'polygon', POLYGON_PLAN: 'developer' });
    const before = polygon.requests.filter((r) => r.path === '/v3/reference/tickers/QQQQ').length;
    const res = await svc.fetch('/api/quotes/QQQQ');
    expect(res.status).toBe(404);
    expect(polygon.requests.filter((r) => r.path === '/v3/reference/tickers/QQQQ').length).toBe(before + 1);
  });
});

describe('Tiingo: a share with no bar in two weeks', () => {
  let tiingo: ReplayUpstream;
  let svc: TestService;
  const metaAsked = (ticker: string) => tiingo.requests.filter((r) => r.path === `/tiingo/daily/${ticker}`).length;
  beforeAll(async () => {
    await raw.select(8);
    await raw.flushdb();
    tiingo = await startReplayUpstream({
      routes: [
        // Two weeks of nothing for every ticker; HALT's older prices are there, its meta data ends on 2023-06-06.
        { path: /^\/tiingo\/daily\/[A-Z]+\/prices$/, query: { startDate: RECENT_FROM }, status: 200, contentType: JSON_TYPE, body: '[]' },
        { path: '/tiingo/daily/HALT/prices', status: 200, contentType: JSON_TYPE, body: TIINGO_DAILY },
        {
          path: '/tiingo/daily/HALT',
          status: 200,
          contentType: JSON_TYPE,
          body: '{"ticker":"HALT","name":"Halt Holdings Inc","exchangeCode":"NASDAQ","startDate":"2010-01-04","endDate":"2023-06-06","description":"A listed share with a long trading halt."}',
        },
        { path: '/tiingo/daily/IDLE', status: 200, contentType: JSON_TYPE, body: '{"ticker":"IDLE","name":"Idle Inc","exchangeCode":"NYSE","startDate":null,"endDate":null,"description":""}' },
      ],
      // Tiingo's meta data of a ticker it does not have.
      notFound: { status: 404, contentType: JSON_TYPE, body: '{"detail":"Not found."}' },
    });
    svc = await startTestService(
      { CACHE_URL: `${redis.url}/8`, MARKET_DATA_PROVIDERS: 'tiingo', TIINGO_API_KEYS: keyOf('tiingo'), TIINGO_BASE_URL: tiingo.baseUrl },
      { init: true },
    );
  });
  afterAll(async () => {
    await svc.close();
    await tiingo.close();
  });

  it('when its meta data knows it, then the quote is its last bar (dated), not unknown', async () => {
    const res = await svc.fetch('/api/quotes/HALT');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { source: string; data: { price: number; prev_close: number; timestamp: string } };
    expect(body.source).toBe('tiingo');
    expect(body.data).toMatchObject({ price: 179.21 });
    expect(body.data.timestamp.startsWith('2023-06-06T')).toBe(true);
    expect(metaAsked('HALT')).toBe(1);
    // The second window ends on the meta data's last date.
    expect(tiingo.requests.filter((r) => r.path === '/tiingo/daily/HALT/prices').at(-1)?.query.get('endDate')).toBe('2023-06-06');
  });

  it('when its meta data knows it but gives no price date, then 503 with Retry-After, never 404', async () => {
    const res = await svc.fetch('/api/quotes/IDLE');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).not.toBeNull();
    expect(metaAsked('IDLE')).toBe(1);
  });

  it('when its meta data answers 404 "Not found.", then the quote is 404', async () => {
    const res = await svc.fetch('/api/quotes/NOPE');
    expect(res.status).toBe(404);
    expect(((await res.json()) as ErrorBody).code).toBe(404);
    expect(metaAsked('NOPE')).toBe(1);
    // Only Tiingo's own "no such symbol" is remembered: not the halted share, not the one without prices.
    await raw.select(8);
    expect(await rememberedUnknowns(raw)).toEqual(['quote:NOPE']);
  });
});

/** One keyed provider on its default plan, replayed: the routes that answer any of `symbols` with a quote. */
interface KeyedCase {
  name: 'alpha_vantage' | 'tiingo' | 'fmp';
  routes: (symbols: readonly string[]) => ReplayRoute[];
  /** Spend the budget through reads (false when the plan's budget is a day's and too large to spend in a test). */
  spendByReads: boolean;
  /** The plan's daily limit per key, spent in the test's Redis through the service's own counter key (0: not shown, see the entry). */
  dailyLimit: number;
}

const AV_QUOTE = (symbol: string) =>
  `{"Global Quote":{"01. symbol":"${symbol}","02. open":"170.0000","03. high":"172.3500","04. low":"169.5500","05. price":"171.9800","06. volume":"3466581","07. latest trading day":"2024-06-26","08. previous close":"170.8300","09. change":"1.1500","10. change percent":"0.6732%"}}`;
const FMP_QUOTE = fixture('fmp-quote-AAPL.json').toString('utf8');
const TIINGO_DAILY = fixture('tiingo-daily-AAPL-2023-01-01-2023-06-06.json');
const CALLER_SYMBOLS = ['AAPL', 'MSFT', 'NVDA'];
const MORE_SYMBOLS = Array.from({ length: 60 }, (_, i) => `S${String.fromCharCode(65 + (i % 26))}${String.fromCharCode(65 + Math.floor(i / 26))}`);

const KEYED: KeyedCase[] = [
  {
    name: 'alpha_vantage',
    routes: (symbols) => symbols.map((symbol) => ({ path: '/query', query: { function: 'GLOBAL_QUOTE', symbol }, status: 200, contentType: JSON_TYPE, body: AV_QUOTE(symbol) })),
    spendByReads: false,
    dailyLimit: 25,
  },
  {
    name: 'tiingo',
    routes: () => [{ path: /^\/tiingo\/daily\/[A-Z]+\/prices$/, status: 200, contentType: JSON_TYPE, body: TIINGO_DAILY }],
    // 50 an hour: spent by the reads of one test.
    spendByReads: true,
    // Its daily limit (1000) is not shown here: the hourly budget the test above spends answers first (Retry-After at the hour).
    dailyLimit: 0,
  },
  {
    name: 'fmp',
    routes: (symbols) => symbols.map((symbol) => ({ path: '/stable/quote', query: { symbol }, status: 200, contentType: 'application/json; charset=utf-8', body: FMP_QUOTE.replace('"AAPL"', `"${symbol}"`) })),
    spendByReads: false,
    dailyLimit: 250,
  },
];

describe.each(KEYED)('$name on its default plan with the default indices and refresh interval', ({ name, routes, spendByReads, dailyLimit }) => {
  let upstream: ReplayUpstream;
  let svc: TestService;
  const db = { alpha_vantage: 4, tiingo: 5, fmp: 6 }[name];
  beforeAll(async () => {
    await raw.select(db);
    await raw.flushdb();
    upstream = await startReplayUpstream({ routes: routes([...CALLER_SYMBOLS, ...MORE_SYMBOLS]), notFound: { status: 404, contentType: JSON_TYPE, body: '{"detail":"Not found."}' } });
    const p = name.toUpperCase();
    svc = await startTestService(
      { CACHE_URL: `${redis.url}/${db}`, MARKET_DATA_PROVIDERS: name, [`${p}_API_KEYS`]: keyOf(name), [`${p}_BASE_URL`]: upstream.baseUrl, REFRESH_INTERVAL_SECONDS: '30' },
      { scheduler: true },
    );
  });
  afterAll(async () => {
    await svc.close();
    await upstream.close();
  });

  it('when the index refresh has run, then three callers are answered 200 by the provider; once the budget is spent a read is 503 with Retry-After; nothing is remembered as unknown', async () => {
    await svc.runJob('refresh-indices');
    for (const symbol of CALLER_SYMBOLS) {
      const res = await svc.fetch(`/api/quotes/${symbol}`);
      expect(res.status, symbol).toBe(200);
      expect(((await res.json()) as { source: string }).source).toBe(name);
    }
    if (spendByReads) {
      let spent: Response | undefined;
      for (const symbol of MORE_SYMBOLS) {
        const res = await svc.fetch(`/api/quotes/${symbol}`);
        expect([200, 503], symbol).toContain(res.status);
        if (res.status === 503) {
          spent = res;
          break;
        }
        await res.arrayBuffer();
      }
      expect(spent?.status).toBe(503);
      expect(Number(spent?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    await raw.select(db);
    expect(await rememberedUnknowns(raw)).toEqual([]);
  });

  it.skipIf(dailyLimit === 0)(
    "when the key's daily limit is spent fleet-wide, then a read is 503 with Retry-After at the next UTC midnight, never 404, the provider is not asked, and nothing is remembered as unknown",
    async () => {
      // The day's calls, as other instances of the fleet would have counted them: the service's own counter key.
      await raw.select(db);
      const account = createHash('sha256').update(keyOf(name)).digest('hex').slice(0, 12);
      const counter = keySpace.upstream.daily(name, account, utcDay(Date.now()));
      expect(Number(await raw.get(counter)), 'the reads above were counted in the shared daily counter').toBeGreaterThanOrEqual(CALLER_SYMBOLS.length);
      await raw.set(counter, String(dailyLimit), 'EX', 86_400);
      const asked = upstream.requests.length;
      for (const path of ['/api/quotes/IBM', '/api/history/IBM?interval=1d&range=1mo']) {
        const res = await svc.fetch(path);
        expect(res.status, path).toBe(503);
        const now = Date.now();
        const untilMidnight = (Math.floor(now / DAY_MS) + 1) * DAY_MS - now;
        const retryAfter = Number(res.headers.get('retry-after'));
        expect(Math.abs(retryAfter * 1000 - untilMidnight), `Retry-After ${retryAfter} s`).toBeLessThan(60_000);
        const error = (await res.json()) as ErrorBody;
        expect(error).toMatchObject({ success: false, code: 503 });
        expect(error.error).not.toMatch(/unknown/i);
      }
      expect(upstream.requests.length).toBe(asked);
      expect(await rememberedUnknowns(raw)).toEqual([]);
    },
  );
});

function keyOf(name: string): string {
  return `${name}-plan-key-0001`;
}

describe('ECB quote', () => {
  let ecb: ReplayUpstream;
  let svc: TestService;
  beforeAll(async () => {
    ecb = await startReplayUpstream({
      routes: [
        { path: '/stats/eurofxref/eurofxref-daily.xml', status: 200, contentType: 'text/xml', body: fixture('ecb-eurofxref-daily-2024-06-26.xml') },
        { path: '/stats/eurofxref/eurofxref-hist-90d.xml', status: 500, contentType: 'text/plain', body: 'Internal Server Error' },
      ],
    });
    svc = await start(3, { MARKET_DATA_PROVIDERS: 'ecb', ECB_BASE_URL: ecb.baseUrl });
  });
  afterAll(async () => {
    await svc.close();
    await ecb.close();
  });

  it('when the 90-day file fails, then the quote is answered from the daily file with prev_close and change null', async () => {
    const res = await svc.fetch('/api/quotes/EURUSD=X');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { source: string; data: { price: number; prev_close: number | null; change: number | null; change_percent: number | null } };
    expect(body.source).toBe('ecb');
    expect(body.data).toMatchObject({ prev_close: null, change: null, change_percent: null });
    expect(body.data.price).toBeGreaterThan(0);
    expect(ecb.requests.some((r) => r.path === '/stats/eurofxref/eurofxref-hist-90d.xml')).toBe(true);
  });
});

/** A Yahoo chart answer for AMZN with two daily bars of January 2023 (the shape of Yahoo's recorded answers). */
function yahooChart(): string {
  const t = [Date.parse('2023-01-03T14:30:00Z') / 1000, Date.parse('2023-01-04T14:30:00Z') / 1000];
  return JSON.stringify({
    chart: {
      result: [
        {
          meta: {
            currency: 'USD',
            symbol: 'AMZN',
            exchangeName: 'NMS',
            fullExchangeName: 'NasdaqGS',
            instrumentType: 'EQUITY',
            regularMarketPrice: 85.14,
            chartPreviousClose: 84.0,
            priceHint: 2,
            gmtoffset: -18000,
            timezone: 'EST',
            exchangeTimezoneName: 'America/New_York',
            currentTradingPeriod: {
              pre: { timezone: 'EST', start: 1672736400, end: 1672756200, gmtoffset: -18000 },
              regular: { timezone: 'EST', start: 1672756200, end: 1672779600, gmtoffset: -18000 },
              post: { timezone: 'EST', start: 1672779600, end: 1672794000, gmtoffset: -18000 },
            },
            dataGranularity: '1d',
            range: '',
          },
          timestamp: t,
          events: {},
          indicators: {
            quote: [{ open: [85.46, 86.55], high: [86.96, 86.98], low: [84.21, 83.36], close: [85.82, 85.14], volume: [76706000, 68885100] }],
            adjclose: [{ adjclose: [85.82, 85.14] }],
          },
        },
      ],
      error: null,
    },
  });
}
