/**
 * The exchange calendar over a real socket: /api/markets on US Thanksgiving 2026 and the day after
 * (the service's clock pinned through startService's `now`), and GET /api/markets/{market}/sessions
 * with its bad-input rules. Every response is validated against openapi.yaml by the test service.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schemaViolations } from '../helpers/contract-schema.js';
import { expectDocumentedStatus } from '../helpers/contract-status.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { SimulatedMarketDataProvider } from '../../src/infra/market/simulated-market-data-provider.js';

const API_KEY = 'market-calendar-http-test-api-key-0123456789';

interface MarketEntry {
  market: string;
  state: string;
  next_open: string | null;
  next_close: string | null;
  holiday: string | null;
}
interface SessionsBody {
  success: true;
  data: { market: string; timezone: string; sessions: Array<{ date: string; open: string; close: string; break_start: string | null; break_end: string | null }> };
}
interface Envelope {
  success: false;
  error: string;
  code: number;
  violations?: Array<{ path: string; message: string }>;
}

/** The service's clock: each test sets the instant it reads. */
let nowMs = Date.parse('2026-11-26T17:00:00.000Z');
let svc: TestService;
let redis: RedisProcess;

beforeAll(async () => {
  // A Redis of its own: cached quotes here are computed at pinned instants, other suites' at the real time.
  redis = await startRedis();
  const now = () => nowMs;
  svc = await startTestService({ CACHE_URL: redis.url }, { now, provider: new SimulatedMarketDataProvider({ now }) });
});
afterAll(async () => {
  await svc?.close();
  await redis?.stop();
});

async function markets(at: string): Promise<{ res: Response; body: { data: MarketEntry[] } }> {
  nowMs = Date.parse(at);
  const res = await svc.fetch('/api/markets');
  const body = (await res.json()) as { data: MarketEntry[] };
  return { res, body };
}

describe('GET /api/markets across US Thanksgiving 2026', () => {
  it('when it is noon in New York on Thursday 2026-11-26, then the US is closed for Thanksgiving Day and next opens Friday 09:30, closing early at 13:00', async () => {
    const { res, body } = await markets('2026-11-26T17:00:00.000Z');
    expect(res.status).toBe(200);
    expect(schemaViolations('MarketsResponse', body)).toEqual([]);
    const us = body.data.find((m) => m.market === 'US');
    expect(us).toEqual({
      market: 'US',
      name: 'New York Stock Exchange and Nasdaq',
      timezone: 'America/New_York',
      state: 'closed',
      next_open: '2026-11-27T14:30:00.000Z',
      next_close: '2026-11-27T18:00:00.000Z',
      holiday: 'Thanksgiving Day',
    });
    // London trades on US Thanksgiving: no holiday there.
    expect(body.data.find((m) => m.market === 'UK')?.holiday).toBeNull();
    expect(body.data.find((m) => m.market === 'CRYPTO')).toMatchObject({ state: 'open', holiday: null });
  });

  it('when it is one minute before the early close on Friday 2026-11-27, then the US is open until 13:00 New York and the answer lives at most that minute', async () => {
    const { res, body } = await markets('2026-11-27T17:59:00.000Z');
    const us = body.data.find((m) => m.market === 'US');
    expect(us).toMatchObject({ state: 'open', next_close: '2026-11-27T18:00:00.000Z', next_open: '2026-11-30T14:30:00.000Z', holiday: null });
    expect(res.headers.get('cache-control')).toBe('public, max-age=60');
  });

  it('when it is Wednesday evening before Thanksgiving, then the next US open skips Thursday', async () => {
    const { body } = await markets('2026-11-26T01:30:00.000Z');
    expect(body.data.find((m) => m.market === 'US')).toMatchObject({ state: 'closed', next_open: '2026-11-27T14:30:00.000Z', holiday: null });
  });

  it("when it is Hong Kong's Lunar New Year (2026-02-17), then HK is closed for it and reopens after the third day", async () => {
    const { body } = await markets('2026-02-17T03:00:00.000Z');
    expect(body.data.find((m) => m.market === 'HK')).toMatchObject({
      state: 'closed',
      holiday: "Lunar New Year's Day",
      next_open: '2026-02-20T01:30:00.000Z',
      next_close: '2026-02-20T04:00:00.000Z',
    });
    // The mainland is in its Spring Festival week until Monday the 23rd inclusive.
    expect(body.data.find((m) => m.market === 'CN')).toMatchObject({ state: 'closed', holiday: 'Spring Festival', next_open: '2026-02-24T01:30:00.000Z' });
  });
});

