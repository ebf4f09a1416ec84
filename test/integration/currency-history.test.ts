/**
 * GET /api/history?currency= over HTTP (DESIGN 25): the simulated provider's bars read through the
 * history store, converted with ECB's reference rates replayed from the recorded slice of its
 * historical file (2024-03-28 to 2024-07-05, with Good Friday, Easter Monday and 1 May missing).
 * Every converted price is checked against an independent computation from that recorded CSV.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { tableFromIPC } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ECB_HISTORY_CSV, startEcbUpstream } from '../helpers/ecb-upstream.js';
import type { ReplayUpstream } from '../helpers/replay-upstream.js';
import { startTestService, type TestService } from '../helpers/service.js';

const CSV_FILE = join(resolve(import.meta.dirname, '..', 'fixtures', 'providers'), ECB_HISTORY_CSV);
const WINDOW = 'start=2024-03-25&end=2024-07-13';
const DAY_MS = 86_400_000;

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
  data: {
    currency: string;
    timezone: string;
    candles: Candle[];
    partial?: boolean;
    missing?: Array<{ start: string; end: string }>;
    fx?: { from: string; to: string; source: string; first_date: string | null; last_date: string | null; carried: number };
  };
}

/** The recorded CSV read on its own terms: date -> currency -> units per euro (`N/A` left out). */
function recordedRates(): Map<string, Map<string, number>> {
  const lines = readFileSync(CSV_FILE, 'utf8').trim().split('\n');
  const header = lines[0]!.split(',');
  const out = new Map<string, Map<string, number>>();
  for (const line of lines.slice(1)) {
    const cells = line.split(',');
    const rates = new Map<string, number>([['EUR', 1]]);
    header.forEach((currency, i) => {
      const cell = cells[i]?.trim();
      if (i > 0 && currency.length === 3 && cell && cell !== 'N/A') rates.set(currency, parseFloat(cell));
    });
    out.set(cells[0]!, rates);
  }
  return out;
}

const RATES = recordedRates();

/** The expected rate of a bar dated `date` (`YYYY-MM-DD`): that day's, else the last one within 4 days before. */
function expectedRate(from: string, to: string, date: string): { rate: number; date: string; carried: boolean } | undefined {
  const sub = { GBp: ['GBP', 0.01], ZAc: ['ZAR', 0.01], ILA: ['ILS', 0.01] } as Record<string, [string, number]>;
  const [unit, scale] = sub[from] ?? [from, 1];
  for (let back = 0; back <= 4; back++) {
    const day = new Date(Date.parse(`${date}T00:00:00Z`) - back * DAY_MS).toISOString().slice(0, 10);
    const rates = RATES.get(day);
    const a = rates?.get(unit);
    const b = rates?.get(to);
    if (a !== undefined && b !== undefined) return { rate: (b / a) * scale, date: day, carried: back > 0 };
  }
  return undefined;
}

function sessionDate(time: string, timeZone: string): string {
  return new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date(time));
}

function close(actual: number, expected: number): void {
  expect(Math.abs(actual - expected)).toBeLessThanOrEqual(1e-9 * Math.abs(expected));
}

