import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DataSourceError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import {
  CircuitOpenError,
  ResilientMarketDataProvider,
  type BreakerState,
} from '../../src/infra/market/resilient-market-data-provider.js';
import { DEFAULT_USER_AGENT, YahooMarketDataProvider } from '../../src/infra/market/yahoo-market-data-provider.js';
import type { Quote } from '../../src/ports.js';
import { startFakeUpstream, type FakeUpstream, type FakeUpstreamMode } from '../helpers/fake-upstream.js';

const FIXTURES_DIR = fileURLToPath(new URL('../fixtures/yahoo/', import.meta.url));
/** The timeout of calls that are meant to fail; successful calls get a generous one, so load cannot fail them. */
const TIMEOUT_MS = 300;
const GENEROUS_TIMEOUT_MS = 5000;
/** How much later than its timeout a failing call may settle. */
const MARGIN_MS = 400;

/** The recorded body a symbol is replayed from, read independently of the code under test. */
interface RecordedChart {
  meta: Record<string, unknown> & { regularMarketPrice: number; currency: string; regularMarketTime: number; chartPreviousClose: number };
  indicators: { quote: Array<Record<string, Array<number | null>>> };
}
function recorded(file: string): RecordedChart {
  const body = JSON.parse(readFileSync(join(FIXTURES_DIR, file), 'utf8')) as { chart: { result: RecordedChart[] } };
  const result = body.chart.result[0];
  if (!result) throw new Error(`${file} has no chart result`);
  return result;
}
function bars(chart: RecordedChart, key: string): number[] {
  return (chart.indicators.quote[0]?.[key] ?? []).filter((v): v is number => v !== null);
}

function quoteOf(quotes: Quote[], symbol: string): Quote {
  const quote = quotes.find((q) => q.symbol === symbol);
  if (!quote) throw new Error(`no quote for ${symbol} in ${quotes.map((q) => q.symbol).join(', ')}`);
  return quote;
}

/** Settles `promise` and reports how long it took, so a test can bound the latency of a failure. */
async function timed<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown; elapsedMs: number }> {
  const start = performance.now();
  try {
    const value = await promise;
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
});

function yahoo(symbols: string[], extra: { userAgent?: string; timeoutMs?: number } = {}) {
  return new YahooMarketDataProvider({ baseUrl: upstream.baseUrl, symbols, timeoutMs: GENEROUS_TIMEOUT_MS, ...extra });
}

