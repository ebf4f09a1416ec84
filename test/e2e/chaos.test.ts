/**
 * Chaos under traffic: `mds serve` as a real process, with its own redis-server and a fake upstream,
 * under a bounded load of cached and uncached reads while Redis is killed and restarted and the
 * upstream is taken away and brought back.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { freePort, startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

const FIXTURES = resolve(import.meta.dirname, '../fixtures/yahoo');
const API_KEY = 'chaos-key-0123456789';
const DATA_SOURCE_MESSAGE = 'Data source is temporarily unavailable, please retry later';

function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  return Number(kb) * 1024;
}

interface Outcome {
  at?: number;
  path: string;
  status: number;
  ms: number;
  error?: string;
  cache?: string | null;
}

describe('chaos under traffic', () => {
  let dir: string;
  let redis: RedisProcess;
  let upstream: FakeUpstream;
  let serve: ServeProcess;
  let url: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-chaos-'));
    redis = await startRedis();
    upstream = await startFakeUpstream({ fixturesDir: FIXTURES });
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: dir,
      DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
      CACHE_URL: redis.url,
      SECRET_KEY: 'chaos-secret-key-0123456789abcdef',
      API_KEYS: API_KEY,
      BCRYPT_ROUNDS: '4',
      MARKET_DATA_PROVIDER: 'yahoo',
      MARKET_DATA_BASE_URL: upstream.baseUrl,
      MARKET_INDICES: '^IXIC,^SOX',
      MARKET_DATA_TIMEOUT_MS: '500',
      MARKET_DATA_BREAKER_RESET_SECONDS: '1',
      CACHE_TTL_SECONDS: '2',
      REFRESH_INTERVAL_SECONDS: '1',
      LOG_LEVEL: 'info',
      // The traffic comes from one address at a rate far past the default quota; quotas have their own tests.
      RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
      RATE_LIMIT_AUTHENTICATED_PER_MINUTE: '0',
      METRICS_PORT: '0',
    };
    expect(spawnSync(process.execPath, [MDS_BIN, 'init'], { env, encoding: 'utf8' }).status).toBe(0);
    serve = await spawnServe(['--port', String(await freePort())], { env, stdout: openSync(join(dir, 'service.log'), 'w') });
    url = serve.url;
  });

  afterAll(async () => {
    await serve?.stop();
    await upstream?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('kill and restart Redis, lose and regain the upstream: no unexpected 5xx, nothing over 1 s, memory bounded, healthy at the end', async () => {
    const call = async (path: string, init?: RequestInit): Promise<Outcome> => {
      const started = performance.now();
      try {
        const res = await fetch(`${url}${path}`, { ...init, signal: AbortSignal.timeout(5000) });
        const text = await res.text();
        const outcome: Outcome = { at: Math.round(started), path, status: res.status, ms: performance.now() - started, cache: res.headers.get('x-cache') };
        if (res.status >= 500) outcome.error = (JSON.parse(text) as { error: string }).error;
        return outcome;
      } catch (err) {
        return { at: Math.round(started), path, status: 0, ms: performance.now() - started, error: String(err) };
      }
    };

    // Warm up, then take the memory reading the run is compared with.
    for (let i = 0; i < 200; i += 1) await call('/api/indices');
    const rssBefore = rssBytes(serve.child.pid!);

    const outcomes: Outcome[] = [];
    let running = true;
    const reader = async () => {
      while (running) outcomes.push(await call('/api/indices'));
    };
    // Uncached reads: a flush forces the next read to go upstream; health and status are never cached.
    const flusher = async () => {
      while (running) {
        outcomes.push(await call('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } }));
        outcomes.push(await call('/api/health'));
        outcomes.push(await call('/api/admin/status', { headers: { 'X-API-Key': API_KEY } }));
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const load = Promise.all([...Array.from({ length: 16 }, reader), flusher()]);

    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    await pause(1500);
    await redis.kill();
    await pause(3000);
    await redis.restart();
    await pause(1500);
    await upstream.setMode('refuse');
    await pause(2500);
    await upstream.setMode('replay');
    await pause(2000);
    running = false;
    await load;

    const failures = outcomes.filter((o) => o.status === 0 || (o.status >= 500 && !(o.status === 503 && o.error === DATA_SOURCE_MESSAGE)));
    expect(failures).toEqual([]);
    const unexpected = outcomes.filter((o) => ![200, 503].includes(o.status));
    expect(unexpected).toEqual([]);
    const slowest = outcomes.reduce((max, o) => Math.max(max, o.ms), 0);
    if (slowest >= 1000) console.log('slow requests:', JSON.stringify(outcomes.filter((o) => o.ms >= 1000)));
    expect(slowest).toBeLessThan(1000);
    expect(outcomes.length).toBeGreaterThan(1000);
    // 503 only where the contract allows it: the upstream was away and nothing cached could answer.
    const served = outcomes.filter((o) => o.path === '/api/indices' && o.status === 200).length;
    expect(served).toBeGreaterThan(outcomes.filter((o) => o.status === 503).length);

    await waitFor(
      async () => {
        const health = (await (await fetch(`${url}/api/health`)).json()) as { cache: boolean; datasource: boolean };
        return health.cache && health.datasource;
      },
      { timeoutMs: 10_000, intervalMs: 100, message: 'cache and datasource healthy again' },
    );
    const { data: status } = (await (await fetch(`${url}/api/admin/status`, { headers: { 'X-API-Key': API_KEY } })).json()) as {
      data: { cache: { mode: string }; datasource: { healthy: boolean } };
    };
    expect(status.cache.mode).toBe('redis');
    expect(status.datasource.healthy).toBe(true);

    const rssAfter = rssBytes(serve.child.pid!);
    expect(rssAfter - rssBefore).toBeLessThan(50 * 1024 * 1024);
  }, 60_000);
});
