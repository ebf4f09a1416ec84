/**
 * Nothing a caller types reaches an upstream URL as structure (issue 32, item 1). At the adapter
 * boundary: each adapter that puts a symbol in a path is handed the hostile set, and a local upstream
 * records the raw request target: the symbol arrives as exactly one encoded path segment, or (for the
 * dot segments no encoding can hold) no request is made at all. Over HTTP: `..` is refused by the
 * contract, and a symbol Yahoo refuses cannot open the breaker for everyone.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyPool } from '../../src/infra/market/key-pool.js';
import { PolygonMarketDataProvider } from '../../src/infra/market/polygon-market-data-provider.js';
import { ResilientMarketDataProvider } from '../../src/infra/market/resilient-market-data-provider.js';
import { TiingoMarketDataProvider } from '../../src/infra/market/tiingo-market-data-provider.js';
import { YahooMarketDataProvider } from '../../src/infra/market/yahoo-market-data-provider.js';
import { isSymbol } from '../../src/domain/symbols.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';

const HOSTILE = ['..', '.', '%2e', 'a/b', 'a?b', 'a#b'];

/** A local upstream that answers every request 400 (nothing parsable) and records each raw target. */
async function recordingUpstream(): Promise<{ baseUrl: string; targets: string[]; close(): Promise<void> }> {
  const targets: string[] = [];
  const server: Server = createServer((req, res) => {
    targets.push(req.url ?? '');
    res.writeHead(400, { 'content-type': 'text/plain' }).end('bad request');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { baseUrl: `http://127.0.0.1:${port}`, targets, close: () => new Promise((r) => server.close(() => r())) };
}

/** The path segments of a raw request target (query and fragment cut off). */
const segmentsOf = (target: string) => target.split('?')[0]!.split('/').slice(1);

describe('the symbol rule', () => {
  it('when a symbol is ., .., starts with a dot, or holds a slash, percent sign, ?, # or whitespace, then it is no symbol', () => {
    for (const bad of [...HOSTILE, '.AAPL', ' AAPL', 'AA PL', 'A%41', 'a\tb']) expect(isSymbol(bad), bad).toBe(false);
    for (const good of ['AAPL', 'BRK.B', '^GSPC', '000001.SS', 'EURUSD=X', 'BTC-USD', 'A..B', 'X.']) expect(isSymbol(good), good).toBe(true);
  });
});

describe('each adapter puts a symbol in its URL as one encoded path segment', () => {
  let upstream: Awaited<ReturnType<typeof recordingUpstream>>;
  beforeAll(async () => {
    upstream = await recordingUpstream();
  });
  afterAll(async () => {
    await upstream.close();
  });

  const adapters = () => ({
    yahoo: { provider: new YahooMarketDataProvider({ baseUrl: upstream.baseUrl, timeoutMs: 2000 }), template: ['v8', 'finance', 'chart', '*'] },
    polygon: { provider: new PolygonMarketDataProvider({ baseUrl: upstream.baseUrl, timeoutMs: 2000, keys: new KeyPool(['k']) }), template: undefined },
    tiingo: { provider: new TiingoMarketDataProvider({ baseUrl: upstream.baseUrl, timeoutMs: 2000, keys: new KeyPool(['k']) }), template: undefined },
  });

  for (const name of ['yahoo', 'polygon', 'tiingo'] as const) {
    it(`${name}: when handed the hostile set, then each symbol is one encoded segment of the target, or no request is made`, async () => {
      const { provider, template } = adapters()[name];
      for (const symbol of HOSTILE) {
        upstream.targets.length = 0;
        await provider.getQuote(symbol).catch(() => undefined);
        await provider.getHistory({ symbol, interval: '1d', range: '1mo' } as never).catch(() => undefined);
        for (const target of upstream.targets) {
          const segments = segmentsOf(target);
          // No dot segment, no raw slash, ?, # or stray % escaping the segment.
          expect(segments.some((s) => s === '.' || s === '..'), `${name} ${symbol}: ${target}`).toBe(false);
          expect(target, `${name} ${symbol}`).not.toContain('#');
          for (const s of segments) expect(() => decodeURIComponent(s), `${name} ${symbol}: ${target}`).not.toThrow();
          const holding = segments.filter((s) => decodeURIComponent(s).includes(symbol.toUpperCase()) || decodeURIComponent(s).includes(symbol));
          if (symbol !== '.' && symbol !== '..') expect(holding.length, `${name} ${symbol}: ${target}`).toBeLessThanOrEqual(1);
          if (template) {
            expect(segments.length, `${name} ${symbol}: ${target}`).toBe(template.length);
            expect(decodeURIComponent(segments[3]!).toUpperCase(), `${name} ${symbol}: ${target}`).toBe(symbol.toUpperCase());
          }
        }
        if (symbol === '.' || symbol === '..') expect(upstream.targets, `${name} ${symbol}`).toEqual([]);
      }
    });
  }

  it('yahoo: when the upstream refuses one symbol with a 4xx again and again, then the breaker stays closed for the others', async () => {
    const yahoo = new ResilientMarketDataProvider(new YahooMarketDataProvider({ baseUrl: upstream.baseUrl, timeoutMs: 2000 }), { timeoutMs: 2000, volumeThreshold: 3 });
    try {
      for (let i = 0; i < 6; i++) await yahoo.getQuote('a?b').catch(() => undefined);
      expect(yahoo.state).toBe('closed');
    } finally {
      yahoo.close();
    }
  });
});

describe('one caller cannot open the breaker for everyone', () => {
  let redis: RedisProcess;
  let upstream: FakeUpstream;
  let svc: TestService;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startFakeUpstream({ fixturesDir: resolve(import.meta.dirname, '../fixtures/yahoo'), retryAfterSeconds: 1 });
    svc = await startTestService({
      CACHE_URL: redis.url,
      MARKET_DATA_PROVIDER: 'yahoo',
      MARKET_DATA_BASE_URL: upstream.baseUrl,
      MARKET_INDICES: 'AAPL',
      MARKET_DATA_TIMEOUT_MS: '2000',
      UPSTREAM_MAX_RPS: '0',
    });
  });
  afterAll(async () => {
    await svc?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('when .. is asked for four times, then each is 422 from the contract, Yahoo is never asked, and AAPL is still answered', async () => {
    for (let i = 0; i < 4; i++) {
      for (const path of ['/api/quotes?symbols=..', '/api/quotes/..%2F..', '/api/quotes?symbols=.', '/api/quotes?symbols=.AAPL']) {
        const res = await svc.fetch(path);
        const body = (await res.json()) as { code: number };
        expect(res.status, path).toBe(422);
        expect(body.code, path).toBe(422);
      }
    }
    expect(upstream.requestLog.filter((r) => !r.url.startsWith('/v8/finance/chart/AAPL'))).toEqual([]);

    const aapl = await svc.fetch('/api/quotes/AAPL');
    expect(aapl.status).toBe(200);
  });
});
