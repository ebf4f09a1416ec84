/**
 * The cross-check of daily closes between providers (DESIGN 20) over HTTP: a chain `polygon,yahoo`,
 * Polygon replayed from its recorded AAPL aggregates (2023-01-03 to 2023-01-10) and Yahoo from a chart
 * answer in Yahoo's own format built from the same recorded values (the recordings' windows do not
 * overlap), one close moved. A backfill (background work) compares the overlapping closes: 2 % apart
 * is recorded in GET /api/admin/data-issues with both values and both providers; 0.1 % apart is not.
 * POST /api/admin/history/verify runs the same comparison as a job, and records what it finds the same way. And two repairs a second provider
 * settles on a caller's read: a 4:1 step with no split event in Polygon's answer, confirmed by Yahoo's
 * unstepped bars, and a session Polygon lacks and Yahoo has.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fixture, startReplayUpstream, type ReplayUpstream } from '../helpers/replay-upstream.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const JSON_TYPE = 'application/json';
const POLYGON_AGGS = fixture('polygon-aggs-AAPL-1day-2023-01-01-2023-01-10.json');
const BARS = (JSON.parse(POLYGON_AGGS.toString('utf8')) as { results: Array<{ o: number; h: number; l: number; c: number; v: number; t: number }> }).results;
/** The bar whose close Yahoo gives differently: 2023-01-05. */
const MOVED = 2;

/** Yahoo's chart answer (the format of its recorded answers) for AAPL with Polygon's recorded bars, close MOVED scaled by `factor`. */
function yahooChart(factor: number): string {
  // Yahoo stamps a US daily bar at the session's open (14:30Z in winter); Polygon at New York midnight.
  const timestamp = BARS.map((b) => (b.t + 9.5 * 3_600_000) / 1000);
  const close = BARS.map((b, i) => (i === MOVED ? Math.round(b.c * factor * 100) / 100 : b.c));
  const high = BARS.map((b, i) => Math.max(b.h, close[i]!));
  const low = BARS.map((b, i) => Math.min(b.l, close[i]!));
  return JSON.stringify({
    chart: {
      result: [
        {
          meta: { currency: 'USD', symbol: 'AAPL', exchangeName: 'NMS', fullExchangeName: 'NasdaqGS', instrumentType: 'EQUITY', regularMarketPrice: 130.73, chartPreviousClose: 129.93, priceHint: 2, gmtoffset: -18000, timezone: 'EST', exchangeTimezoneName: 'America/New_York', dataGranularity: '1d', range: '' },
          timestamp,
          events: {},
          indicators: { quote: [{ open: BARS.map((b) => b.o), high, low, close, volume: BARS.map((b) => b.v) }], adjclose: [{ adjclose: close }] },
        },
      ],
      error: null,
    },
  });
}

interface Issue {
  symbol: string;
  time: string;
  rule: string;
  action: string;
  flag?: string;
  before: { close: number } | null;
  after: { close: number } | null;
  providers: string[];
  closes?: { stored: { provider: string; close: number }; others: Array<{ provider: string; close: number }> };
}