describe('history in another currency, ECB rates replayed', () => {
  let ecb: ReplayUpstream;
  let svc: TestService;

  beforeAll(async () => {
    ecb = await startEcbUpstream();
    svc = await startTestService({ MARKET_DATA_PROVIDER: 'simulated', ECB_BASE_URL: ecb.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' });
  });
  afterAll(async () => {
    await svc?.close();
    await ecb?.close();
  });

  const history = async (symbol: string, query: string) => {
    const res = await svc.fetch(`/api/history/${encodeURIComponent(symbol)}?interval=1d&${query}`);
    return { status: res.status, headers: res.headers, body: (await res.json()) as HistoryBody };
  };

  it.each([
    ['a USD stock in EUR', 'AAPL', 'EUR'],
    ['a EUR stock in USD', 'SAP.DE', 'USD'],
    ['a cross: a USD stock in JPY', 'AAPL', 'JPY'],
    ['a GBp listing in USD', 'HSBA.L', 'USD'],
    ['BTC-USD in EUR', 'BTC-USD', 'EUR'],
  ])('when %s is asked for, then every price is the price times the rate of its session date, carried dates flagged, gaps over 4 days missing', async (_what, symbol, to) => {
    const raw = await history(symbol, WINDOW);
    const converted = await history(symbol, `${WINDOW}&currency=${to.toLowerCase()}`);
    expect(raw.status).toBe(200);
    expect(converted.status).toBe(200);
    const from = raw.body.data.currency;
    expect(converted.body.data.currency).toBe(to);
    const byTime = new Map(converted.body.data.candles.map((c) => [c.time, c]));
    const used: string[] = [];
    let carried = 0;
    let missingBars = 0;
    for (const bar of raw.body.data.candles) {
      const date = sessionDate(bar.time, raw.body.data.timezone);
      const rate = expectedRate(from, to, date);
      const got = byTime.get(bar.time);
      if (rate === undefined) {
        // Never converted at a guess: left out, and its time lies in a missing span.
        expect(got, `${symbol} ${date}`).toBeUndefined();
        expect(converted.body.data.missing?.some((m) => m.start <= bar.time && bar.time < m.end), `${date} under missing`).toBe(true);
        missingBars++;
        continue;
      }
      expect(got, `${symbol} ${date}`).toBeDefined();
      close(got!.open, bar.open * rate.rate);
      close(got!.high, bar.high * rate.rate);
      close(got!.low, bar.low * rate.rate);
      close(got!.close, bar.close * rate.rate);
      if (bar.adj_close === null) expect(got!.adj_close).toBeNull();
      else close(got!.adj_close!, bar.adj_close * rate.rate);
      expect(got!.volume).toBe(bar.volume);
      expect(got!.flags?.includes('fx_carried') ?? false, `${symbol} ${date} carried`).toBe(rate.carried);
      if (rate.carried) carried++;
      used.push(rate.date);
    }
    expect(converted.body.data.candles).toHaveLength(raw.body.data.candles.length - missingBars);
    // The window starts before the slice's first rate and ends 8 days after its last: both ends are missing.
    expect(missingBars).toBeGreaterThan(0);
    expect(converted.body.data.partial).toBe(true);
    expect(carried).toBeGreaterThan(0);
    used.sort();
    expect(converted.body.data.fx).toEqual({ from, to, source: 'ecb', first_date: used[0], last_date: used[used.length - 1], carried });
    expect(svc.violations).toEqual([]);
  });

  it('when the US market trades on Easter Monday, then that session takes Maundy Thursday\'s rate, flagged; 2024-07-10 is five days past the last rate and missing', async () => {
    const { body } = await history('AAPL', `${WINDOW}&currency=EUR`);
    const easterMonday = body.data.candles.find((c) => c.time.startsWith('2024-04-01'));
    expect(easterMonday?.flags).toContain('fx_carried');
    expect(easterMonday!.close / (await history('AAPL', WINDOW)).body.data.candles.find((c) => c.time.startsWith('2024-04-01'))!.close).toBeCloseTo(1 / 1.0811, 12);
    expect(body.data.candles.some((c) => c.time.startsWith('2024-07-09'))).toBe(true);
    expect(body.data.candles.some((c) => c.time >= '2024-07-10')).toBe(false);
  });

  it('when answers in several currencies are read, then each is cached and ETagged on its own and ECB\'s historical file was fetched once', async () => {
    const eur = await history('SAP.DE', `${WINDOW}&currency=EUR`);
    const usd = await history('SAP.DE', `${WINDOW}&currency=USD`);
    const again = await history('SAP.DE', `${WINDOW}&currency=USD`);
    // Already in EUR: unchanged, no fx block.
    expect(eur.body.data.fx).toBeUndefined();
    expect(eur.body.data.currency).toBe('EUR');
    expect(eur.headers.get('etag')).not.toBe(usd.headers.get('etag'));
    expect(again.headers.get('etag')).toBe(usd.headers.get('etag'));
    expect(again.headers.get('x-cache')).toBe('HIT');
    expect(ecb.requests.filter((r) => r.path.endsWith('eurofxref-hist.zip'))).toHaveLength(1);
  });

  it('when the CSV export is asked in a currency, then its rows carry the converted prices of the JSON answer', async () => {
    const json = await history('AAPL', `${WINDOW}&currency=GBP`);
    const res = await svc.fetch(`/api/history/AAPL/csv?interval=1d&${WINDOW}&currency=GBP`);
    expect(res.status).toBe(200);
    const rows = parseCsv(await res.text(), { columns: true }) as Array<Record<string, string>>;
    expect(rows).toHaveLength(json.body.data.candles.length);
    rows.forEach((row, i) => {
      const candle = json.body.data.candles[i]!;
      expect(Number(row.close)).toBe(candle.close);
      expect(Number(row.open)).toBe(candle.open);
    });
  });

  it('when indicators are asked in a currency, then each study is computed on the converted candles', async () => {
    const res = await svc.fetch('/api/indicators/AAPL?interval=1d&start=2024-04-15&end=2024-07-01&studies=sma:5&currency=EUR');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: { times: string[]; studies: Record<string, Array<number | null>> } };
    // The converted closes from 2024-04-02 (after Easter) reach well before the window's warm-up.
    const { body: converted } = await history('AAPL', 'start=2024-04-02&end=2024-07-01&currency=EUR');
    const closes = new Map(converted.data.candles.map((c, i) => [c.time, i]));
    const sma = body.data.studies['sma:5']!;
    expect(body.data.times.length).toBeGreaterThan(40);
    body.data.times.forEach((time, k) => {
      const i = closes.get(time)!;
      const expected = converted.data.candles.slice(i - 4, i + 1).reduce((sum, c) => sum + c.close, 0) / 5;
      close(sma[k]!, expected);
    });
    // Not the SMA of the USD closes.
    const usd = (await history('AAPL', 'start=2024-04-02&end=2024-07-01')).body.data.candles;
    expect(Math.abs(sma[0]! - usd.slice(closes.get(body.data.times[0]!)! - 4, closes.get(body.data.times[0]!)! + 1).reduce((s, c) => s + c.close, 0) / 5)).toBeGreaterThan(1);
  });

  it('when the Arrow export is asked in a currency, then its close column is the converted closes', async () => {
    const json = await history('BTC-USD', `${WINDOW}&currency=CHF`);
    const res = await svc.fetch(`/api/history/BTC-USD/arrow?interval=1d&${WINDOW}&currency=CHF`);
    expect(res.status).toBe(200);
    const table = tableFromIPC(new Uint8Array(await res.arrayBuffer()));
    expect([...table.getChild('close')!.toArray()]).toEqual(json.body.data.candles.map((c) => c.close));
  });

  it('when the currency is unknown, then 422 names the supported ones', async () => {
    const res = await history('AAPL', `${WINDOW}&currency=XYZ`);
    expect(res.status).toBe(422);
    const text = JSON.stringify(res.body);
    expect(text).toContain('XYZ');
    expect(text).toContain('USD');
    expect(text).toContain('JPY');
  });

  it('when a converted window lies before the first reference rate, then 422 says so', async () => {
    const res = await history('AAPL', 'start=1998-06-01&end=1999-01-04&currency=EUR');
    expect(res.status).toBe(422);
    expect(JSON.stringify(res.body)).toContain('1999-01-04');
  });
});

describe('history in another currency with ECB failing and no rate stored', () => {
  it('when a conversion is asked, then 503 with Retry-After, never unconverted prices; the ECB is not asked again before then, and is once it has passed', async () => {
    const ecb = await startEcbUpstream();
    await ecb.setMode('error500');
    let clock = Date.now();
    const svc = await startTestService({ MARKET_DATA_PROVIDER: 'simulated', ECB_BASE_URL: ecb.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' }, { now: () => clock });
    try {
      const converted = () => svc.fetch(`/api/history/AAPL?interval=1d&${WINDOW}&currency=EUR`);
      const res = await converted();
      expect(res.status).toBe(503);
      const retryAfter = Number(res.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(0);
      expect(await res.json()).toMatchObject({ success: false, code: 503 });
      expect(ecb.requests).toHaveLength(1);
      expect((await converted()).status).toBe(503);
      expect(ecb.requests).toHaveLength(1);
      // Answers without currency= are not affected.
      expect((await svc.fetch(`/api/history/AAPL?interval=1d&${WINDOW}`)).status).toBe(200);

      await ecb.setMode('replay');
      clock += retryAfter * 1000;
      const again = await converted();
      expect(again.status).toBe(200);
      expect(((await again.json()) as HistoryBody).data.fx?.to).toBe('EUR');
    } finally {
      await svc.close();
      await ecb.close();
    }
  });
});

/**
 * Rates in ECB's historical CSV layout (newest first, trailing commas) for every weekday of the last 70
 * days up to today, made up for the intraday tests: the providers serve intraday bars of the last 60 days
 * only, which the recorded 2024 slice does not reach.
 */
function recentRatesCsv(): { csv: string; rates: Map<string, Map<string, number>> } {
  const rates = new Map<string, Map<string, number>>();
  const lines = ['Date,USD,JPY,CHF,'];
  const today = Math.floor(Date.now() / DAY_MS);
  for (let day = today; day > today - 70; day--) {
    const weekday = new Date(day * DAY_MS).getUTCDay();
    if (weekday === 0 || weekday === 6) continue;
    const date = new Date(day * DAY_MS).toISOString().slice(0, 10);
    const usd = (1.05 + (day % 17) / 1000).toFixed(4);
    const chf = (0.93 + (day % 11) / 1000).toFixed(4);
    rates.set(date, new Map([['EUR', 1], ['USD', Number(usd)], ['JPY', 160], ['CHF', Number(chf)]]));
    lines.push(`${date},${usd},160.00,${chf},`);
  }
  return { csv: `${lines.join('\r\n')}\r\n`, rates };
}

describe('intraday history in another currency, made-up recent rates', () => {
  let ecb: ReplayUpstream;
  let svc: TestService;
  const recent = recentRatesCsv();
  const HOUR_MS = 3_600_000;
  const lastHour = Math.floor(Date.now() / HOUR_MS) * HOUR_MS;

  beforeAll(async () => {
    ecb = await startEcbUpstream(Buffer.from(recent.csv));
    svc = await startTestService({ MARKET_DATA_PROVIDER: 'simulated', ECB_BASE_URL: ecb.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' });
  });
  afterAll(async () => {
    await svc?.close();
    await ecb?.close();
  });

  /** The rate of the last ECB day published (16:00 Frankfurt) by `timeMs`, else within 4 days before it. */
  function rateAt(timeMs: number, to: string): { rate: number; date: string; carried: boolean } {
    let day = new Date(timeMs).toISOString().slice(0, 10);
    const offsetHours = Number(new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', hourCycle: 'h23' }).format(Date.parse(`${day}T12:00:00Z`))) - 12;
    if (timeMs < Date.parse(`${day}T12:00:00Z`) + (4 - offsetHours) * HOUR_MS) day = new Date(timeMs - DAY_MS).toISOString().slice(0, 10);
    for (let back = 0; back <= 4; back++) {
      const date = new Date(Date.parse(`${day}T00:00:00Z`) - back * DAY_MS).toISOString().slice(0, 10);
      const rates = recent.rates.get(date);
      if (rates) return { rate: rates.get(to)! / rates.get('USD')!, date, carried: back > 0 };
    }
    throw new Error(`no rate for ${new Date(timeMs).toISOString()}`);
  }

  it('when hourly bars are asked in EUR, then each converts at the latest rate published by its start (16:00 CET), carried over weekends', async () => {
    const window = `interval=1h&start=${new Date(lastHour - 10 * DAY_MS).toISOString()}&end=${new Date(lastHour).toISOString()}`;
    const raw = (await (await svc.fetch(`/api/history/BTC-USD?${window}`)).json()) as HistoryBody;
    const res = await svc.fetch(`/api/history/BTC-USD?${window}&currency=EUR`);
    expect(res.status).toBe(200);
    const converted = (await res.json()) as HistoryBody;
    const byTime = new Map(converted.data.candles.map((c) => [c.time, c]));
    expect(raw.data.candles.length).toBeGreaterThan(200);
    let carried = 0;
    for (const bar of raw.data.candles) {
      const rate = rateAt(Date.parse(bar.time), 'EUR');
      const got = byTime.get(bar.time)!;
      expect(got, bar.time).toBeDefined();
      close(got.close, bar.close * rate.rate);
      close(got.open, bar.open * rate.rate);
      close(got.low, bar.low * rate.rate);
      close(got.high, bar.high * rate.rate);
      expect(got.flags?.includes('fx_carried') ?? false, bar.time).toBe(rate.carried);
      if (rate.carried) carried++;
    }
    // Ten days hold a weekend: its hours (and Monday's before 16:00 CET) carry Friday's rate.
    expect(carried).toBeGreaterThanOrEqual(48);
    expect(converted.data.fx).toMatchObject({ from: 'USD', to: 'EUR', source: 'ecb', carried });
    expect(svc.violations).toEqual([]);
  });

  it('when an export over 5,000 one-minute bars is asked in a currency, then its pages stream the converted prices of the same bars', async () => {
    const window = `interval=1m&start=${new Date(lastHour - 6 * DAY_MS).toISOString()}&end=${new Date(lastHour).toISOString()}`;
    const res = await svc.fetch(`/api/history/BTC-USD/csv?${window}&currency=CHF`);
    expect(res.status).toBe(200);
    const rows = parseCsv(await res.text(), { columns: true }) as Array<Record<string, string>>;
    expect(rows.length).toBeGreaterThan(5000);
    const plain = parseCsv(await (await svc.fetch(`/api/history/BTC-USD/csv?${window}`)).text(), { columns: true }) as Array<Record<string, string>>;
    expect(rows.map((r) => r.time)).toEqual(plain.map((r) => r.time));
    rows.forEach((row, i) => {
      const rate = rateAt(Date.parse(row.time!), 'CHF');
      close(Number(row.close), Number(plain[i]!.close) * rate.rate);
      expect(row.volume).toBe(plain[i]!.volume);
    });
  });
});

describe('MCP tools in another currency', () => {
  let ecb: ReplayUpstream;
  let svc: TestService;

  beforeAll(async () => {
    ecb = await startEcbUpstream();
    svc = await startTestService({ MARKET_DATA_PROVIDER: 'simulated', ECB_BASE_URL: ecb.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' });
  });
  afterAll(async () => {
    await svc?.close();
    await ecb?.close();
  });

  it('when an MCP client calls get_history with a currency, then the structured content is converted and says so', async () => {
    const res = await svc.fetch('/mcp', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_history', arguments: { symbol: 'AAPL', start: '2024-06-03', end: '2024-07-01', currency: 'JPY' } } }),
    });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { result: { isError?: boolean; structuredContent: { data: HistoryBody['data'] } } };
    expect(answer.result.isError).toBeFalsy();
    expect(answer.result.structuredContent.data.currency).toBe('JPY');
    expect(answer.result.structuredContent.data.fx).toMatchObject({ from: 'USD', to: 'JPY', source: 'ecb', carried: 0 });
    // The CSV resource the tool points at holds the same converted candles.
    const uri = 'mds://history/AAPL/1d?start=2024-06-03&end=2024-07-01&currency=JPY';
    expect(JSON.stringify(answer.result)).toContain(uri);
    const read = await svc.fetch('/mcp', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'resources/read', params: { uri } }),
    });
    const csv = ((await read.json()) as { result: { contents: Array<{ text: string }> } }).result.contents[0]!.text;
    const rows = parseCsv(csv, { columns: true }) as Array<Record<string, string>>;
    expect(rows.map((r) => Number(r.close))).toEqual(answer.result.structuredContent.data.candles.map((c) => c.close));
  });
});
