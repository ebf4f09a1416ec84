/**
 * GET /api/history through the history store, over HTTP, with Yahoo replayed from a recorded real
 * response (AAPL, 2020-08-31 to 2020-11-06, with the 4:1 split of 2020-08-31) by a local server that
 * counts what it is asked and can fail. The representation cache is flushed between reads, so what
 * answers is the store.
 */
import { join, resolve } from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { tableFromIPC } from 'apache-arrow';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';

const FIXTURES = resolve(import.meta.dirname, '..', 'fixtures', 'yahoo');
const DAY_MS = 86_400_000;

interface HistoryBody {
  success: boolean;
  data: {
    candles: Array<{ time: string; open: number; high: number; low: number; close: number; adj_close: number | null; volume: number | null }>;
    events: { dividends: Array<{ time: string; amount: number }>; splits: Array<{ time: string; numerator: number; denominator: number }> };
    partial?: boolean;
    missing?: Array<{ start: string; end: string }>;
  };
}

describe('history through the store, Yahoo replayed', () => {
  let upstream: FakeUpstream;
  let svc: TestService;
  let token: string;
  /** Requests the upstream received before this test. */
  let seen = 0;

  beforeAll(async () => {
    upstream = await startFakeUpstream({ fixturesDir: FIXTURES });
  });
  afterAll(async () => upstream?.close());

  beforeEach(async () => {
    await upstream.setMode('replay');
    svc = await startTestService({ MARKET_DATA_PROVIDER: 'yahoo', MARKET_DATA_BASE_URL: upstream.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' }, { init: true });
    token = await svc.login(ADMIN.username, ADMIN.password);
    seen = upstream.requestLog.length;
  });
  afterEach(async () => svc?.close());

  const flush = async () => expect((await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  const history = async (query: string) => {
    const res = await svc.fetch(`/api/history/AAPL?interval=1d&${query}`);
    return { status: res.status, body: (await res.json()) as HistoryBody };
  };
  const chartRequests = () => upstream.requestLog.slice(seen).filter((r) => r.url.startsWith('/v8/finance/chart/AAPL'));

  it('when the same window is read again after the cache is flushed, then the upstream is asked nothing and the answer is the same', async () => {
    const first = await history('start=2020-09-01&end=2020-10-01');
    expect(first.status).toBe(200);
    expect(first.body.data.candles.length).toBe(21);
    expect(chartRequests()).toHaveLength(1);

    await flush();
    const second = await history('start=2020-09-01&end=2020-10-01');

    expect(second.status).toBe(200);
    expect(chartRequests()).toHaveLength(1);
    expect(second.body.data.candles).toEqual(first.body.data.candles);
  });

  it('when a wider window is read, then only the missing span is asked of the upstream', async () => {
    await history('start=2020-09-01&end=2020-10-01');
    await flush();

    const wider = await history('start=2020-08-15&end=2020-10-01');

    expect(wider.status).toBe(200);
    const asked = chartRequests().map((r) => new URL(r.url, 'http://x').searchParams);
    expect(asked).toHaveLength(2);
    // 2020-08-15 is a Saturday: the window starts with Monday's session, named by its date.
    expect(Number(asked[1]!.get('period1')) * 1000).toBe(Date.UTC(2020, 7, 17));
    expect(Number(asked[1]!.get('period2')) * 1000).toBe(Date.UTC(2020, 8, 1));
    expect(wider.body.data.candles[0]!.time).toBe('2020-08-31T13:30:00.000Z');
    expect(wider.body.data.candles.length).toBe(22);
  });

  it('when the upstream fails, then the stored window answers 200 whole, and a window reaching past it 200 with partial and the missing span', async () => {
    const stored = await history('start=2020-09-01&end=2020-10-01');
    await upstream.setMode('error500');
    await flush();

    const again = await history('start=2020-09-01&end=2020-10-01');
    expect(again.status).toBe(200);
    expect(again.body.data.partial).toBeUndefined();
    expect(again.body.data.candles).toEqual(stored.body.data.candles);

    const past = await history('start=2020-09-01&end=2020-10-15');
    expect(past.status).toBe(200);
    expect(past.body.data.partial).toBe(true);
    expect(past.body.data.missing).toEqual([{ start: '2020-10-01T00:00:00.000Z', end: '2020-10-15T00:00:00.000Z', reason: 'upstream_failed' }]);
    expect(past.body.data.candles).toEqual(stored.body.data.candles);
  });

  it('when nothing is stored and the upstream fails, then 503', async () => {
    await upstream.setMode('error500');

    expect((await history('start=2020-09-01&end=2020-10-01')).status).toBe(503);
  });

  it('when bars stored before the 4:1 split meet bars fetched after it, then no answer mixes pre- and post-split prices; adjust=none gives the traded prices', async () => {
    // Bars of August 2020 as an upstream gave them before the split took effect: four times the price.
    const db = await openUserStore(svc.config.database.url, { runMigrations: true });
    const before = { provider: 'yahoo', fetchedAtMs: Date.UTC(2020, 7, 29) };
    const august = [];
    for (let day = 3; day <= 28; day++) {
      const t = Date.UTC(2020, 7, day, 13, 30);
      if ([0, 6].includes(new Date(t).getUTCDay())) continue;
      august.push({ timeMs: t, open: 496, high: 500, low: 490, close: 498, adjClose: 496.5, volume: 30_000_000 });
    }
    await db.candles.putCandles('AAPL', '1d', august, before);
    await db.candles.putInstrument('AAPL', { currency: 'USD', timezone: 'America/New_York' }, before);
    await db.candles.markCovered('AAPL', '1d', { startMs: Date.UTC(2020, 7, 1), endMs: Date.UTC(2020, 7, 29) }, before);
    await db.close();

    const read = await history('start=2020-08-01&end=2020-09-15');

    expect(read.status).toBe(200);
    const pre = read.body.data.candles.filter((c) => c.time < '2020-08-31');
    const post = read.body.data.candles.filter((c) => c.time >= '2020-08-31');
    expect(pre).toHaveLength(august.length);
    expect(post.length).toBeGreaterThan(5);
    expect(pre.every((c) => c.close === 124.5 && c.volume === 120_000_000)).toBe(true);
    expect(post.every((c) => c.close > 100 && c.close < 140)).toBe(true);
    expect(read.body.data.events.splits).toEqual([{ time: '2020-08-31T13:30:00.000Z', numerator: 4, denominator: 1 }]);

    const raw = await history('start=2020-08-01&end=2020-09-15&adjust=none');
    expect(raw.body.data.candles.filter((c) => c.time < '2020-08-31').every((c) => c.close === 498 && c.volume === 30_000_000)).toBe(true);
  });
});

describe('history exports', () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startTestService({ CACHE_URL: 'redis://127.0.0.1:1/0' }, { init: true });
  });
  afterAll(async () => svc?.close());

  it('when CSV and Arrow are asked for, then a CSV parser and the Arrow reader give back the JSON candles', async () => {
    const json = (await (await svc.fetch('/api/history/AAPL?interval=1d&range=3mo')).json()) as HistoryBody;
    const csv = await svc.fetch('/api/history/AAPL?interval=1d&range=3mo&format=csv');
    const arrow = await svc.fetch('/api/history/AAPL?interval=1d&range=3mo', { headers: { accept: 'application/vnd.apache.arrow.stream' } });

    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const rows = parseCsv(await csv.text(), { columns: true }) as Array<Record<string, string>>;
    expect(arrow.status).toBe(200);
    expect(arrow.headers.get('content-type')).toBe('application/vnd.apache.arrow.stream');
    const table = tableFromIPC(new Uint8Array(await arrow.arrayBuffer()));

    expect(json.data.candles.length).toBeGreaterThan(50);
    expect(rows).toHaveLength(json.data.candles.length);
    expect(table.numRows).toBe(json.data.candles.length);
    json.data.candles.forEach((c, i) => {
      expect(rows[i]).toEqual({ time: c.time, open: String(c.open), high: String(c.high), low: String(c.low), close: String(c.close), adj_close: c.adj_close === null ? '' : String(c.adj_close), volume: c.volume === null ? '' : String(c.volume) });
      const row = table.get(i)!.toJSON() as Record<string, unknown>;
      expect(new Date(row.time as number).toISOString()).toBe(c.time);
      expect([row.open, row.high, row.low, row.close, row.adj_close]).toEqual([c.open, c.high, c.low, c.close, c.adj_close]);
      expect(row.volume === null ? null : Number(row.volume)).toBe(c.volume);
    });
    expect(String(table.schema.fields.map((f) => `${f.name}:${f.type}`))).toBe(
      'time:Timestamp<MILLISECOND, UTC>,open:Float64,high:Float64,low:Float64,close:Float64,adj_close:Float64,volume:Int64',
    );
  });

  it('when a window holds more candles than one JSON answer, then JSON is 422 and CSV and Arrow stream them all', async () => {
    // A fixed window on the 5-minute grid: a range relative to now grows by a bar when a boundary passes between two requests.
    const endMs = Math.floor(Date.now() / 300_000) * 300_000 - 3_600_000;
    const path = `/api/history/BTC-USD?interval=5m&start=${new Date(endMs - 30 * DAY_MS).toISOString()}&end=${new Date(endMs).toISOString()}`;
    const json = await svc.fetch(path);
    expect(json.status).toBe(422);
    expect(((await json.json()) as { error: string }).error).toContain('format=csv or arrow');

    const csv = await svc.fetch(`${path}&format=csv`);
    expect(csv.status).toBe(200);
    expect(csv.headers.get('cache-control')).toBe('no-store');
    const rows = parseCsv(await csv.text(), { columns: true }) as Array<Record<string, string>>;
    expect(rows.length).toBeGreaterThan(8000);
    const times = rows.map((r) => Date.parse(r.time!));
    expect(times.every((t, i) => i === 0 || t - times[i - 1]! === 300_000)).toBe(true);

    const arrow = await svc.fetch(`${path}&format=arrow`);
    const table = tableFromIPC(new Uint8Array(await arrow.arrayBuffer()));
    expect(table.numRows).toBe(rows.length);
    expect(Number(table.get(rows.length - 1)!.toJSON().time)).toBe(times.at(-1));
  });

  it('when an export would carry more than 200,000 candles, then 422 naming the rule; an unknown format is 422 too', async () => {
    const db = await openUserStore(svc.config.database.url, { runMigrations: false });
    // On the minute: a window's bounds are snapped to its interval's grid.
    const start = Math.floor((Date.now() - 20 * DAY_MS) / 60_000) * 60_000;
    const bars = Array.from({ length: 200_001 }, (_, i) => ({ timeMs: start + i * 6000, open: 1, high: 1, low: 1, close: 1, adjClose: null, volume: null }));
    await db.candles.putCandles('BTC-USD', '1m', bars, { provider: 'simulated', fetchedAtMs: Date.now() });
    await db.candles.markCovered('BTC-USD', '1m', { startMs: start, endMs: Date.now() - 60_000 }, { provider: 'simulated', fetchedAtMs: Date.now() });
    await db.close();

    const huge = await svc.fetch(`/api/history/BTC-USD?interval=1m&start=${new Date(start).toISOString()}&end=${new Date(Date.now() - 2 * DAY_MS).toISOString()}&format=csv`);
    expect(huge.status).toBe(422);
    expect(((await huge.json()) as { error: string }).error).toMatch(/more than the 200000 one export carries/);

    const unknownFormat = await svc.fetch('/api/history/AAPL?format=xlsx');
    expect(unknownFormat.status).toBe(422);
    expect(((await unknownFormat.json()) as { error: string }).error).toContain('query.format');
  });

  it('when 1m bars are stored beyond the upstream reach, then they are served where the 422 would otherwise apply', async () => {
    const db = await openUserStore(svc.config.database.url, { runMigrations: false });
    const start = Date.UTC(2025, 0, 6, 15, 0);
    const bars = Array.from({ length: 60 }, (_, i) => ({ timeMs: start + i * 60_000, open: 10 + i, high: 11 + i, low: 9 + i, close: 10.5 + i, adjClose: null, volume: 100 }));
    await db.candles.putCandles('MSFT', '1m', bars, { provider: 'simulated', fetchedAtMs: start + 3_600_000 });
    await db.candles.putInstrument('MSFT', { currency: 'USD', timezone: 'America/New_York' }, { provider: 'simulated', fetchedAtMs: start + 3_600_000 });
    await db.candles.markCovered('MSFT', '1m', { startMs: start, endMs: start + 3_600_000 }, { provider: 'simulated', fetchedAtMs: start + 3_600_000 });
    await db.close();

    const held = await svc.fetch(`/api/history/MSFT?interval=1m&start=${new Date(start).toISOString()}&end=${new Date(start + 3_600_000).toISOString()}`);
    const body = (await held.json()) as HistoryBody;
    expect(held.status).toBe(200);
    expect(body.data.candles.map((c) => c.close)).toEqual(bars.map((b) => b.close));

    const notHeld = await svc.fetch(`/api/history/MSFT?interval=1m&start=${new Date(start - DAY_MS).toISOString()}&end=${new Date(start - DAY_MS + 3_600_000).toISOString()}`);
    expect(notHeld.status).toBe(422);
    expect(((await notHeld.json()) as { error: string }).error).toMatch(/1m candles reach back 30 days at most/);
  });
});