describe('YahooMarketDataProvider against replayed recorded responses', () => {
  it('maps every field of complete index and equity responses to the numbers in the recordings', async () => {
    const quotes = await yahoo(['^IXIC', '^SOX', 'AAPL']).getIndices();

    expect(quotes.map((q) => q.symbol)).toEqual(['^IXIC', '^SOX', 'AAPL']);
    for (const [symbol, file] of [
      ['^IXIC', 'chart-%5EIXIC.json'],
      ['^SOX', 'chart-%5ESOX.json'],
      ['AAPL', 'yahoo-chart-AAPL-200.json'],
    ] as const) {
      const { meta, ...chart } = recorded(file);
      const quote = quoteOf(quotes, symbol);
      expect(quote.price).toBe(meta.regularMarketPrice);
      expect(quote.prev_close).toBe(meta.chartPreviousClose);
      expect(quote.name).toBe(meta.longName);
      expect(quote.currency).toBe(meta.currency);
      expect(quote.high).toBe(meta.regularMarketDayHigh);
      expect(quote.low).toBe(meta.regularMarketDayLow);
      expect(quote.volume).toBe(meta.regularMarketVolume);
      expect(quote.timestamp).toBe(new Date(meta.regularMarketTime * 1000).toISOString());
      expect(quote.open).toBeCloseTo(bars({ meta, ...chart }, 'open')[0] ?? Number.NaN, 2);
      expect(quote.change).toBeCloseTo(meta.regularMarketPrice - meta.chartPreviousClose, 4);
      expect(quote.change_percent).toBeCloseTo(((meta.regularMarketPrice - meta.chartPreviousClose) / meta.chartPreviousClose) * 100, 2);
    }
  });

  it('when meta lacks the day range, volume and names, takes them from the bars and names the quote by its symbol', async () => {
    const [quote] = await yahoo(['^SP500TR']).getIndices();
    const chart = recorded('chart-%5ESP500TR.json');

    expect(quote?.symbol).toBe('^SP500TR');
    expect(quote?.name).toBe('^SP500TR');
    expect(quote?.price).toBe(chart.meta.regularMarketPrice);
    expect(quote?.high).toBeCloseTo(Math.max(...bars(chart, 'high')), 2);
    expect(quote?.low).toBeCloseTo(Math.min(...bars(chart, 'low')), 2);
    expect(quote?.open).toBeCloseTo(bars(chart, 'open')[0] ?? Number.NaN, 2);
    expect(quote?.volume).toBe(bars(chart, 'volume').reduce((a, b) => a + b, 0));
  });

  it("treats Yahoo's 0.0 placeholders for unknown prices as unknown (null), not as a price of zero", async () => {
    const [quote] = await yahoo(['KOSPI-25.KS']).getIndices();
    const chart = recorded('chart-KOSPI-25.KS.json');

    expect(chart.meta.regularMarketDayHigh).toBe(0);
    expect(quote).toMatchObject({ symbol: 'KOSPI-25.KS', high: null, low: null, open: null, volume: chart.meta.regularMarketVolume });
    expect(quote?.price).toBe(chart.meta.regularMarketPrice);
    expect(quote?.currency).toBe('KRW');
  });

  it('requests each symbol percent-encoded in the path, for one session of daily bars', async () => {
    const before = upstream.requests;
    await yahoo(['^IXIC', 'KOSPI-25.KS']).getIndices();

    const urls = upstream.requestLog.slice(before).map((r) => r.url).sort();
    expect(urls).toEqual(['/v8/finance/chart/%5EIXIC?interval=1d&range=1d', '/v8/finance/chart/KOSPI-25.KS?interval=1d&range=1d']);
  });

  it('sends a browser-like User-Agent, or the configured one', async () => {
    const before = upstream.requests;
    await yahoo(['^IXIC']).getIndices();
    await yahoo(['^IXIC'], { userAgent: 'mds-test/1.0' }).getIndices();

    const agents = upstream.requestLog.slice(before).map((r) => r.headers['user-agent']);
    expect(agents).toEqual([DEFAULT_USER_AGENT, 'mds-test/1.0']);
    expect(DEFAULT_USER_AGENT).toMatch(/^Mozilla\/5\.0 \(.+\) .*Chrome\/[\d.]+ Safari\//);
  });

  it('when one symbol is unknown upstream (404), returns the others', async () => {
    const quotes = await yahoo(['^IXIC', 'NO-SUCH-INDEX', '^SOX']).getIndices();
    expect(quotes.map((q) => q.symbol)).toEqual(['^IXIC', '^SOX']);
  });

  it('when every symbol is unknown, throws DataSourceError quoting the 404 and its reason', async () => {
    const error = await yahoo(['NOPE1', 'NOPE2']).getIndices().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataSourceError);
    expect((error as Error).message).toMatch(/HTTP 404 \(Not Found: No data found, symbol may be delisted\) for NOPE1, NOPE2/);
  });

  it('with no symbols configured, returns an empty list without calling upstream', async () => {
    const before = upstream.requests;
    await expect(yahoo([]).getIndices()).resolves.toEqual([]);
    expect(upstream.requests).toBe(before);
  });

  const failures: Array<[FakeUpstreamMode, RegExp]> = [
    ['error500', /HTTP 500 for \^IXIC, \^SOX/],
    ['rate-limited', /HTTP 429 for \^IXIC, \^SOX/],
    ['garbage', /unparsable response body \(not JSON\)/],
    ['unexpected', /unexpected response shape: no "chart" object/],
    ['hang', new RegExp(`timed out after ${TIMEOUT_MS} ms`)],
    ['refuse', /connection refused/],
  ];
  it.each(failures)('when the upstream is in %s mode, throws DataSourceError naming the cause within the timeout', async (mode, cause) => {
    await upstream.setMode(mode);

    const { error, elapsedMs } = await timed(yahoo(['^IXIC', '^SOX'], { timeoutMs: TIMEOUT_MS }).getIndices());

    expect(error).toBeInstanceOf(DataSourceError);
    expect((error as Error).message).toMatch(cause);
    expect(elapsedMs).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    if (mode === 'hang') expect(elapsedMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
  });

  it("when rate-limited, passes on Yahoo's Retry-After", async () => {
    await upstream.setMode('rate-limited');
    const error = await yahoo(['^IXIC']).getIndices().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataSourceError);
    expect((error as DataSourceError).retryAfterSeconds).toBe(7);
  });

  it('when the refused upstream listens again, the next call succeeds', async () => {
    await upstream.setMode('refuse');
    await expect(yahoo(['^IXIC']).getIndices()).rejects.toBeInstanceOf(DataSourceError);
    await upstream.restart();
    await expect(yahoo(['^IXIC']).getIndices()).resolves.toHaveLength(1);
  });
});

