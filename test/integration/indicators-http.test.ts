/**
 * GET /api/indicators/{symbol} over a real socket, with the history store (SQLite) behind it and the
 * simulated upstream: values equal to the studies over a longer stored history (the warm-up), the
 * 422s of each kind of bad study, the cache (MISS, HIT, 304, one key for equivalent lists), and the
 * study columns of the CSV and Arrow exports read back by csv-parse and apache-arrow.
 */
import { tableFromIPC } from 'apache-arrow';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { computeStudy, parseStudies } from '../../src/domain/indicators/catalogue.js';
import type { Series } from '../../src/domain/indicators/studies.js';
import type { components } from '../../src/generated/api.js';
import { startTestService, type TestService } from '../helpers/service.js';

type IndicatorsResponse = components['schemas']['IndicatorsResponse'];
type HistoryResponse = components['schemas']['HistoryResponse'];
type ErrorBody = { success: false; code: number; error: string; violations: Array<{ path: string; message: string }> };

let svc: TestService;

beforeAll(async () => {
  // No Redis: the cache runs in memory, which is all these reads need.
  svc = await startTestService({ CACHE_URL: 'redis://127.0.0.1:1/0' });
});
afterAll(async () => {
  await svc?.close();
});

async function indicators(query: string, init?: RequestInit): Promise<Response> {
  return svc.fetch(`/api/indicators/AAPL?${query}`, init);
}

function close(a: number | null | undefined, b: number | null | undefined): boolean {
  if (a === null || b === null || a === undefined || b === undefined) return a === b;
  return Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b), 1);
}