let polygon: ReplayUpstream;
beforeAll(async () => {
  polygon = await startReplayUpstream({
    routes: [
      { path: /^\/v2\/aggs\/ticker\/AAPL\/range\/1\/day\//, status: 200, contentType: JSON_TYPE, gzip: true, body: POLYGON_AGGS },
      { path: '/v3/reference/dividends', status: 200, contentType: JSON_TYPE, body: '{"results":[],"status":"OK","request_id":"d1"}' },
      { path: '/v3/reference/splits', status: 200, contentType: JSON_TYPE, body: '{"results":[],"status":"OK","request_id":"s1"}' },
    ],
    notFound: { status: 404, contentType: JSON_TYPE, body: '{"status":"NOT_FOUND","request_id":"n1","message":"Ticker not found."}' },
  });
});
afterAll(() => polygon.close());

describe('the cross-check of daily closes, Polygon and Yahoo replayed', () => {
  let yahoo: ReplayUpstream | undefined;
  let svc: TestService | undefined;
  afterEach(async () => {
    await svc?.close();
    await yahoo?.close();
    svc = undefined;
    yahoo = undefined;
  });

  let auth: Record<string, string> = {};
  /** Starts the service over the chain `polygon,yahoo`, Yahoo answering closes scaled by `factor` on one day, and signs in as the administrator. */
  async function startWith(factor: number): Promise<TestService> {
    yahoo = await startReplayUpstream({ routes: [{ path: '/v8/finance/chart/AAPL', status: 200, contentType: JSON_TYPE, body: yahooChart(factor) }] });
    svc = await startTestService(
      { MARKET_DATA_PROVIDERS: 'polygon,yahoo', POLYGON_API_KEYS: 'polygon-cross-key-0001', POLYGON_BASE_URL: polygon.baseUrl, POLYGON_PLAN: 'developer', YAHOO_BASE_URL: yahoo.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' },
      { init: true },
    );
    const token = await svc.login(ADMIN.username, ADMIN.password);
    auth = { authorization: `Bearer ${token}` };
    return svc;
  }
  /** The data issues of AAPL recorded so far, newest first. */
  async function dataIssues(): Promise<Issue[]> {
    const listed = await svc!.fetch('/api/admin/data-issues?symbol=AAPL&since=2020-01-01', { headers: auth });
    expect(listed.status).toBe(200);
    return ((await listed.json()) as { data: Issue[] }).data;
  }
  /** Backfills AAPL from 2023-01-03 with Yahoo answering closes scaled by `factor` on one day; the data issues recorded after. */
  async function backfillWith(factor: number): Promise<{ issues: Issue[]; yahooAsked: number; history: { source: string; data: { candles: Array<{ time: string; close: number; flags?: string[] }> } } }> {
    await startWith(factor);
    const res = await svc!.fetch('/api/admin/history/backfill', { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ symbols: ['AAPL'], interval: '1d', since: '2023-01-03' }) });
    expect(res.status).toBe(202);
    const { job_id } = (await res.json()) as { job_id: string };
    let job: { data: { state: string; candles: number; failures: unknown[] } } | undefined;
    await waitFor(async () => (job = (await (await svc!.fetch(`/api/admin/history/jobs/${job_id}`, { headers: auth })).json()) as typeof job)!.data.state === 'done', { timeoutMs: 15_000, message: 'the backfill to finish' });
    expect(job!.data.failures).toEqual([]);
    expect(job!.data.candles).toBe(BARS.length);
    const issues = await dataIssues();
    const history = await svc!.fetch('/api/history/AAPL?interval=1d&start=2023-01-03&end=2023-01-11');
    expect(history.status).toBe(200);
    return { issues, yahooAsked: yahoo!.requests.filter((r) => r.path.startsWith('/v8/finance/chart/AAPL')).length, history: (await history.json()) as never };
  }

  it('when Yahoo gives one close 2 % above Polygon, then the backfill records the divergence with both values and both providers, and the stored bar is flagged divergent', async () => {
    const { issues, yahooAsked, history } = await backfillWith(1.02);
    expect(yahooAsked).toBeGreaterThan(0);
    const moved = BARS[MOVED]!;
    // mds stamps a daily bar at the session's open, whichever provider gave it.
    const time = new Date(moved.t + 9.5 * 3_600_000).toISOString();
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ symbol: 'AAPL', time, rule: 'divergent', action: 'suspect', flag: 'divergent', providers: ['polygon', 'yahoo'] });
    expect(issues[0]!.closes).toEqual({ stored: { provider: 'polygon', close: moved.c }, others: [{ provider: 'yahoo', close: Math.round(moved.c * 1.02 * 100) / 100 }] });
    // The stored bar, as Polygon gave it and as it is served.
    expect([issues[0]!.before!.close, issues[0]!.after!.close]).toEqual([moved.c, moved.c]);
    expect(history.source).toBe('polygon');
    const flagged = history.data.candles.filter((c) => c.flags !== undefined);
    expect(flagged).toEqual([expect.objectContaining({ time, close: moved.c, flags: ['divergent'] })]);
  });

  it('when Yahoo gives one close 0.1 % above Polygon, then the backfill compares it and records nothing', async () => {
    const { issues, yahooAsked, history } = await backfillWith(1.001);
    expect(yahooAsked).toBeGreaterThan(0);
    expect(issues).toEqual([]);
    expect(history.data.candles.map((c) => c.close)).toEqual(BARS.map((b) => b.c));
    expect(history.data.candles.some((c) => c.flags !== undefined)).toBe(false);
  });

  it('when an administrator starts a verify job over the backfilled store, then 202 names a job that GET /api/admin/history/jobs/{id} shows done with the diverging bar and both closes', async () => {
    await backfillWith(1.02);
    const moved = BARS[MOVED]!;
    const post = (body: unknown, headers = auth) => svc!.fetch('/api/admin/history/verify', { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const asked = yahoo!.requests.length;
    const res = await post({ symbols: ['aapl'], interval: '1d', since: '2023-01-03' });
    expect(res.status).toBe(202);
    const started = (await res.json()) as { job_id: string; data: { kind: string; repair: boolean; symbols: string[] } };
    expect(started.data).toMatchObject({ kind: 'verify', repair: false, symbols: ['AAPL'] });
    type Job = { data: { kind: string; state: string; checked: number; done_symbols: number; failures: unknown[]; divergences: Array<{ symbol: string; time: string; stored: number; fetched: Record<string, number>; repaired: boolean }> } };
    let job: Job | undefined;
    await waitFor(async () => (job = (await (await svc!.fetch(`/api/admin/history/jobs/${started.job_id}`, { headers: auth })).json()) as Job).data.state === 'done', { timeoutMs: 15_000, message: 'the verify job to finish' });
    expect(job!.data).toMatchObject({ kind: 'verify', done_symbols: 1, checked: BARS.length, failures: [] });
    expect(job!.data.divergences).toEqual([{ symbol: 'AAPL', time: new Date(moved.t + 9.5 * 3_600_000).toISOString(), stored: moved.c, fetched: { yahoo: Math.round(moved.c * 1.02 * 100) / 100 }, repaired: false }]);
    // The job asked the providers again (Yahoo among them).
    expect(yahoo!.requests.length).toBeGreaterThan(asked);

    // The divergence is on record once, from the backfill's cross-check; the job found the same.
    expect(await dataIssues()).toEqual([expect.objectContaining({ rule: 'divergent', providers: ['polygon', 'yahoo'] })]);

    const future = await post({ symbols: ['AAPL'], since: '2999-01-01' });
    expect(future.status).toBe(422);
    expect(((await future.json()) as { error: string }).error).toContain('body.since must not be in the future');
    const anonymous = await post({ symbols: ['AAPL'] }, {});
    expect(anonymous.status).toBe(401);
  });

  it("when a caller's read stored Polygon's bars and a verify job finds Yahoo's close 2 % away, then the data issue names both providers and both closes", async () => {
    const service = await startWith(1.02);
    const moved = BARS[MOVED]!;
    const read = await service.fetch('/api/history/AAPL?interval=1d&start=2023-01-03&end=2023-01-11');
    expect(read.status).toBe(200);
    expect(((await read.json()) as { source: string }).source).toBe('polygon');
    // A caller's read is never cross-checked: what is on record comes from the verify job.
    expect(await dataIssues()).toEqual([]);

    const res = await service.fetch('/api/admin/history/verify', { method: 'POST', headers: { ...auth, 'content-type': JSON_TYPE }, body: JSON.stringify({ symbols: ['AAPL'], interval: '1d', since: '2023-01-03' }) });
    expect(res.status).toBe(202);
    const { job_id } = (await res.json()) as { job_id: string };
    type Job = { data: { state: string; divergences: unknown[] } };
    let job: Job | undefined;
    await waitFor(async () => (job = (await (await service.fetch(`/api/admin/history/jobs/${job_id}`, { headers: auth })).json()) as Job).data.state === 'done', { timeoutMs: 15_000, message: 'the verify job to finish' });
    expect(job!.data.divergences).toHaveLength(1);

    const issues = await dataIssues();
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ time: new Date(moved.t + 9.5 * 3_600_000).toISOString(), rule: 'divergent', action: 'suspect', flag: 'divergent', providers: ['polygon', 'yahoo'] });
    expect(issues[0]!.closes).toEqual({ stored: { provider: 'polygon', close: moved.c }, others: [{ provider: 'yahoo', close: Math.round(moved.c * 1.02 * 100) / 100 }] });
    expect([issues[0]!.before!.close, issues[0]!.after!.close]).toEqual([moved.c, moved.c]);
  });
});

