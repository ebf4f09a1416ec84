import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DataSourceError } from '../../src/domain/errors.js';
import { createLogger } from '../../src/infra/logger.js';
import {
  CircuitOpenError,
  ResilientMarketDataProvider,
  type BreakerState,
} from '../../src/infra/market/resilient-market-data-provider.js';
import { UpstreamRateLimitedError } from '../../src/infra/market/upstream-guard-errors.js';
import { DEFAULT_USER_AGENT, YahooMarketDataProvider } from '../../src/infra/market/yahoo-market-data-provider.js';
import type { Quote } from '../../src/domain/ports/market-data.js';
import { startFakeUpstream, type FakeUpstream, type FakeUpstreamMode } from '../helpers/fake-upstream.js';

const FIXTURES_DIR = fileURLToPath(new URL('../fixtures/yahoo/', import.meta.url));
/** The timeout of calls that are meant to fail; successful calls get a generous one, so load cannot fail them. */
const TIMEOUT_MS = 300;
const GENEROUS_TIMEOUT_MS = 5000;
/** How much later than its timeout a failing call may settle. */
const MARGIN_MS = 400;

/** A chart result as recorded, read independently of the code under test. */
interface RecordedChart {
  meta: Record<string, unknown> & {
    regularMarketPrice: number;
    currency: string;
    regularMarketTime: number;
    chartPreviousClose: number;
    exchangeTimezoneName: string;
    currentTradingPeriod: Record<'pre' | 'regular' | 'post', { start: number; end: number }>;
  };
  timestamp?: number[];
  indicators: { quote: Array<Record<string, Array<number | null>>>; adjclose?: Array<{ adjclose: Array<number | null> }> };
  events?: {
    dividends?: Record<string, { amount: number; date: number }>;
    splits?: Record<string, { date: number; numerator: number; denominator: number }>;
  };
}
/** A body-only fixture's chart result. */
function recorded(file: string): RecordedChart {
  const body = JSON.parse(readFileSync(join(FIXTURES_DIR, file), 'utf8')) as { chart: { result: RecordedChart[] } };
  const result = body.chart.result[0];
  if (!result) throw new Error(`${file} has no chart result`);
  return result;
}
/** A recorded exchange (`recorded/`): the request path and the response body. */
function exchange<T>(file: string): { path: string; body: T } {
  const raw = JSON.parse(readFileSync(join(FIXTURES_DIR, 'recorded', file), 'utf8')) as { request: { path: string }; response: { body: T } };
  return { path: raw.request.path, body: raw.response.body };
}
function recordedChart(file: string): RecordedChart {
  const result = exchange<{ chart: { result: RecordedChart[] } }>(file).body.chart.result[0];
  if (!result) throw new Error(`${file} has no chart result`);
  return result;
}
function bars(chart: RecordedChart, key: string): number[] {
  return (chart.indicators.quote[0]?.[key] ?? []).filter((v): v is number => v !== null);
}
const iso = (epochS: number) => new Date(epochS * 1000).toISOString();
const round2 = (n: number) => Math.round(n * 100) / 100;
const roundTo = (n: unknown, decimals: unknown) => Math.round(Number(n) * 10 ** Number(decimals)) / 10 ** Number(decimals);

/** Settles `promise` and reports how long it took, so a test can bound the latency of a failure. */
/** Runs `call` and times it from before it starts (a timeout's timer starts inside the call). */
async function timed<T>(call: () => Promise<T>): Promise<{ value?: T; error?: unknown; elapsedMs: number }> {
  const start = performance.now();
  try {
    const value = await call();
    return { value, elapsedMs: performance.now() - start };
  } catch (error) {
    return { error, elapsedMs: performance.now() - start };
  }
}

let upstream: FakeUpstream;

beforeAll(async () => {
  upstream = await startFakeUpstream({ fixturesDir: FIXTURES_DIR, retryAfterSeconds: 7 });
});
afterAll(async () => {
  await upstream.close();
});
beforeEach(async () => {
  await upstream.setMode('replay');
  upstream.setNotFound([]);
});