describe('quote cache lifetimes follow the holiday calendar', () => {
  async function maxAge(target: string, at: string): Promise<{ age: number; state: string }> {
    nowMs = Date.parse(at);
    const res = await svc.fetch(target);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: { market_state: string } };
    return { age: Number(/max-age=(\d+)/.exec(res.headers.get('cache-control') ?? '')?.[1]), state: body.data.market_state };
  }

  it('when a US stock is read on Thanksgiving morning, then it is closed and kept an hour (the next open is Friday), not CACHE_TTL_SECONDS as on a trading morning', async () => {
    const holiday = await maxAge('/api/quotes/MSFT', '2026-11-26T15:00:00.000Z');
    expect(holiday.state).toBe('closed');
    expect(holiday.age).toBeGreaterThanOrEqual(3599);
    expect(holiday.age).toBeLessThanOrEqual(3600);
    const tradingDay = await maxAge('/api/quotes/NVDA', '2026-11-25T15:00:00.000Z');
    expect(tradingDay.state).toBe('open');
    expect(tradingDay.age).toBeLessThanOrEqual(svc.config.cache.ttlMs / 1000);
  });

  it('when a US stock is read on Thanksgiving evening (18:00 New York), then it is closed, not post-market, and kept an hour', async () => {
    const evening = await maxAge('/api/quotes/AMZN', '2026-11-26T23:00:00.000Z');
    expect(evening.state).toBe('closed');
    expect(evening.age).toBeGreaterThanOrEqual(3599);
    expect(evening.age).toBeLessThanOrEqual(3600);
  });
});

