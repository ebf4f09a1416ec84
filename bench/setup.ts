/**
 * What every bench program starts `mds serve` with: one environment and one `mds init`, so the
 * profile and the bench measure the same service.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '../test/helpers/redis-server.js';
import { MDS_BIN } from '../test/helpers/serve-process.js';

export const API_KEY = 'bench-api-key-0123456789';
export const ADMIN = { username: 'admin', password: 'bench-admin-password' };

/**
 * A production-mode environment over `dir` (SQLite file, HOME) and `redisUrl`. Quotas are off (one
 * address at these rates would be refused; the scenarios that measure them turn them on) and so are
 * metrics (every server would otherwise want port 9464; one scenario turns them on).
 */
export function benchEnv(dir: string, redisUrl: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: dir,
    NODE_ENV: 'production',
    SECRET_KEY: 'bench-secret-key-0123456789abcdef0123456789',
    DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
    CACHE_URL: redisUrl,
    API_KEYS: API_KEY,
    DEFAULT_ADMIN_USERNAME: ADMIN.username,
    DEFAULT_ADMIN_PASSWORD: ADMIN.password,
    LOG_LEVEL: 'info',
    CACHE_TTL_SECONDS: '600',
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
    RATE_LIMIT_AUTHENTICATED_PER_MINUTE: '0',
    METRICS_PORT: '0',
  };
}

/** Runs `mds init` in `env`; throws with its stderr when it fails. */
export function initService(env: NodeJS.ProcessEnv): void {
  const init = spawnSync(process.execPath, [MDS_BIN, 'init'], { env, encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`mds init failed: ${init.stderr}`);
}

/** What the baseline answers on one path: the exact bytes and headers of a cached answer of the service. */
export interface BaselineRoute {
  body: Buffer;
  headers: Record<string, string>;
}

/**
 * The bare node:http baseline: on each path, the same bytes and headers as the service's cached
 * answer of that path, nothing else; unknown paths (and query strings) get the first route's answer.
 * `prefix` runs it under e.g. `taskset -c 1`, as the service it is compared with.
 */
export async function startBaseline(routes: Record<string, BaselineRoute>, prefix: string[] = []): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  // The routes come on stdin: a body of a few hundred KB is over what one environment variable may hold.
  const script = `
    const http = require('node:http');
    const chunks = [];
    process.stdin.on('data', (c) => chunks.push(c)).on('end', () => {
      const routes = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const table = new Map(Object.entries(routes).map(([p, r]) => [p, { body: Buffer.from(r.body, 'base64'), headers: r.headers }]));
      const first = table.values().next().value;
      http.createServer((req, res) => { const r = table.get(req.url) || first; res.writeHead(200, r.headers); res.end(r.body); })
        .listen(${port}, '127.0.0.1', () => process.stdout.write('ready\\n'));
    });`;
  const [command, ...rest] = [...prefix, process.execPath, '-e', script];
  const encoded = Object.fromEntries(Object.entries(routes).map(([p, r]) => [p, { body: r.body.toString('base64'), headers: r.headers }]));
  const child = spawn(command!, rest, { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin!.end(JSON.stringify(encoded));
  await new Promise<void>((done) => child.stdout!.once('data', () => done()));
  return { url: `http://127.0.0.1:${port}`, child };
}

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
