/**
 * History as CSV (`format=csv` or `Accept: text/csv`) over a real socket: read back with a CSV
 * parser, it is the JSON answer's candles, value for value.
 */
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../../src/generated/api.js';
import { startTestService, type TestService } from '../helpers/service.js';

type HistoryResponse = components['schemas']['HistoryResponse'];

let svc: TestService;

beforeAll(async () => {
  // No Redis: the cache runs in memory, which is all these reads need.
  svc = await startTestService({ CACHE_URL: 'redis://127.0.0.1:1/0' });
});
afterAll(async () => {
  await svc?.close();
});

/** The CSV rows as records of numbers (and the time string), empty fields as null, as JSON writes candles. */
function readCsv(text: string): Array<Record<string, string | number | null>> {
  return parse(text, {
    columns: true,
    cast: (value, context) => (context.header || context.column === 'time' ? value : value === '' ? null : Number(value)),
  }) as Array<Record<string, string | number | null>>;
}

describe('GET /api/history/{symbol} as CSV', () => {
  it.each([
    ['daily, a named range', 'AAPL', 'interval=1d&range=6mo'],
    ['hourly, a crypto pair', 'BTC-USD', 'interval=1h&range=5d'],
    ['weekly, a start date', 'MSFT', 'interval=1wk&start=2024-01-01&end=2024-07-01'],
  ])('when format=csv is asked for (%s), then the CSV holds the JSON candles in order under the documented header', async (_what, symbol, query) => {
    const jsonRes = await svc.fetch(`/api/history/${symbol}?${query}`);
    expect(jsonRes.status).toBe(200);
    const json = (await jsonRes.json()) as HistoryResponse;
    expect(json.data.candles.length).toBeGreaterThan(0);

    const csvRes = await svc.fetch(`/api/history/${symbol}?${query}&format=csv`);

    expect(csvRes.status).toBe(200);
    expect(csvRes.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(csvRes.headers.get('vary')).toBe('Accept');
    const text = await csvRes.text();
    expect(text.split('\r\n')[0]).toBe('time,open,high,low,close,adj_close,volume');
    expect(readCsv(text)).toEqual(json.data.candles);
  });

  it('when Accept is text/csv (after the same target was answered as JSON), then the answer is CSV; */* and no Accept stay JSON', async () => {
    const target = '/api/history/AAPL?interval=1d&range=1mo';
    const json = (await (await svc.fetch(target)).json()) as HistoryResponse;
    // Twice, so the fast path in front of Express knows this target.
    expect((await svc.fetch(target)).headers.get('x-cache')).toBe('HIT');

    const csv = await svc.fetch(target, { headers: { Accept: 'text/csv' } });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(readCsv(await csv.text())).toEqual(json.data.candles);

    const any = await svc.fetch(target, { headers: { Accept: '*/*' } });
    expect(any.headers.get('content-type')).toMatch(/^application\/json/);
    const explicit = await svc.fetch(`${target}&format=json`, { headers: { Accept: 'text/csv' } });
    expect(explicit.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('when history is answered as JSON (a miss through Express, a hit from the fast path, a 304), then it too says Vary: Accept', async () => {
    const target = '/api/history/MSFT?interval=1d&range=1mo';
    const miss = await svc.fetch(target);
    expect(miss.headers.get('x-cache')).toBe('MISS');
    expect(miss.headers.get('vary')).toBe('Accept');
    const hit = await svc.fetch(target);
    expect(hit.headers.get('x-cache')).toBe('HIT');
    expect(hit.headers.get('vary')).toBe('Accept');
    const fastPathHit = await svc.fetch(target);
    expect(fastPathHit.headers.get('vary')).toBe('Accept');
    const notModified = await svc.fetch(target, { headers: { 'If-None-Match': hit.headers.get('etag')! } });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.get('vary')).toBe('Accept');
    // Other reads answer one format only: no Vary of theirs.
    expect((await svc.fetch('/api/indices')).headers.get('vary')).toBeNull();
  });

  it('when the CSV ETag is sent back, then 304; the JSON ETag does not match the CSV, nor the CSV one the JSON', async () => {
    const target = '/api/history/AAPL?interval=1d&range=3mo';
    const jsonEtag = (await svc.fetch(target)).headers.get('etag')!;
    const csvEtag = (await svc.fetch(`${target}&format=csv`)).headers.get('etag')!;
    expect(csvEtag).not.toBe(jsonEtag);

    expect((await svc.fetch(`${target}&format=csv`, { headers: { 'If-None-Match': csvEtag } })).status).toBe(304);
    expect((await svc.fetch(`${target}&format=csv`, { headers: { 'If-None-Match': jsonEtag } })).status).toBe(200);
    expect((await svc.fetch(target, { headers: { 'If-None-Match': csvEtag } })).status).toBe(200);
  });

  it('when the symbol is unknown or the format is not json or csv, then the envelope says so, as JSON', async () => {
    const unknown = await svc.fetch('/api/history/NOSUCH?range=5d&format=csv');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { code: number }).code).toBe(404);

    const bad = await svc.fetch('/api/history/AAPL?format=xlsx');
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { violations: Array<{ path: string }> }).violations[0]?.path).toBe('query.format');
  });
});

describe('GET /api/history/{symbol} with CORS on', () => {
  const APP = 'https://app.example.com';
  let cors: TestService;
  beforeAll(async () => {
    cors = await startTestService({ CACHE_URL: 'redis://127.0.0.1:1/0', CORS_ORIGINS: APP });
  });
  afterAll(async () => {
    await cors?.close();
  });

  it('when a listed origin reads history as JSON (Express, then the fast path) or CSV, then Vary keeps Origin and adds Accept', async () => {
    const target = '/api/history/AAPL?interval=1d&range=1mo';
    for (let i = 0; i < 3; i++) {
      const res = await cors.fetch(target, { headers: { Origin: APP } });
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe(APP);
      expect(res.headers.get('vary'), `read ${i + 1}`).toBe('Origin, Accept');
    }
    const csv = await cors.fetch(`${target}&format=csv`, { headers: { Origin: APP } });
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(csv.headers.get('vary')).toBe('Origin, Accept');
  });
});