describe('ResilientMarketDataProvider around the Yahoo provider', () => {
  const SYMBOLS = ['^IXIC', '^SOX'];

  function resilient(resetTimeoutMs: number, timeoutMs = GENEROUS_TIMEOUT_MS) {
    const lines: Array<{ level: number; msg: string }> = [];
    const logger = createLogger({ level: 'debug', name: 'test' }, { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) });
    const waiters = new Map<BreakerState, Array<() => void>>();
    const provider = new ResilientMarketDataProvider(yahoo(SYMBOLS, { timeoutMs }), {
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
    for (let i = 0; i < 3; i++) await expect(provider.getIndices()).rejects.toThrow(/HTTP 500/);
    expect(provider.state).toBe('open');
  }

  it('before its first call, a remote provider is not reported healthy', () => {
    const { provider } = resilient(10_000);
    expect(provider.health()).toEqual({ provider: 'yahoo', healthy: false, last_success_at: null, last_error: null });
    provider.close();
  });

  it('after a success, reports healthy with the time of the success', async () => {
    const { provider } = resilient(10_000);
    const before = Date.now();
    await provider.getIndices();
    const health = provider.health();
    expect(health.healthy).toBe(true);
    expect(Date.parse(health.last_success_at ?? '')).toBeGreaterThanOrEqual(before - 1);
    expect(health.last_error).toBeNull();
    provider.close();
  });

  it('when the upstream keeps failing, opens, then fails fast without calling the upstream', async () => {
    const { provider, logged } = resilient(60_000);
    await openBreaker(provider);
    const requestsWhenOpened = upstream.requests;

    for (let i = 0; i < 3; i++) {
      const { error, elapsedMs } = await timed(provider.getIndices());
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

  it('after the reset timeout, a probe reaches the recovered upstream, closes the breaker and makes health healthy again', async () => {
    const { provider, reaches, logged } = resilient(300);
    const halfOpen = reaches('half-open');
    await openBreaker(provider);
    expect(provider.health().healthy).toBe(false);

    await upstream.setMode('replay');
    await halfOpen;
    const requestsBeforeProbe = upstream.requests;
    const quotes = await provider.getIndices();

    expect(quotes.map((q) => q.symbol)).toEqual(SYMBOLS);
    expect(upstream.requests).toBe(requestsBeforeProbe + SYMBOLS.length);
    expect(provider.state).toBe('closed');
    const health = provider.health();
    expect(health.healthy).toBe(true);
    expect(health.last_success_at).not.toBeNull();
    expect(health.last_error).toBeNull();
    expect([logged(/opened/), logged(/half-open/), logged(/breaker closed/), logged(/recovered/)]).toEqual([1, 1, 1, 1]);
    provider.close();
  });

  it('when the probe fails, opens again for another reset period', async () => {
    const { provider, reaches } = resilient(300);
    const halfOpen = reaches('half-open');
    await openBreaker(provider);
    await halfOpen;

    const reopened = reaches('open');
    const requestsBeforeProbe = upstream.requests;
    await expect(provider.getIndices()).rejects.toThrow(/HTTP 500/);
    await reopened;

    expect(upstream.requests).toBe(requestsBeforeProbe + SYMBOLS.length);
    expect(provider.state).toBe('open');
    await expect(provider.getIndices()).rejects.toBeInstanceOf(CircuitOpenError);
    expect(upstream.requests).toBe(requestsBeforeProbe + SYMBOLS.length);
    provider.close();
  });

  it('when the upstream hangs, each call fails within the timeout and the breaker still opens', async () => {
    const { provider } = resilient(60_000, TIMEOUT_MS);
    await upstream.setMode('hang');
    for (let i = 0; i < 3; i++) {
      const { error, elapsedMs } = await timed(provider.getIndices());
      expect((error as Error).message).toMatch(/timed out/);
      expect(elapsedMs).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    }
    expect(provider.state).toBe('open');
    provider.close();
  });
});
