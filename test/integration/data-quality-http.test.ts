/**
 * The data-quality checks over HTTP (DESIGN 20), with Yahoo replayed from COPIES of the recorded AAPL
 * daily chart (2020-08-31 to 2020-11-06) made here with faults injected (the fixture file itself is
 * never edited): a 100x bar in the middle, high below low, a zero close; and a copy relabelled as a
 * London listing priced in pence (GBp). Each is served repaired with its flag or dropped and counted,
 * recorded in GET /api/admin/data-issues, and served the same by a new instance on the same database
 * with the upstream gone.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';

const RECORDING = resolve(import.meta.dirname, '..', 'fixtures', 'yahoo', 'recorded', 'yahoo-chart-AAPL-1d-2020-08-31-to-2020-11-07.json');

interface Candle {
  time: string;
  open: number;
  high: number;
  low: number;
  close: number;
  adj_close: number | null;
  volume: number | null;
  flags?: string[];
}
interface HistoryBody {
  success: boolean;
  source: string;
  data: { currency: string; candles: Candle[]; quality?: { repaired: number; dropped: number; suspect: number } };
}
interface Issue {
  symbol: string;
  interval: string;
  time: string;
  rule: string;
  action: string;
  flag?: string;
  before: { close: number; high: number; low: number } | null;
  after: { close: number; high: number; low: number } | null;
  providers: string[];
}

type Exchange = { request: { path: string }; response: { body: { chart: { result: Array<Record<string, any>> } } } };

/** Bars (by index in the recording) the faults go into. */
const HUNDRED_X = 24;
const SWAPPED = 10;
const ZERO_CLOSE = 17;

