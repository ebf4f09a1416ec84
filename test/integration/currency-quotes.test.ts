/**
 * GET /api/quotes?currency= over HTTP (DESIGN 25): live quotes converted at the rate of the chain's FX
 * quote, read through the same cache (the simulated provider's `EURUSD=X`, `GBPUSD=X`, `EURJPY=X`),
 * with the rate and its time in `fx`; ECB's recorded rates stand by for pairs no FX quote covers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEcbUpstream } from '../helpers/ecb-upstream.js';
import type { ReplayUpstream } from '../helpers/replay-upstream.js';
import { startTestService, type TestService } from '../helpers/service.js';

interface Quote {
  symbol: string;
  price: number;
  change: number | null;
  change_percent: number | null;
  open: number | null;
  high: number | null;
  low: number | null;
  prev_close: number | null;
  volume: number | null;
  currency: string;
  timestamp: string;
  fx?: { from: string; to: string; source: string; first_date: string | null; last_date: string | null; carried: number; rate?: number; rate_time?: string };
}

function close(actual: number | null, expected: number | null): void {
  if (expected === null) return expect(actual).toBeNull();
  expect(Math.abs(actual! - expected)).toBeLessThanOrEqual(1e-9 * Math.abs(expected));
}

describe('quotes in another currency', () => {
  let ecb: ReplayUpstream;
  let svc: TestService;

  beforeAll(async () => {
    ecb = await startEcbUpstream();
    // Quotes live a minute: the raw quote, the FX quote and the converted one are read from the same entries.
    svc = await startTestService({ MARKET_DATA_PROVIDER: 'simulated', ECB_BASE_URL: ecb.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0', CACHE_TTL_SECONDS: '60' });
  });
  afterAll(async () => {
    await svc?.close();
    await ecb?.close();
  });

  const quote = async (path: string) => {
    const res = await svc.fetch(path);
    return { status: res.status, headers: res.headers, body: (await res.json()) as { data: Quote } };
  };

  it.each([
    ['a USD stock in EUR, at the inverse of EURUSD=X', 'AAPL', 'EUR', 'EURUSD=X', true, 1],
    ['a EUR stock in USD, at EURUSD=X', 'SAP.DE', 'USD', 'EURUSD=X', false, 1],
    ['a GBp listing in USD, at GBPUSD=X over 100', 'HSBA.L', 'USD', 'GBPUSD=X', false, 0.01],
  ])('when %s, then every price is converted at the FX quote\'s rate, named with its time in fx', async (_what, symbol, to, pair, inverse, scale) => {
    const raw = (await quote(`/api/quotes/${symbol}`)).body.data;
    const fx = (await quote(`/api/quotes/${pair}`)).body.data;
    const converted = await quote(`/api/quotes/${symbol}?currency=${to}`);
    expect(converted.status).toBe(200);
    const rate = inverse ? 1 / fx.price : fx.price;
    const q = converted.body.data;
    close(q.price, raw.price * rate * scale);
    close(q.open, raw.open === null ? null : raw.open * rate * scale);
    close(q.high, raw.high === null ? null : raw.high * rate * scale);
    close(q.low, raw.low === null ? null : raw.low * rate * scale);
    close(q.prev_close, raw.prev_close === null ? null : raw.prev_close * rate * scale);
    close(q.change, raw.change === null ? null : raw.change * rate * scale);
    expect(q.change_percent).toBe(raw.change_percent);
    expect(q.volume).toBe(raw.volume);
    expect(q.currency).toBe(to);
    expect(q.fx).toMatchObject({ from: raw.currency, to, source: 'simulated', carried: 0, rate_time: fx.timestamp });
    close(q.fx!.rate!, rate);
    expect(svc.violations).toEqual([]);
  });

  it('when a batch is asked in a currency, then each quote is converted and one already in it is unchanged, without fx', async () => {
    const res = await svc.fetch('/api/quotes?symbols=AAPL,SAP.DE&currency=EUR');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: Quote[] };
    expect(body.data.map((q) => q.currency)).toEqual(['EUR', 'EUR']);
    expect(body.data[0]?.fx?.to).toBe('EUR');
    expect(body.data[1]?.fx).toBeUndefined();
    const sap = (await quote('/api/quotes/SAP.DE')).body.data;
    expect(body.data[1]).toEqual(sap);
  });

  it('when no FX quote covers the pair and the latest reference rate is over 4 days old, then 503 with Retry-After, never a guess', async () => {
    // The simulated provider quotes no SEK pair: the reference rates (recorded, last 2024-07-05) are all there is,
    // and they are older than 4 days, so the answer is 503 rather than a conversion at a stale guess.
    const res = await svc.fetch('/api/quotes/AAPL?currency=SEK');
    expect(res.status).toBe(503);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('when the currency is unknown, then 422 names the supported ones', async () => {
    const res = await svc.fetch('/api/quotes/AAPL?currency=ABC');
    expect(res.status).toBe(422);
    expect(await res.text()).toContain('CHF');
  });
});

describe('quotes in another currency, no FX quote for the pair, three days after the last reference rate', () => {
  it('when a USD stock is asked in SEK, then it is converted at the ECB\'s latest rate, crossed through EUR, with its publication time', async () => {
    const ecb = await startEcbUpstream();
    const svc = await startTestService({ MARKET_DATA_PROVIDER: 'simulated', ECB_BASE_URL: ecb.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' }, { now: () => Date.parse('2024-07-08T12:00:00Z') });
    try {
      const raw = (await (await svc.fetch('/api/quotes/AAPL')).json()) as { data: Quote };
      const res = await svc.fetch('/api/quotes/AAPL?currency=SEK');
      expect(res.status).toBe(200);
      const q = ((await res.json()) as { data: Quote }).data;
      // 2024-07-05 (the recorded file's last day): USD 1.0824, SEK 11.3605 per euro.
      const rate = 11.3605 / 1.0824;
      close(q.price, raw.data.price * rate);
      expect(q.fx).toMatchObject({ from: 'USD', to: 'SEK', source: 'ecb', first_date: '2024-07-05', last_date: '2024-07-05', rate_time: '2024-07-05T14:00:00.000Z' });
      close(q.fx!.rate!, rate);
      expect(svc.violations).toEqual([]);
    } finally {
      await svc.close();
      await ecb.close();
    }
  });
});
