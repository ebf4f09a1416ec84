/**
 * Cache keys from user input are canonical (issue 32, item 2): history requests that differ only in
 * the millisecond of `start` name the same bars, so they share one cache key and the service keeps
 * no copy per spelling. `mds serve` from dist/ as a process of its own (the simulated provider, its
 * own redis-server), so the RSS measured is the server's alone: read from /proc after a full
 * collection that the test asks for through the server's inspector (`--inspect`), not a test hook.
 */
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectorUrl, openInspector, rssOf, type Inspector } from '../helpers/inspector.js';
import { freePort, startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { spawnServe, type ServeProcess } from '../helpers/serve-process.js';

const MB = 2 ** 20;
const mb = (bytes: number) => (bytes / MB).toFixed(1);

describe('history cache keys from raw milliseconds', () => {
  let redis: RedisProcess;
  let client: Redis;
  let dir: string;
  let serve: ServeProcess;
  let inspector: Inspector;

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis({ port: redis.port, host: '127.0.0.1', lazyConnect: true });
    await client.connect();
    dir = mkdtempSync(join(tmpdir(), 'mds-history-keys-'));
    serve = await spawnServe(['--port', String(await freePort())], {
      cwd: dir,
      env: {
        PATH: process.env.PATH,
        HOME: dir,
        NODE_ENV: 'production',
        // The inspector on a port of the kernel's choosing, on loopback: node prints where on stderr.
        NODE_OPTIONS: '--inspect=127.0.0.1:0',
        SECRET_KEY: 'history-keys-secret-key-0123456789abcdef',
        DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
        CACHE_URL: redis.url,
        REFRESH_INTERVAL_SECONDS: '0',
        RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
      },
    });
    inspector = await openInspector(inspectorUrl(serve.stderr()));
  });
  afterAll(async () => {
    inspector?.close();
    await serve?.stop();
    client?.disconnect();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const historyKeys = async () => (await client.keys('*')).filter((k) => k.includes('history')).length;

  it('when 1,000 history requests differ only in the millisecond of start, then Redis gains at most one key per session they name and the server RSS after a full GC stays within 10 MB', async () => {
    // The process measured is the node that serves: the one the inspector is attached to, running bin/run.js serve.
    const pid = serve.child.pid!;
    expect(await inspector.pid()).toBe(pid);
    expect(realpathSync(`/proc/${pid}/exe`)).toBe(realpathSync(process.execPath));
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')).toContain('serve');

    const target = (ms: number) => `${serve.url}/api/history/AAPL?interval=1d&start=2020-01-02T00:00:00.${String(ms).padStart(3, '0')}Z&end=2020-03-02`;
    /** `count` requests from millisecond 0 up, 50 at a time; resolves to the distinct candle lists answered. */
    const send = async (count: number, symbol: string) => {
      const bodies = new Set<string>();
      for (let batch = 0; batch < count; batch += 50) {
        const answers = await Promise.all(
          Array.from({ length: 50 }, async (_, i) => {
            const res = await fetch(target(batch + i).replace('AAPL', symbol));
            expect(res.status).toBe(200);
            return (await res.json()) as { data: { candles: unknown[] } };
          }),
        );
        for (const a of answers) bodies.add(JSON.stringify(a.data.candles));
      }
      return bodies;
    };

    // The same traffic for another symbol first, so the heap and the allocator have their working size.
    await send(200, 'MSFT');
    const keysBefore = await historyKeys();
    // The warm-up was stored: the count below can move.
    expect(keysBefore).toBeGreaterThan(0);
    await inspector.collectGarbage();
    const rssBefore = rssOf(pid);
    const heapBefore = await inspector.heapUsed();

    const bodies = await send(1000, 'AAPL');

    await inspector.collectGarbage();
    const rssAfter = rssOf(pid);
    const heapAfter = await inspector.heapUsed();
    const keysAfter = await historyKeys();
    // Every start from 00:00:00.000 to .999 on 2020-01-02 names the session of 2020-01-02 (it opens at 14:30 UTC).
    const sessionsNamed = 1;
    console.log(
      `history keys: ${keysBefore} -> ${keysAfter} after 1,000 requests; server RSS ${mb(rssBefore)} MB -> ${mb(rssAfter)} MB after a full GC ` +
        `(${rssAfter >= rssBefore ? '+' : ''}${mb(rssAfter - rssBefore)} MB; heap ${mb(heapBefore)} -> ${mb(heapAfter)} MB)`,
    );
    expect(keysAfter - keysBefore).toBeLessThanOrEqual(sessionsNamed);
    expect(bodies.size).toBe(1);
    expect(rssAfter - rssBefore).toBeLessThan(10 * MB);
    // 1,200 requests over HTTP on a shared machine: far beyond the default per-test time.
  }, 120_000);
});