describe('GET /api/markets/{market}/sessions', () => {
  const path = '/api/markets/{market}/sessions';

  it('when the US week of Thanksgiving 2026 is asked (lower-case code), then Thursday is missing and Friday closes at 13:00 New York, cacheable for an hour', async () => {
    const res = await svc.fetch('/api/markets/us/sessions?start=2026-11-23&end=2026-11-29');
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('public, max-age=3600');
    const body = (await res.json()) as SessionsBody;
    expect(schemaViolations('MarketSessionsResponse', body)).toEqual([]);
    expect(body.data.market).toBe('US');
    expect(body.data.timezone).toBe('America/New_York');
    expect(body.data.sessions.map((s) => s.date)).toEqual(['2026-11-23', '2026-11-24', '2026-11-25', '2026-11-27']);
    expect(body.data.sessions[3]).toEqual({ date: '2026-11-27', open: '2026-11-27T14:30:00.000Z', close: '2026-11-27T18:00:00.000Z', break_start: null, break_end: null });
    expect(body.data.sessions[0]).toEqual({ date: '2026-11-23', open: '2026-11-23T14:30:00.000Z', close: '2026-11-23T21:00:00.000Z', break_start: null, break_end: null });
  });

  it('when Hong Kong around Lunar New Year 2026 is asked, then the eve is a half day without a break and regular days carry the lunch break', async () => {
    const res = await svc.fetch('/api/markets/HK/sessions?start=2026-02-13&end=2026-02-20');
    expect(res.status).toBe(200);
    const body = (await res.json()) as SessionsBody;
    expect(body.data.sessions).toEqual([
      { date: '2026-02-13', open: '2026-02-13T01:30:00.000Z', close: '2026-02-13T08:00:00.000Z', break_start: '2026-02-13T04:00:00.000Z', break_end: '2026-02-13T05:00:00.000Z' },
      { date: '2026-02-16', open: '2026-02-16T01:30:00.000Z', close: '2026-02-16T04:00:00.000Z', break_start: null, break_end: null },
      { date: '2026-02-20', open: '2026-02-20T01:30:00.000Z', close: '2026-02-20T08:00:00.000Z', break_start: '2026-02-20T04:00:00.000Z', break_end: '2026-02-20T05:00:00.000Z' },
    ]);
  });

  it('when a span just under 10 years is asked, then every session comes back', async () => {
    const res = await svc.fetch('/api/markets/DE/sessions?start=2016-01-01&end=2025-12-31');
    expect(res.status).toBe(200);
    const body = (await res.json()) as SessionsBody;
    expect(body.data.sessions.length).toBeGreaterThan(2500);
    expect(body.data.sessions[0]?.date).toBe('2016-01-04');
    expect(body.data.sessions.at(-1)?.date).toBe('2025-12-30');
  });

  async function rejected(target: string, status: number): Promise<Envelope> {
    const res = await svc.fetch(target);
    expect(res.status, target).toBe(status);
    expectDocumentedStatus(res, 'get', path);
    const body = (await res.json()) as Envelope;
    expect(body).toMatchObject({ success: false, code: status });
    return body;
  }

  it('when start is after end, then 422 naming the rule', async () => {
    const body = await rejected('/api/markets/US/sessions?start=2026-11-30&end=2026-11-23', 422);
    expect(body.violations).toEqual([{ path: 'query.start', message: 'must not be after end' }]);
  });

  it('when the span is 10 years or more, then 422 naming the 10-year rule', async () => {
    const body = await rejected('/api/markets/US/sessions?start=2016-01-01&end=2026-01-01', 422);
    expect(body.violations).toEqual([{ path: 'query.end', message: 'must be less than 10 years after start (before 2026-01-01)' }]);
  });

  it('when the market is unknown, then a 404 envelope names it', async () => {
    const body = await rejected('/api/markets/XX/sessions?start=2026-11-23&end=2026-11-29', 404);
    expect(body.error).toBe("Unknown market 'XX'");
  });

  it('when a date is malformed or not a calendar date, or missing, then 422 naming the parameter', async () => {
    for (const query of ['start=2026-13-01&end=2026-12-31', 'start=26-11-01&end=2026-11-30', 'start=2026-02-30&end=2026-03-31', 'end=2026-11-30']) {
      const body = await rejected(`/api/markets/US/sessions?${query}`, 422);
      expect(body.violations?.some((v) => v.path.includes('start')), query).toBe(true);
    }
  });

  it('when dates fall outside what the calendar covers (before 2000, the US after 2035), then 422 saying where it starts or ends', async () => {
    const early = await rejected('/api/markets/US/sessions?start=1999-12-01&end=2000-01-31', 422);
    expect(early.violations).toEqual([{ path: 'query.start', message: 'must be on or after 2000-01-01: the US calendar starts there' }]);
    const late = await rejected('/api/markets/US/sessions?start=2035-12-01&end=2036-01-31', 422);
    expect(late.violations).toEqual([{ path: 'query.end', message: 'must be on or before 2035-12-31: the US calendar is known that far' }]);
  });

  it('when a year from 0000 to 0099 is asked, then it is read as that year (ISO 8601), not refused as no calendar date', async () => {
    const body = await rejected('/api/markets/US/sessions?start=0015-10-20&end=2026-11-30', 422);
    expect(body.violations).toEqual([
      { path: 'query.end', message: 'must be less than 10 years after start (before 0025-10-20)' },
      { path: 'query.start', message: 'must be on or after 2000-01-01: the US calendar starts there' },
    ]);
    const zero = await rejected('/api/markets/US/sessions?start=0000-02-29&end=0000-03-01', 422);
    expect(zero.violations?.map((v) => v.message)).not.toContain('must be a calendar date, YYYY-MM-DD');
  });

  it('when Hong Kong is asked beyond its tables (2028), then 422 saying how far the calendar is known', async () => {
    const body = await rejected('/api/markets/HK/sessions?start=2027-12-01&end=2028-01-31', 422);
    expect(body.violations).toEqual([{ path: 'query.end', message: 'must be on or before 2027-12-31: the HK calendar is known that far' }]);
  });
});

describe('GET /api/markets/{market}/sessions with DATA_REQUIRES_AUTH', () => {
  it('when market data requires authentication, then sessions are 401 anonymously and 200 with an API key', async () => {
    const closed = await startTestService({ DATA_REQUIRES_AUTH: 'true', API_KEYS: API_KEY });
    try {
      const target = '/api/markets/JP/sessions?start=2026-11-23&end=2026-11-27';
      const anonymous = await closed.fetch(target);
      expect(anonymous.status).toBe(401);
      expect(await anonymous.json()).toMatchObject({ success: false, code: 401 });
      const byKey = await closed.fetch(target, { headers: { 'X-API-Key': API_KEY } });
      expect(byKey.status).toBe(200);
      const body = (await byKey.json()) as SessionsBody;
      // Labor Thanksgiving Day (Monday 23 November) closes Tokyo.
      expect(body.data.sessions.map((s) => s.date)).toEqual(['2026-11-24', '2026-11-25', '2026-11-26', '2026-11-27']);
    } finally {
      await closed.close();
    }
  });
});