function yahoo(extra: { userAgent?: string; timeoutMs?: number; now?: () => number } = {}) {
  return new YahooMarketDataProvider({ baseUrl: upstream.baseUrl, timeoutMs: GENEROUS_TIMEOUT_MS, ...extra });
}
async function quote(symbol: string, extra: Parameters<typeof yahoo>[0] = {}): Promise<Quote> {
  const result = await yahoo(extra).getQuote(symbol);
  if (!result) throw new Error(`no quote for ${symbol}`);
  return result;
}
function requestsSince(before: number): string[] {
  return upstream.requestLog.slice(before).map((r) => r.url);
}

describe('YahooMarketDataProvider.getQuote against replayed recorded responses', () => {
  it('when the responses are complete, then every field equals the numbers in the recordings', async () => {
    for (const [symbol, file, type] of [
      ['^IXIC', 'chart-%5EIXIC.json', 'index'],
      ['^SOX', 'chart-%5ESOX.json', 'index'],
      ['AAPL', 'yahoo-chart-AAPL-200.json', 'equity'],
    ] as const) {
      const chart = recorded(file);
      const { meta } = chart;
      const q = await quote(symbol);
      // Every price to the recording's price hint: no float32 noise.
      const hinted = (n: unknown) => roundTo(n, meta.priceHint);
      expect(q.symbol).toBe(symbol);
      expect(q.price).toBe(hinted(meta.regularMarketPrice));
      expect(q.prev_close).toBe(hinted(meta.chartPreviousClose));
      expect(q.name).toBe(meta.longName);
      expect(q.currency).toBe(meta.currency);
      expect(q.high).toBe(hinted(meta.regularMarketDayHigh));
      expect(q.low).toBe(hinted(meta.regularMarketDayLow));
      expect(q.volume).toBe(meta.regularMarketVolume);
      expect(q.timestamp).toBe(iso(meta.regularMarketTime));
      expect(q.open).toBeCloseTo(bars(chart, 'open')[0] ?? Number.NaN, 2);
      expect(q.change).toBe(roundTo(hinted(meta.regularMarketPrice) - hinted(meta.chartPreviousClose), meta.priceHint));
      expect(q.change_percent).toBeCloseTo(((meta.regularMarketPrice - meta.chartPreviousClose) / meta.chartPreviousClose) * 100, 2);
      expect(q.exchange).toBe(meta.fullExchangeName);
      expect(q.instrument_type).toBe(type);
      expect(q.timezone).toBe(meta.exchangeTimezoneName);
      expect(['open', 'closed', 'pre', 'post']).toContain(q.market_state);
    }
  });

  it('when meta lacks the day range, volume and names, then they come from the bars and the symbol names the quote', async () => {
    const q = await quote('^SP500TR');
    const chart = recorded('chart-%5ESP500TR.json');

    expect(q.name).toBe('^SP500TR');
    expect(q.price).toBe(roundTo(chart.meta.regularMarketPrice, chart.meta.priceHint));
    expect(q.high).toBeCloseTo(Math.max(...bars(chart, 'high')), 2);
    expect(q.low).toBeCloseTo(Math.min(...bars(chart, 'low')), 2);
    expect(q.open).toBeCloseTo(bars(chart, 'open')[0] ?? Number.NaN, 2);
    expect(q.volume).toBe(bars(chart, 'volume').reduce((a, b) => a + b, 0));
    expect(q.exchange).toBe(chart.meta.fullExchangeName ?? chart.meta.exchangeName);
  });

  it("when Yahoo sends 0.0 placeholders for unknown prices, then they are unknown (null), not a price of zero", async () => {
    const q = await quote('KOSPI-25.KS');
    const chart = recorded('chart-KOSPI-25.KS.json');

    expect(chart.meta.regularMarketDayHigh).toBe(0);
    expect(q).toMatchObject({ symbol: 'KOSPI-25.KS', high: null, low: null, open: null, volume: chart.meta.regularMarketVolume, currency: 'KRW' });
    expect(q.timezone).toBe('Asia/Seoul');
  });

  it('when asked for a quote, then it requests the symbol percent-encoded in the path, for one session of daily bars', async () => {
    const before = upstream.requests;
    await yahoo().getQuote('^IXIC');
    await yahoo().getQuote('KOSPI-25.KS');
    expect(requestsSince(before)).toEqual(['/v8/finance/chart/%5EIXIC?interval=1d&range=1d', '/v8/finance/chart/KOSPI-25.KS?interval=1d&range=1d']);
  });

  it('when called, then it sends a browser-like User-Agent, or the configured one', async () => {
    const before = upstream.requests;
    await yahoo().getQuote('^IXIC');
    await yahoo({ userAgent: 'mds-test/1.0' }).getQuote('^IXIC');

    expect(upstream.requestLog.slice(before).map((r) => r.headers['user-agent'])).toEqual([DEFAULT_USER_AGENT, 'mds-test/1.0']);
    expect(DEFAULT_USER_AGENT).toMatch(/^Mozilla\/5\.0 \(.+\) .*Chrome\/[\d.]+ Safari\//);
  });

  it("when the clock is in the recorded session's pre, regular or post period or outside them, then market_state says so", async () => {
    const { pre, regular, post } = recorded('yahoo-chart-AAPL-200.json').meta.currentTradingPeriod;
    const at = (epochS: number) => quote('AAPL', { now: () => epochS * 1000 });

    expect((await at(pre.start + 60)).market_state).toBe('pre');
    expect((await at(regular.start)).market_state).toBe('open');
    expect((await at(regular.end - 1)).market_state).toBe('open');
    expect((await at(post.start + 60)).market_state).toBe('post');
    expect((await at(post.end + 3600)).market_state).toBe('closed');
    expect((await at(pre.start - 3600)).market_state).toBe('closed');
  });

  it('when the symbol is a cryptocurrency, then it keeps its UTC zone, is typed crypto and is always open', async () => {
    const { meta } = recordedChart('yahoo-chart-BTC-USD-1d.json');
    const longAfterSession = (meta.currentTradingPeriod.post.end + 5 * 86_400) * 1000;
    const q = await quote('BTC-USD', { now: () => longAfterSession });

    expect(q).toMatchObject({ symbol: 'BTC-USD', instrument_type: 'crypto', timezone: 'UTC', market_state: 'open', exchange: meta.fullExchangeName });
    expect(q.price).toBe(roundTo(meta.regularMarketPrice, meta.priceHint));
    expect(meta.exchangeTimezoneName).toBe('UTC');
  });

  it('when Yahoo answers its 404 "No data found", then the symbol is unknown (undefined), not an error', async () => {
    await expect(yahoo().getQuote('NO-SUCH-SYMBOL')).resolves.toBeUndefined();
    upstream.setNotFound(['^IXIC']);
    await expect(yahoo().getQuote('^IXIC')).resolves.toBeUndefined();
  });

  const failures: Array<[FakeUpstreamMode, RegExp]> = [
    ['error500', /chart of \^IXIC: HTTP 500/],
    ['rate-limited', /chart of \^IXIC: HTTP 429/],
    ['garbage', /unparsable response body \(not JSON\)/],
    ['unexpected', /unexpected response shape: no "chart" object/],
    ['hang', new RegExp(`timed out after ${TIMEOUT_MS} ms`)],
    ['refuse', /connection refused/],
  ];
  it.each(failures)('when the upstream is in %s mode, then it throws DataSourceError naming the cause within the timeout', async (mode, cause) => {
    await upstream.setMode(mode);

    const { error, elapsedMs } = await timed(() => yahoo({ timeoutMs: TIMEOUT_MS }).getQuote('^IXIC'));

    expect(error).toBeInstanceOf(DataSourceError);
    expect((error as Error).message).toMatch(cause);
    expect(elapsedMs).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    if (mode === 'hang') expect(elapsedMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
  });

  it("when rate-limited, then it throws UpstreamRateLimitedError with Yahoo's Retry-After", async () => {
    await upstream.setMode('rate-limited');
    const error = await yahoo().getQuote('^IXIC').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UpstreamRateLimitedError);
    expect(error).toBeInstanceOf(DataSourceError);
    expect((error as DataSourceError).retryAfterSeconds).toBe(7);
  });

  it('when the refused upstream listens again, then the next call succeeds', async () => {
    await upstream.setMode('refuse');
    await expect(yahoo().getQuote('^IXIC')).rejects.toBeInstanceOf(DataSourceError);
    await upstream.restart();
    await expect(yahoo().getQuote('^IXIC')).resolves.toMatchObject({ symbol: '^IXIC' });
  });
});

describe('YahooMarketDataProvider.getHistory against replayed recorded responses', () => {
  const AAPL_DAILY = 'yahoo-chart-AAPL-1d-2020-08-31-to-2020-11-07.json';
  /** The recorded request's window, so the fake upstream replays that recording. */
  function windowOf(file: string): { startMs: number; endMs: number } {
    const query = new URL(exchange(file).path, 'http://x').searchParams;
    return { startMs: Number(query.get('period1')) * 1000, endMs: Number(query.get('period2')) * 1000 };
  }

  it('when asked for the recorded AAPL days, then it returns the 49 candles, the 4:1 split and the dividend of the recording', async () => {
    const chart = recordedChart(AAPL_DAILY);
    const history = await yahoo().getHistory({ symbol: 'AAPL', interval: '1d', ...windowOf(AAPL_DAILY) });
    if (!history) throw new Error('no history');

    const timestamps = chart.timestamp ?? [];
    const column = (key: string) => chart.indicators.quote[0]?.[key] ?? [];
    const adj = chart.indicators.adjclose?.[0]?.adjclose ?? [];
    expect(history.candles).toHaveLength(49);
    expect(timestamps).toHaveLength(49);
    expect(history.candles[0]?.open).toBe(127.58);
    expect(history.candles).toEqual(
      timestamps.map((t, i) => ({
        time: iso(t),
        open: round2(column('open')[i] ?? Number.NaN),
        high: round2(column('high')[i] ?? Number.NaN),
        low: round2(column('low')[i] ?? Number.NaN),
        close: round2(column('close')[i] ?? Number.NaN),
        adj_close: round2(adj[i] ?? Number.NaN),
        volume: column('volume')[i],
      })),
    );
    expect(history).toMatchObject({ symbol: 'AAPL', currency: 'USD', timezone: chart.meta.exchangeTimezoneName, interval: '1d' });

    const split = Object.values(chart.events?.splits ?? {})[0];
    const dividend = Object.values(chart.events?.dividends ?? {})[0];
    expect(split).toMatchObject({ numerator: 4, denominator: 1 });
    expect(iso(split?.date ?? 0).slice(0, 10)).toBe('2020-08-31');
    expect(history.events.splits).toEqual([{ time: iso(split?.date ?? 0), numerator: 4, denominator: 1 }]);
    expect(history.events.dividends).toEqual([{ time: iso(dividend?.date ?? 0), amount: dividend?.amount }]);
  });

  it('when asked for a window, then it requests period1/period2 in epoch seconds with dividends and splits', async () => {
    const before = upstream.requests;
    const { startMs, endMs } = windowOf(AAPL_DAILY);
    await yahoo().getHistory({ symbol: 'AAPL', interval: '1d', startMs, endMs });
    expect(requestsSince(before)).toEqual([`/v8/finance/chart/AAPL?interval=1d&period1=${startMs / 1000}&period2=${endMs / 1000}&events=div%7Csplit`]);
  });

  it("when asked for a range of hours, then it requests Yahoo's 60m interval with that range", async () => {
    const before = upstream.requests;
    await yahoo().getHistory({ symbol: '^IXIC', interval: '1h', range: '5d' });
    expect(requestsSince(before)).toEqual(['/v8/finance/chart/%5EIXIC?interval=60m&range=5d&events=div%7Csplit']);
  });

  it('when the recorded weekend minute chart has meta but no bars, then the history is empty, not an error', async () => {
    const file = 'yahoo-chart-AAPL-1m-weekend-empty.json';
    const chart = recordedChart(file);
    expect(chart.timestamp).toBeUndefined();

    const history = await yahoo().getHistory({ symbol: 'AAPL', interval: '1m', ...windowOf(file) });

    expect(history).toEqual({ symbol: 'AAPL', currency: 'USD', timezone: 'America/New_York', interval: '1m', candles: [], events: { dividends: [], splits: [] } });
  });

  it('when the symbol is a cryptocurrency, then its history keeps the UTC zone, and a bar starting at the (exclusive) end is left out', async () => {
    const file = 'yahoo-chart-BTC-USD-1d.json';
    const chart = recordedChart(file);
    const window = windowOf(file);
    const history = await yahoo().getHistory({ symbol: 'BTC-USD', interval: '1d', ...window });

    const timestamps = chart.timestamp ?? [];
    // Yahoo sent the bar that starts at period2 too; the port's end is exclusive.
    expect(timestamps.at(-1)).toBe(window.endMs / 1000);
    const inside = timestamps.filter((t) => t * 1000 < window.endMs);
    expect(inside).toHaveLength(2);
    expect(history?.timezone).toBe('UTC');
    expect(history?.candles.map((c) => c.time)).toEqual(inside.map(iso));
    expect(history?.candles.map((c) => c.close)).toEqual(bars(chart, 'close').slice(0, 2).map(round2));
  });

  it('when a bar lacks a price, then that bar is dropped, and a missing volume is null', async () => {
    const file = 'derived-chart-TEST-NULLBAR-1d.json';
    const chart = recordedChart(file);
    const { startMs, endMs } = windowOf(file);
    const history = await yahoo().getHistory({ symbol: 'TEST-NULLBAR', interval: '1d', startMs, endMs: endMs + 86_400_000 });

    const timestamps = chart.timestamp ?? [];
    expect(chart.indicators.quote[0]?.close?.[1]).toBeNull();
    expect(history?.candles.map((c) => c.time)).toEqual([iso(timestamps[0] ?? 0), iso(timestamps[2] ?? 0)]);
    expect(history?.candles[1]?.volume).toBeNull();
  });

  it('when the symbol is unknown, then the history is undefined', async () => {
    await expect(yahoo().getHistory({ symbol: 'NO-SUCH-SYMBOL', interval: '1d', range: '1mo' })).resolves.toBeUndefined();
  });

  it('when the upstream fails, then it throws DataSourceError', async () => {
    await upstream.setMode('error500');
    await expect(yahoo().getHistory({ symbol: 'AAPL', interval: '1d', range: '1mo' })).rejects.toThrow(/HTTP 500/);
  });
});

describe('YahooMarketDataProvider.search against replayed recorded responses', () => {
  interface RecordedHit {
    symbol?: string;
    quoteType?: string;
    longname?: string;
    shortname?: string;
    exchDisp?: string;
  }
  const hits = (file: string) => exchange<{ quotes: RecordedHit[] }>(file).body.quotes;
  const TYPES: Record<string, string> = { EQUITY: 'equity', ETF: 'etf', INDEX: 'index', CURRENCY: 'currency', CRYPTOCURRENCY: 'crypto', FUTURE: 'future', MUTUALFUND: 'etf' };

  it('when searching a ticker, then the recorded hits come back with their names, exchanges and types, options left out', async () => {
    const recordedHits = hits('yahoo-search-AAPL.json');
    const results = await yahoo().search('AAPL', 10);

    expect(recordedHits.some((h) => h.quoteType === 'OPTION')).toBe(true);
    const expected = recordedHits
      .filter((h) => h.symbol && h.quoteType !== undefined && TYPES[h.quoteType])
      .map((h) => ({ symbol: h.symbol, name: h.longname ?? h.shortname, exchange: h.exchDisp, instrument_type: TYPES[h.quoteType ?? ''] }));
    expect(results).toEqual(expected);
    expect(results.slice(0, 2)).toEqual([
      { symbol: 'AAPL', name: 'Apple Inc.', exchange: 'NASDAQ', instrument_type: 'equity' },
      { symbol: 'AAPU', name: 'Direxion Daily AAPL Bull 2X Shares', exchange: 'NASDAQ', instrument_type: 'etf' },
    ]);
  });

  it('when searching a company name, then every recorded listing comes back in order, at most limit', async () => {
    const recordedHits = hits('yahoo-search-bmw-by-name.json');
    const all = await yahoo().search('Bayerische Motoren Werke AG', 25);
    const two = await yahoo().search('Bayerische Motoren Werke AG', 2);

    expect(all.map((r) => r.symbol)).toEqual(recordedHits.map((h) => h.symbol));
    expect(all[0]).toEqual({ symbol: 'BMW.DE', name: recordedHits[0]?.longname, exchange: 'XETRA', instrument_type: 'equity' });
    expect(two).toEqual(all.slice(0, 2));
  });

  it('when searching, then it asks for limit quotes and no news', async () => {
    const before = upstream.requests;
    await yahoo().search('Bayerische Motoren Werke AG', 3);
    expect(requestsSince(before)).toEqual(['/v1/finance/search?q=Bayerische+Motoren+Werke+AG&quotesCount=3&newsCount=0']);
  });

  it('when nothing matches, then the result is an empty list', async () => {
    await expect(yahoo().search('zzzz-nothing', 10)).resolves.toEqual([]);
  });

  it('when the upstream fails, then it throws DataSourceError', async () => {
    await upstream.setMode('garbage');
    await expect(yahoo().search('AAPL', 10)).rejects.toThrow(/search 'AAPL': unparsable response body/);
  });
});

describe('ResilientMarketDataProvider around the Yahoo provider', () => {
  function resilient(resetTimeoutMs: number, timeoutMs = GENEROUS_TIMEOUT_MS) {
    const lines: Array<{ level: number; msg: string }> = [];
    const logger = createLogger({ level: 'debug', name: 'test' }, { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) });
    const waiters = new Map<BreakerState, Array<() => void>>();
    const provider = new ResilientMarketDataProvider(yahoo({ timeoutMs }), {
      timeoutMs,
      volumeThreshold: 3,
      errorThresholdPercentage: 50,
      resetTimeoutMs,
      logger,
      onStateChange: (state) => {
        for (const resolve of waiters.get(state) ?? []) resolve();
        waiters.delete(state);
      },
    });
    /** Resolves at the next transition into `state`. */
    const reaches = (state: BreakerState) => new Promise<void>((resolve) => waiters.set(state, [...(waiters.get(state) ?? []), resolve]));
    const logged = (pattern: RegExp) => lines.filter((l) => pattern.test(l.msg)).length;
    return { provider, reaches, logged };
  }

  async function openBreaker(provider: ResilientMarketDataProvider) {
    await upstream.setMode('error500');
    for (let i = 0; i < 3; i++) await expect(provider.getQuote('^IXIC')).rejects.toThrow(/HTTP 500/);
    expect(provider.state).toBe('open');
  }

  it('when it has not been called yet, then a remote provider is not reported healthy', () => {
    const { provider } = resilient(10_000);
    expect(provider.health()).toEqual({ provider: 'yahoo', healthy: false, last_success_at: null, last_error: null });
    provider.close();
  });

  it('when a call succeeds, then health is healthy with the time of the success', async () => {
    const { provider } = resilient(10_000);
    const before = Date.now();
    await provider.getQuote('^IXIC');
    const health = provider.health();
    expect(health.healthy).toBe(true);
    expect(Date.parse(health.last_success_at ?? '')).toBeGreaterThanOrEqual(before - 1);
    expect(health.last_error).toBeNull();
    provider.close();
  });

  it('when a run of unknown symbols gets 404s, then the breaker stays closed and a known symbol still answers at once', async () => {
    const { provider } = resilient(60_000);
    for (let i = 0; i < 10; i++) await expect(provider.getQuote(`NOPE-${i}`)).resolves.toBeUndefined();
    await expect(provider.getHistory({ symbol: 'NOPE-H', interval: '1d', range: '1mo' })).resolves.toBeUndefined();

    expect(provider.state).toBe('closed');
    expect(provider.health()).toMatchObject({ healthy: true, last_error: null });
    const before = upstream.requests;
    const { value, elapsedMs } = await timed(() => provider.getQuote('^IXIC'));
    expect(value?.symbol).toBe('^IXIC');
    expect(upstream.requests).toBe(before + 1);
    expect(elapsedMs).toBeLessThan(1000);
    provider.close();
  });

  it('when the upstream keeps answering 429, then health shows it but the breaker stays closed (the guard pauses instead)', async () => {
    const { provider } = resilient(60_000);
    await upstream.setMode('rate-limited');
    for (let i = 0; i < 5; i++) await expect(provider.getQuote('^IXIC')).rejects.toBeInstanceOf(UpstreamRateLimitedError);

    expect(provider.state).toBe('closed');
    expect(provider.health()).toMatchObject({ healthy: false, last_error: expect.stringMatching(/HTTP 429/) });
    await upstream.setMode('replay');
    await expect(provider.getQuote('^IXIC')).resolves.toMatchObject({ symbol: '^IXIC' });
    provider.close();
  });

  it('when the upstream keeps failing, then it opens and fails fast for every method without calling the upstream', async () => {
    const { provider, logged } = resilient(60_000);
    await openBreaker(provider);
    const requestsWhenOpened = upstream.requests;

    const calls: Array<() => Promise<unknown>> = [
      () => provider.getQuote('^IXIC'),
      () => provider.getHistory({ symbol: 'AAPL', interval: '1d', range: '1mo' }),
      () => provider.search('AAPL', 5),
    ];
    for (const call of calls) {
      const { error, elapsedMs } = await timed(call);
      expect(error).toBeInstanceOf(CircuitOpenError);
      expect(error).toBeInstanceOf(DataSourceError);
      expect(elapsedMs).toBeLessThan(100);
      const retryAfter = (error as DataSourceError).retryAfterSeconds;
      expect(retryAfter).toBeGreaterThan(50);
      expect(retryAfter).toBeLessThanOrEqual(60);
    }

    expect(upstream.requests).toBe(requestsWhenOpened);
    expect(provider.health()).toMatchObject({ healthy: false, last_error: expect.stringMatching(/HTTP 500/) });
    expect(logged(/circuit breaker opened/)).toBe(1);
    expect(logged(/^Market data source failed$/)).toBe(1);
    provider.close();
  });

  it('when the reset timeout has passed, then a probe reaches the recovered upstream, closes the breaker and makes health healthy again', async () => {
    const { provider, reaches, logged } = resilient(300);
    const halfOpen = reaches('half-open');
    await openBreaker(provider);
    expect(provider.health().healthy).toBe(false);

    await upstream.setMode('replay');
    await halfOpen;
    const requestsBeforeProbe = upstream.requests;
    const results = await provider.search('AAPL', 5);

    expect(results[0]?.symbol).toBe('AAPL');
    expect(upstream.requests).toBe(requestsBeforeProbe + 1);
    expect(provider.state).toBe('closed');
    expect(provider.health()).toMatchObject({ healthy: true, last_error: null });
    expect([logged(/opened/), logged(/half-open/), logged(/breaker closed/), logged(/recovered/)]).toEqual([1, 1, 1, 1]);
    provider.close();
  });

  it('when the probe fails, then it opens again for another reset period', async () => {
    const { provider, reaches } = resilient(300);
    const halfOpen = reaches('half-open');
    await openBreaker(provider);
    await halfOpen;

    const reopened = reaches('open');
    const requestsBeforeProbe = upstream.requests;
    await expect(provider.getQuote('^IXIC')).rejects.toThrow(/HTTP 500/);
    await reopened;

    expect(upstream.requests).toBe(requestsBeforeProbe + 1);
    expect(provider.state).toBe('open');
    await expect(provider.getQuote('^IXIC')).rejects.toBeInstanceOf(CircuitOpenError);
    expect(upstream.requests).toBe(requestsBeforeProbe + 1);
    provider.close();
  });

  it('when the upstream hangs, then each call fails within the timeout and the breaker still opens', async () => {
    const { provider } = resilient(60_000, TIMEOUT_MS);
    await upstream.setMode('hang');
    for (let i = 0; i < 3; i++) {
      const { error, elapsedMs } = await timed(() => provider.getQuote('^IXIC'));
      expect((error as Error).message).toMatch(/timed out/);
      expect(elapsedMs).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    }
    expect(provider.state).toBe('open');
    provider.close();
  });
});