/** Polygon's aggregates answer (its recorded format) for AAPL with the recorded bars after `change`. */
function polygonAggs(change: (bars: typeof BARS) => typeof BARS): string {
  const recorded = JSON.parse(POLYGON_AGGS.toString('utf8')) as { results: typeof BARS; resultsCount: number; queryCount: number; count: number };
  const results = change(structuredClone(recorded.results));
  return JSON.stringify({ ...recorded, results, resultsCount: results.length, queryCount: results.length, count: results.length });
}

describe('repairs a second replayed provider settles, over HTTP', () => {
  let poly: ReplayUpstream | undefined;
  let yahoo: ReplayUpstream | undefined;
  let svc: TestService | undefined;
  afterEach(async () => {
    await svc?.close();
    await poly?.close();
    await yahoo?.close();
    svc = poly = yahoo = undefined;
  });

  /** A chain `polygon,yahoo`: Polygon answering `aggs`, Yahoo the recorded values unchanged; the history read and the data issues after. */
  async function readWith(aggs: string) {
    poly = await startReplayUpstream({
      routes: [
        { path: /^\/v2\/aggs\/ticker\/AAPL\/range\/1\/day\//, status: 200, contentType: JSON_TYPE, body: aggs },
        { path: '/v3/reference/dividends', status: 200, contentType: JSON_TYPE, body: '{"results":[],"status":"OK","request_id":"d1"}' },
        { path: '/v3/reference/splits', status: 200, contentType: JSON_TYPE, body: '{"results":[],"status":"OK","request_id":"s1"}' },
      ],
    });
    yahoo = await startReplayUpstream({ routes: [{ path: '/v8/finance/chart/AAPL', status: 200, contentType: JSON_TYPE, body: yahooChart(1) }] });
    svc = await startTestService(
      { MARKET_DATA_PROVIDERS: 'polygon,yahoo', POLYGON_API_KEYS: 'polygon-cross-key-0001', POLYGON_BASE_URL: poly.baseUrl, POLYGON_PLAN: 'developer', YAHOO_BASE_URL: yahoo.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' },
      { init: true },
    );
    const res = await svc.fetch('/api/history/AAPL?interval=1d&start=2023-01-03&end=2023-01-11');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { source: string; data: { candles: Array<{ time: string; close: number; flags?: string[] }>; quality?: Record<string, number> } };
    const token = await svc.login(ADMIN.username, ADMIN.password);
    const listed = await svc.fetch('/api/admin/data-issues?symbol=AAPL', { headers: { authorization: `Bearer ${token}` } });
    expect(listed.status).toBe(200);
    return { body, issues: ((await listed.json()) as { data: Issue[] }).data };
  }
  const opened = (i: number) => new Date(BARS[i]!.t + 9.5 * 3_600_000).toISOString();

  it("when Polygon's first three bars sit 4x higher with no split event and Yahoo's bars are unstepped, then they are served re-based with repaired_split and recorded as unannounced_split", async () => {
    const { body, issues } = await readWith(polygonAggs((bars) => bars.map((b, i) => (i < 3 ? { ...b, o: b.o * 4, h: b.h * 4, l: b.l * 4, c: b.c * 4, v: Math.round(b.v / 4) } : b))));
    const candles = body.data.candles;
    expect(candles.map((c) => c.time)).toEqual(BARS.map((_, i) => opened(i)));
    for (const [i, c] of candles.entries()) {
      expect(c.close, c.time).toBeCloseTo(BARS[i]!.c, 2);
      expect(c.flags, c.time).toEqual(i < 3 ? ['repaired_split'] : undefined);
    }
    const split = issues.filter((i) => i.rule === 'unannounced_split');
    expect(split.map((i) => i.time).sort()).toEqual([opened(0), opened(1), opened(2)]);
    expect(split[0]).toMatchObject({ action: 'repaired', providers: ['polygon', 'yahoo'] });
  });

  it('when Polygon lacks the session of 2023-01-06 and Yahoo has it, then it is served from Yahoo flagged filled_from_yahoo and recorded as missing_session', async () => {
    const { body, issues } = await readWith(polygonAggs((bars) => bars.filter((_, i) => i !== 3)));
    const filled = body.data.candles.find((c) => c.time === opened(3));
    expect(filled).toMatchObject({ close: BARS[3]!.c, flags: ['filled_from_yahoo'] });
    expect(body.data.candles).toHaveLength(BARS.length);
    expect(issues).toEqual([expect.objectContaining({ rule: 'missing_session', action: 'repaired', time: opened(3), before: null, flag: 'filled_from_yahoo' })]);
  });
});

describe('per-candle provenance where providers mix, over HTTP', () => {
  it('when Yahoo stored the first days of a window and Polygon, now first in the chain, fills the rest, then the answer counts the candles by provider in sources', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mds-sources-'));
    const yahoo = await startReplayUpstream({ routes: [{ path: '/v8/finance/chart/AAPL', status: 200, contentType: JSON_TYPE, body: yahooChart(1) }] });
    const env = { POLYGON_API_KEYS: 'polygon-cross-key-0001', POLYGON_BASE_URL: polygon.baseUrl, POLYGON_PLAN: 'developer', YAHOO_BASE_URL: yahoo.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' };
    try {
      const first = await startTestService({ ...env, MARKET_DATA_PROVIDERS: 'yahoo' }, { init: true, dir });
      try {
        const res = await first.fetch('/api/history/AAPL?interval=1d&start=2023-01-03&end=2023-01-05');
        expect(res.status).toBe(200);
        const body = (await res.json()) as { source: string; data: { candles: unknown[]; sources?: unknown } };
        expect(body.source).toBe('yahoo');
        expect(body.data.candles).toHaveLength(2);
        // One provider gave them all: no sources.
        expect(body.data.sources).toBeUndefined();
      } finally {
        await first.close();
      }
      const second = await startTestService({ ...env, MARKET_DATA_PROVIDERS: 'polygon,yahoo' }, { dir });
      try {
        const res = await second.fetch('/api/history/AAPL?interval=1d&start=2023-01-03&end=2023-01-11');
        expect(res.status).toBe(200);
        const body = (await res.json()) as { data: { candles: Array<{ close: number }>; sources?: Record<string, number> } };
        expect(body.data.candles.map((c) => c.close)).toEqual(BARS.map((b) => b.c));
        expect(body.data.sources).toEqual({ yahoo: 2, polygon: 4 });
        expect(second.violations).toEqual([]);
      } finally {
        await second.close();
      }
    } finally {
      await yahoo.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