describe('data quality over HTTP, Yahoo replayed with injected faults', () => {
  const fixtures = mkdtempSync(join(tmpdir(), 'mds-quality-fixtures-'));
  const store = mkdtempSync(join(tmpdir(), 'mds-quality-store-'));
  let original: Exchange;
  let upstream: FakeUpstream;
  let svc: TestService | undefined;

  beforeAll(async () => {
    original = JSON.parse(readFileSync(RECORDING, 'utf8')) as Exchange;
    const faulty = structuredClone(original);
    const result = faulty.response.body.chart.result[0]!;
    const quote = result.indicators.quote[0];
    for (const field of ['open', 'high', 'low', 'close']) quote[field][HUNDRED_X] *= 100;
    result.indicators.adjclose[0].adjclose[HUNDRED_X] *= 100;
    [quote.high[SWAPPED], quote.low[SWAPPED]] = [quote.low[SWAPPED], quote.high[SWAPPED]];
    quote.close[ZERO_CLOSE] = 0;

    const pence = structuredClone(original);
    pence.request.path = pence.request.path.replace('/chart/AAPL?', '/chart/VOD.L?');
    const meta = pence.response.body.chart.result[0]!.meta;
    Object.assign(meta, { currency: 'GBp', symbol: 'VOD.L', exchangeName: 'LSE', exchangeTimezoneName: 'Europe/London', timezone: 'GMT', gmtoffset: 0 });

    mkdirSync(join(fixtures, 'recorded'));
    writeFileSync(join(fixtures, 'recorded', 'aapl-faulty.json'), JSON.stringify(faulty));
    writeFileSync(join(fixtures, 'recorded', 'vod-pence.json'), JSON.stringify(pence));
    upstream = await startFakeUpstream({ fixturesDir: fixtures });
  });
  afterAll(async () => {
    await svc?.close();
    await upstream?.close();
    rmSync(fixtures, { recursive: true, force: true });
    rmSync(store, { recursive: true, force: true });
  });

  const start = () => startTestService({ MARKET_DATA_PROVIDER: 'yahoo', MARKET_DATA_BASE_URL: upstream.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' }, { init: true, dir: store });
  const history = async (symbol: string) => {
    const res = await svc!.fetch(`/api/history/${symbol}?interval=1d&start=2020-09-01&end=2020-11-01`);
    return { status: res.status, body: (await res.json()) as HistoryBody };
  };
  const issues = async (query: string) => {
    const token = await svc!.login(ADMIN.username, ADMIN.password);
    const res = await svc!.fetch(`/api/admin/data-issues?${query}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: res.status, body: (await res.json()) as { success: boolean; data: Issue[] } };
  };
  const recorded = (i: number) => {
    const r = original.response.body.chart.result[0]!;
    const q = r.indicators.quote[0];
    return { time: new Date(r.timestamp[i] * 1000).toISOString(), open: q.open[i], high: q.high[i], low: q.low[i], close: q.close[i] };
  };

  it('when the answer holds a 100x bar, high below low and a zero close, then the first two are served repaired with flags, the third dropped, all counted and recorded, and a restart with the upstream gone serves the same', async () => {
    svc = await start();
    const first = await history('AAPL');
    expect(first.status).toBe(200);
    const candles = first.body.data.candles;
    const at = (i: number) => candles.find((c) => c.time === recorded(i).time);

    const hundred = at(HUNDRED_X)!;
    expect(hundred.flags).toEqual(['repaired_unit']);
    expect(hundred.close).toBeCloseTo(recorded(HUNDRED_X).close, 2);
    const swapped = at(SWAPPED)!;
    expect(swapped.flags).toEqual(['repaired_ohlc']);
    expect(swapped.high).toBeCloseTo(recorded(SWAPPED).high, 2);
    expect(swapped.low).toBeCloseTo(recorded(SWAPPED).low, 2);
    expect(at(ZERO_CLOSE)).toBeUndefined();
    // Clean bars carry no flags key at all.
    expect(candles.filter((c) => 'flags' in c)).toHaveLength(2);
    expect(first.body.data.quality).toEqual({ repaired: 2, dropped: 1, suspect: 0 });

    const listed = await issues('symbol=aapl&since=2020-01-01');
    expect(listed.status).toBe(200);
    const byRule = new Map(listed.body.data.map((i) => [i.rule, i]));
    expect([...byRule.keys()].sort()).toEqual(['non_positive_price', 'swapped_high_low', 'unit_100x']);
    expect(byRule.get('unit_100x')).toMatchObject({ symbol: 'AAPL', interval: '1d', time: recorded(HUNDRED_X).time, action: 'repaired', flag: 'repaired_unit', providers: ['yahoo'] });
    expect(byRule.get('unit_100x')!.before!.close).toBeCloseTo(recorded(HUNDRED_X).close * 100, 0);
    expect(byRule.get('non_positive_price')).toMatchObject({ time: recorded(ZERO_CLOSE).time, action: 'dropped', after: null });
    expect(byRule.get('non_positive_price')!.before!.close).toBe(0);

    await svc!.close();
    svc = undefined;
    await upstream.setMode('refuse');
    try {
      svc = await start();
      const again = await history('AAPL');
      expect(again.status).toBe(200);
      expect(again.body.data.candles).toEqual(candles);
      expect(again.body.data.quality).toEqual(first.body.data.quality);
      expect((await issues('symbol=AAPL')).body.data).toHaveLength(3);
    } finally {
      await upstream.setMode('replay');
    }
  });

  it('when a London listing is priced in pence (GBp), then it is served in pounds with repaired_currency on each bar', async () => {
    svc ??= await start();
    const { status, body } = await history('VOD.L');
    expect(status).toBe(200);
    expect(body.data.currency).toBe('GBP');
    const first = body.data.candles[0]!;
    expect(first.close).toBeCloseTo(recorded(1).close / 100, 4);
    expect(body.data.candles.every((c) => c.flags?.includes('repaired_currency'))).toBe(true);
    expect(body.data.quality?.repaired).toBe(body.data.candles.length);
    const listed = await issues('symbol=VOD.L');
    expect(listed.body.data.every((i) => i.rule === 'sub_unit_currency')).toBe(true);
  });

  it('when since is not a date, then 422 in the envelope', async () => {
    svc ??= await start();
    const token = await svc.login(ADMIN.username, ADMIN.password);
    const res = await svc.fetch('/api/admin/data-issues?since=2020-13-45', { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { success: boolean; code: number; error: string };
    expect(body).toMatchObject({ success: false, code: 422 });
    expect(body.error).toMatch(/since/);
  });
});

describe('provenance: the demo, then Yahoo on the same database', () => {
  const store = mkdtempSync(join(tmpdir(), 'mds-provenance-'));
  let upstream: FakeUpstream;
  let svc: TestService | undefined;

  beforeAll(async () => {
    upstream = await startFakeUpstream({ fixturesDir: resolve(import.meta.dirname, '..', 'fixtures', 'yahoo') });
  });
  afterAll(async () => {
    await svc?.close();
    await upstream?.close();
    rmSync(store, { recursive: true, force: true });
  });

  it('when the simulated provider stored a window and Yahoo is configured next, then the window is fetched from Yahoo and named yahoo, never the simulated bars', async () => {
    const window = '/api/history/AAPL?interval=1d&start=2020-09-01&end=2020-10-01';
    svc = await startTestService({ MARKET_DATA_PROVIDER: 'simulated', CACHE_URL: 'redis://127.0.0.1:1/0' }, { init: true, dir: store });
    const demo = (await (await svc.fetch(window)).json()) as HistoryBody;
    expect(demo.source).toBe('simulated');
    expect(demo.data.candles.length).toBeGreaterThan(15);
    await svc.close();
    svc = undefined;

    const before = upstream.requests;
    svc = await startTestService({ MARKET_DATA_PROVIDER: 'yahoo', MARKET_DATA_BASE_URL: upstream.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' }, { dir: store });
    const res = await svc.fetch(window);
    expect(res.status).toBe(200);
    const real = (await res.json()) as HistoryBody;
    expect(real.source).toBe('yahoo');
    expect(upstream.requests).toBeGreaterThan(before);
    const recording = JSON.parse(readFileSync(RECORDING, 'utf8')) as Exchange;
    const result = recording.response.body.chart.result[0]!;
    const yahooClose = new Map<string, number>(result.timestamp.map((t: number, i: number) => [new Date(t * 1000).toISOString(), result.indicators.quote[0].close[i]]));
    expect(real.data.candles).toHaveLength(21);
    for (const c of real.data.candles) expect(c.close).toBeCloseTo(yahooClose.get(c.time)!, 2);
    const simulatedTimes = new Set(demo.data.candles.map((c) => `${c.time}:${c.close}`));
    expect(real.data.candles.some((c) => simulatedTimes.has(`${c.time}:${c.close}`))).toBe(false);
  });
});
