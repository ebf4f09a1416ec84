/**
 * Metrics from the real CLI (`mds serve` from dist/, as operators run it): the primary of
 * `--workers 2` answers one scrape with the sum of both workers, and METRICS_PORT=0 opens no listener.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest';
import { promtoolCheck, sampleValue, scrape } from '../helpers/metrics.js';
import { freePort } from '../helpers/redis-server.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

const HTTP = 'http_server_request_duration_seconds_count';

let dir: string;
let env: NodeJS.ProcessEnv;
let serve: ServeProcess | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mds-metrics-'));
  env = {
    PATH: process.env.PATH,
    HOME: dir,
    DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
    CACHE_URL: `redis://127.0.0.1:${inject('redisPort')}/0`,
    SECRET_KEY: 'metrics-e2e-secret-key-0123456789abcdef',
    BCRYPT_ROUNDS: '4',
    REFRESH_INTERVAL_SECONDS: '0',
    LOG_LEVEL: 'info',
  };
});
afterEach(async () => {
  await serve?.stop();
  serve = undefined;
  rmSync(dir, { recursive: true, force: true });
});

/** One GET on a connection of its own, so the cluster hands each request to the next worker. */
function getOnNewConnection(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { connection: 'close' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The TCP ports process `pid` listens on, from `ss` (iproute2). */
function listeningPorts(pid: number): number[] {
  const r = spawnSync('ss', ['-ltnpH'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ss failed: ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter((line) => line.includes(`pid=${pid},`))
    .map((line) => Number(/:(\d+)\s+\S+:\*/.exec(line)?.[1]))
    .sort((a, b) => a - b);
}

describe('mds serve metrics', () => {
  it('when serving with --workers 2, then one scrape of the primary shows both workers and passes promtool', async () => {
    // Two workers migrating one fresh SQLite file at once would race: migrate first, as operators do.
    expect(spawnSync(process.execPath, [MDS_BIN, 'init'], { env, encoding: 'utf8' }).status).toBe(0);
    const metricsPort = await freePort();
    serve = await spawnServe(['--port', String(await freePort()), '--workers', '2'], { env: { ...env, METRICS_PORT: String(metricsPort) } });
    const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    await waitFor(async () => sampleValue(await scrape(metricsUrl).catch(() => ''), 'mds_processes') === 2, {
      timeoutMs: 15_000,
      message: 'both workers answer the scrape',
    });

    const sent = 20;
    for (let i = 0; i < sent; i += 1) expect(await getOnNewConnection(`${serve.url}/api/health`)).toBe(200);

    // A response is counted once its last byte is handed to the socket, which the client may see first.
    let text = '';
    await waitFor(
      async () => {
        text = await scrape(metricsUrl);
        return sampleValue(text, HTTP, { http_request_method: 'GET', http_route: '/api/health', http_response_status_code: '200' }) === sent;
      },
      { timeoutMs: 2_000, message: `the scrape counts all ${sent} requests` },
    );
    expect(sampleValue(text, HTTP, { http_request_method: 'GET', http_route: '/api/health', http_response_status_code: '200' })).toBe(sent);
    // Express logs each request with the pid of the worker that served it: both served some (log
    // lines reach stdout in batches, within 100 ms).
    const pids = () =>
      new Set(
        serve!
          .stdout()
          .split('\n')
          .filter((l) => l.includes('"url":"/api/health"'))
          .map((l) => (JSON.parse(l) as { pid: number }).pid),
      );
    await waitFor(() => pids().size === 2, { timeoutMs: 2_000, message: 'request lines from both workers' });
    expect(sampleValue(text, 'mds_processes')).toBe(2);
    expect(sampleValue(text, 'mds_cache_mode', { mode: 'redis' })).toBe(2);
    expect(promtoolCheck(text)).toEqual({ status: 0, output: '' });

    expect((await fetch(`${serve.url}/metrics`)).status).toBe(404);
  });

  it('when METRICS_PORT is 0, then mds serve listens on the API port alone', async () => {
    serve = await spawnServe(['--port', String(await freePort())], { env: { ...env, METRICS_PORT: '0' } });
    const apiPort = Number(new URL(serve.url).port);
    expect(listeningPorts(serve.child.pid!)).toEqual([apiPort]);
    // Logs are written asynchronously: the line may follow the listening message.
    await waitFor(() => serve!.stdout().includes('metrics off (METRICS_PORT=0)'), { message: 'the metrics-off log line' });
  });

  it('when metrics are on, then mds serve listens on the API port and the metrics port', async () => {
    const metricsPort = await freePort();
    serve = await spawnServe(['--port', String(await freePort())], { env: { ...env, METRICS_PORT: String(metricsPort) } });
    const apiPort = Number(new URL(serve.url).port);
    expect(listeningPorts(serve.child.pid!)).toEqual([apiPort, metricsPort].sort((a, b) => a - b));
  });

  it('when the metrics port is taken, then mds serve refuses to start and names it', async () => {
    const taken: Server = createServer();
    const port = await new Promise<number>((resolve) => taken.listen(0, '127.0.0.1', () => resolve((taken.address() as { port: number }).port)));
    try {
      const err = await spawnServe(['--port', String(await freePort())], { env: { ...env, METRICS_PORT: String(port) } }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err?.message).toMatch(/exited 1/);
      expect(err?.message).toContain(`Metrics listener on 127.0.0.1:${port}`);
      expect(err?.message).toContain('METRICS_PORT');
    } finally {
      taken.close();
    }
  });
});

