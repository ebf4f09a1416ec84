import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { noteSecrets } from '../helpers/log-files.js';
import { freePort } from '../helpers/redis-server.js';
import { fixture, startReplayUpstream, type ReplayUpstream } from '../helpers/replay-upstream.js';
import { spawnServe, type ServeProcess } from '../helpers/serve-process.js';

const FMP_KEY = 'fmp-wiring-key-0001';

describe('mds serve with MARKET_DATA_PROVIDERS', () => {
  let dir: string;
  let upstream: ReplayUpstream;
  /** Yahoo, second in the chain, asked when FMP does not know a symbol: it does not know it either. */
  let yahoo: ReplayUpstream;
  let serve: ServeProcess | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-providers-'));
    // The leak scan that runs last fails the suite if any log line carries the provider key.
    noteSecrets(FMP_KEY);
    upstream = await startReplayUpstream({
      routes: [{ path: '/stable/quote', query: { symbol: 'AAPL' }, status: 200, contentType: 'application/json; charset=utf-8', gzip: true, body: fixture('fmp-quote-AAPL.json') }],
      notFound: { status: 200, contentType: 'application/json; charset=utf-8', body: '[]' },
    });
    yahoo = await startReplayUpstream({
      routes: [],
      notFound: { status: 404, contentType: 'application/json', body: '{"chart":{"result":null,"error":{"code":"Not Found","description":"No data found, symbol may be delisted"}}}' },
    });
  });
  afterAll(async () => {
    await serve?.stop();
    await upstream.close();
    await yahoo.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('when fmp is first in the chain, then the service answers from FMP, and a symbol neither FMP nor Yahoo knows is 404', async () => {
    serve = await spawnServe(['--port', String(await freePort())], {
      env: {
        PATH: process.env.PATH,
        HOME: dir,
        DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
        CACHE_URL: `redis://127.0.0.1:${inject('redisPort')}/0`,
        SECRET_KEY: 'providers-e2e-secret-key-0123456789abcdef',
        BCRYPT_ROUNDS: '4',
        REFRESH_INTERVAL_SECONDS: '0',
        STREAM_REFRESH_SECONDS: '0',
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
        MARKET_DATA_PROVIDERS: 'fmp,yahoo',
        FMP_API_KEYS: FMP_KEY,
        FMP_BASE_URL: upstream.baseUrl,
        YAHOO_BASE_URL: yahoo.baseUrl,
      },
    });
    const quote = await fetch(`${serve.url}/api/quotes/AAPL`);
    expect(quote.status).toBe(200);
    const body = (await quote.json()) as { data: { price: number; prev_close: number; timestamp: string }; source: string };
    expect(body.source).toBe('fmp');
    expect(body.data).toMatchObject({ price: 256.08, prev_close: 245.5, timestamp: '2025-09-22T20:00:01.000Z' });
    expect(upstream.requests.some((r) => r.path === '/stable/quote' && r.key === FMP_KEY)).toBe(true);

    expect((await fetch(`${serve.url}/api/quotes/ZZZZ`)).status).toBe(404);
    expect(yahoo.requests.some((r) => r.path === '/v8/finance/chart/ZZZZ')).toBe(true);
    // The key goes to the provider and nowhere else.
    expect(serve.stdout()).not.toContain(FMP_KEY);
  });

  it('when a keyed provider is listed without its key, then serve exits naming the variable', async () => {
    await expect(
      spawnServe(['--port', String(await freePort())], {
        env: { PATH: process.env.PATH, HOME: dir, DATABASE_URL: `sqlite:${join(dir, 'other.sqlite')}`, METRICS_PORT: '0', MARKET_DATA_PROVIDERS: 'tiingo,yahoo' },
      }),
    ).rejects.toThrow(/TIINGO_API_KEYS/);
  });
});