describe('GET /api/indicators/{symbol}', () => {
  it('when studies are asked over a window, then each series is aligned to the history candles and equals the study over a longer stored history from the first bar on', async () => {
    const window = 'interval=1d&start=2024-01-01&end=2024-07-01';
    const res = await indicators(`${window}&studies=RSI:3,sma:5,ema:4,macd:3:6:2,bbands:5:1.50,adx:3,obv`);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-cache')).toBe('MISS');
    const body = (await res.json()) as IndicatorsResponse;
    // Normalised (lower case, defaults and canonical numbers), sorted.
    expect(Object.keys(body.data.studies)).toEqual(['adx:3', 'bbands:5:1.5', 'ema:4', 'macd:3:6:2', 'obv', 'rsi:3', 'sma:5']);
    const history = (await (await svc.fetch(`/api/history/AAPL?${window}`)).json()) as HistoryResponse;
    expect(body.data.times).toEqual(history.data.candles.map((c) => c.time));
    expect(body.data.times.length).toBeGreaterThan(100);

    // The same studies over the stored history from two years earlier, cut to the window.
    const longer = (await (await svc.fetch('/api/history/AAPL?interval=1d&start=2022-01-01&end=2024-07-01')).json()) as HistoryResponse;
    const candles = longer.data.candles;
    const first = candles.findIndex((c) => c.time === body.data.times[0]);
    expect(first).toBeGreaterThan(400);
    const bars = { high: candles.map((c) => c.high), low: candles.map((c) => c.low), close: candles.map((c) => c.close), volume: candles.map((c) => c.volume ?? 0) };
    for (const study of parseStudies('rsi:3,sma:5,ema:4,macd:3:6:2,bbands:5:1.5,adx:3', false)) {
      const expected = computeStudy(study, { bars, sessions: [] }, first);
      const got = body.data.studies[study.key]!;
      const pairs: Array<[Series, Series]> = Array.isArray(expected) ? [[expected, got as Series]] : Object.keys(expected).map((k) => [expected[k]!, (got as Record<string, Series>)[k]!]);
      for (const [want, have] of pairs) {
        expect(have.length).toBe(want.length);
        expect(have[0], `${study.key}: the window's first value is there`).not.toBeNull();
        const bad = want.map((w, i) => [i, w, have[i]] as const).filter(([, w, h]) => !close(w, h));
        expect(bad.slice(0, 3), study.key).toEqual([]);
      }
    }
    // OBV starts at the window's first bar.
    expect((body.data.studies['obv'] as Series)[0]).toBe(history.data.candles[0]!.volume);
  });

  it('when a crypto pair is asked intraday, then its warm-up is read around the clock and each series equals the study over a longer stored history', async () => {
    // A pair trades every minute: its warm-up (EMA 50 on 15-minute bars: about 740 bars, near 8 days)
    // spans that many days of the calendar, not the five-hour sessions of a listed market.
    const endMs = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 2 * 86_400_000;
    const iso = (ms: number) => new Date(ms).toISOString();
    const window = `interval=15m&start=${iso(endMs - 86_400_000)}&end=${iso(endMs)}`;
    const res = await svc.fetch(`/api/indicators/BTC-USD?${window}&studies=ema:50,rsi:14,sma:20`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as IndicatorsResponse;
    expect(body.data.times.length).toBe(96);
    const longer = (await (await svc.fetch(`/api/history/BTC-USD?interval=15m&start=${iso(endMs - 21 * 86_400_000)}&end=${iso(endMs)}`)).json()) as HistoryResponse;
    const candles = longer.data.candles;
    const first = candles.findIndex((c) => c.time === body.data.times[0]);
    expect(first).toBeGreaterThan(1500);
    const bars = { high: candles.map((c) => c.high), low: candles.map((c) => c.low), close: candles.map((c) => c.close), volume: candles.map((c) => c.volume ?? 0) };
    for (const study of parseStudies('ema:50,rsi:14,sma:20', true)) {
      const want = computeStudy(study, { bars, sessions: [] }, first) as Series;
      const have = body.data.studies[study.key] as Series;
      expect(have.length).toBe(want.length);
      const bad = want.map((w, i) => [i, w, have[i]] as const).filter(([, w, h]) => !close(w, h));
      expect(bad.slice(0, 3), study.key).toEqual([]);
    }
  });

  it('when the same studies are asked again, in another order or spelling, then X-Cache HIT with the same ETag, and the ETag sent back is a 304', async () => {
    const window = 'interval=1d&range=6mo';
    const miss = await indicators(`${window}&studies=rsi,sma:20,macd`);
    expect(miss.status).toBe(200);
    expect(miss.headers.get('x-cache')).toBe('MISS');
    const etag = miss.headers.get('etag')!;
    const hit = await indicators(`${window}&studies=MACD:12:26:9,sma,rsi:14,sma:20`);
    expect(hit.status).toBe(200);
    expect(hit.headers.get('x-cache')).toBe('HIT');
    expect(hit.headers.get('etag')).toBe(etag);
    expect(await hit.text()).toBe(await miss.text());

    const notModified = await indicators(`${window}&studies=rsi,sma:20,macd`, { headers: { 'If-None-Match': etag } });
    expect(notModified.status).toBe(304);
    expect(await notModified.text()).toBe('');
  });

  it.each([
    ['an unknown study', 'sma:20,foo:3', /study "foo:3": unknown study "foo"/],
    ['a period of 0', 'rsi:0', /study "rsi:0": period must be a whole number from 1 to 500/],
    ['a period past 500', 'ema:501', /study "ema:501": period must be a whole number from 1 to 500/],
    ['a period that is not a number', 'sma:abc', /study "sma:abc": period must be a whole number/],
    ['too many parameters', 'obv:3', /study "obv:3": obv takes at most 0 parameter/],
    ['a Bollinger width out of range', 'bbands:20:11', /study "bbands:20:11": deviations must be a number from 0.1 to 10/],
    ['MACD fast not below slow', 'macd:26:12', /study "macd:26:12": the fast period must be shorter/],
    ['VWAP on daily bars', 'vwap', /study "vwap": vwap is anchored at each session's open and needs an intraday interval/],
    ['more than 10 studies', 'sma:1,sma:2,sma:3,sma:4,sma:5,sma:6,sma:7,sma:8,sma:9,sma:10,sma:11', /asks for 11 studies, at most 10/],
    ['an empty entry', 'sma,,rsi', /has an empty study/],
  ])('when the list has %s, then 422 in the envelope naming the study', async (_what, studies, message) => {
    const res = await indicators(`interval=1d&range=1mo&studies=${encodeURIComponent(studies)}`);
    expect(res.status).toBe(422);
    const body = (await res.json()) as ErrorBody;
    expect(body).toMatchObject({ success: false, code: 422 });
    expect(body.violations.map((v) => v.path)).toContain('query.studies');
    expect(body.violations.map((v) => v.message).join(' | ')).toMatch(message);
  });

  it('when several studies are bad at once, then each is named in its own violation; a missing or malformed list is refused by the contract', async () => {
    const res = await indicators('studies=foo,rsi:0,sma');
    expect(res.status).toBe(422);
    const messages = ((await res.json()) as ErrorBody).violations.map((v) => v.message);
    expect(messages).toHaveLength(2);
    expect(messages[0]).toMatch(/"foo"/);
    expect(messages[1]).toMatch(/"rsi:0"/);

    expect((await indicators('range=1mo')).status).toBe(422);
    expect((await indicators(`studies=${encodeURIComponent('sma;drop')}`)).status).toBe(422);
    expect((await indicators(`studies=${'s'.repeat(401)}`)).status).toBe(422);
  });

  it('when VWAP is asked of intraday bars, then it restarts at each session and equals the running volume-weighted typical price', async () => {
    const res = await svc.fetch('/api/indicators/AAPL?interval=15m&range=5d&studies=vwap');
    expect(res.status).toBe(200);
    const body = (await res.json()) as IndicatorsResponse;
    const history = (await (await svc.fetch('/api/history/AAPL?interval=15m&range=5d')).json()) as HistoryResponse;
    expect(body.data.times).toEqual(history.data.candles.map((c) => c.time));
    const vwap = body.data.studies['vwap'] as Series;
    expect(vwap.filter((v) => v !== null).length).toBeGreaterThan(20);
  });

  it('when the symbol is unknown, then 404 in the envelope', async () => {
    const res = await svc.fetch('/api/indicators/NOSUCH?studies=sma');
    expect(res.status).toBe(404);
    expect(((await res.json()) as ErrorBody).code).toBe(404);
  });
});

describe('history exports with studies', () => {
  const window = 'interval=1d&start=2024-01-01&end=2024-04-01';
  const studies = 'sma:20,macd,bbands';

  it('when format=csv has studies, then one column per output after the candle columns, read back by csv-parse equal to the indicators answer', async () => {
    const res = await svc.fetch(`/api/history/AAPL?${window}&format=csv&studies=${studies}`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.split('\r\n')[0]).toBe(
      'time,open,high,low,close,adj_close,volume,bbands_20_2_upper,bbands_20_2_middle,bbands_20_2_lower,macd_12_26_9_macd,macd_12_26_9_signal,macd_12_26_9_histogram,sma_20',
    );
    const rows = parse(text, { columns: true, cast: (v, ctx) => (ctx.header || ctx.column === 'time' ? v : v === '' ? null : Number(v)) }) as Array<Record<string, number | string | null>>;
    const body = (await (await indicators(`${window}&studies=${studies}`)).json()) as IndicatorsResponse;
    expect(rows.map((r) => r['time'])).toEqual(body.data.times);
    expect(rows.map((r) => r['sma_20'])).toEqual(body.data.studies['sma:20']);
    expect(rows.map((r) => r['macd_12_26_9_signal'])).toEqual((body.data.studies['macd:12:26:9'] as Record<string, Series>)['signal']);
    expect(rows.map((r) => r['bbands_20_2_lower'])).toEqual((body.data.studies['bbands:20:2'] as Record<string, Series>)['lower']);

    // Its own ETag: a 304 when sent back, and not the plain CSV's.
    const etag = res.headers.get('etag')!;
    expect((await svc.fetch(`/api/history/AAPL?${window}&format=csv&studies=${studies}`, { headers: { 'If-None-Match': etag } })).status).toBe(304);
    expect((await svc.fetch(`/api/history/AAPL?${window}&format=csv`)).headers.get('etag')).not.toBe(etag);
  });

  it('when the Arrow export has studies, then apache-arrow reads float64 study columns equal to the indicators answer', async () => {
    const res = await svc.fetch(`/api/history/AAPL?${window}&studies=${studies}`, { headers: { accept: 'application/vnd.apache.arrow.stream' } });
    expect(res.status).toBe(200);
    const table = tableFromIPC(new Uint8Array(await res.arrayBuffer()));
    expect(table.schema.fields.map((f) => f.name)).toContain('macd_12_26_9_histogram');
    const body = (await (await indicators(`${window}&studies=${studies}`)).json()) as IndicatorsResponse;
    expect(table.numRows).toBe(body.data.times.length);
    expect([...table.getChild('sma_20')!.toArray()].map((v) => (Number.isNaN(v) ? null : v))).toEqual(body.data.studies['sma:20']);
    const upper = table.getChild('bbands_20_2_upper')!;
    const expected = (body.data.studies['bbands:20:2'] as Record<string, Series>)['upper']!;
    for (let i = 0; i < table.numRows; i++) expect(upper.get(i)).toBe(expected[i]);
  });

  it('when an export has a bad study, then 422 naming it', async () => {
    const res = await svc.fetch(`/api/history/AAPL?${window}&format=csv&studies=sma:999`);
    expect(res.status).toBe(422);
    expect(((await res.json()) as ErrorBody).violations[0]!.message).toMatch(/study "sma:999"/);
  });
});

describe('GET /api/indicators/{symbol} across a fleet', () => {
  /** A Redis database of its own on the shared test server: no other suite writes there. */
  const FLEET_DB = 14;
  let a: TestService;
  let b: TestService;
  beforeAll(async () => {
    const env = { CACHE_URL: `redis://127.0.0.1:${inject('redisPort')}/${FLEET_DB}` };
    [a, b] = await Promise.all([startTestService(env), startTestService(env)]);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('when one instance computed studies, then another instance answers them from the shared cache (HIT, the same bytes and ETag) without computing them again', async () => {
    const target = '/api/indicators/MSFT?interval=1d&start=2023-01-01&end=2024-01-01&studies=rsi,macd,bbands';
    const first = await a.fetch(target);
    expect(first.status).toBe(200);
    expect(first.headers.get('x-cache')).toBe('MISS');
    const body = await first.text();
    // The other instance has its own store, empty: a HIT here can only be the first instance's fill.
    const second = await b.fetch(`${target.replace('rsi,macd,bbands', 'BBANDS:20:2,rsi:14,macd')}`);
    expect(second.status).toBe(200);
    expect(second.headers.get('x-cache')).toBe('HIT');
    expect(second.headers.get('etag')).toBe(first.headers.get('etag'));
    expect(await second.text()).toBe(body);
  });
});
