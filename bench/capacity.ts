/**
 * The figures the capacity model of docs/operations.md rests on, per path: requests per second on one
 * core (the server pinned to core 1, the client on core 0, when taskset exists), Redis commands and
 * database transactions per request (Redis INFO and PostgreSQL's pg_stat_database, read before and
 * after each path), and what a cached read costs against a miss. One `mds serve` with a real Redis and
 * PostgreSQL (database `mds_bench`, created when missing), the simulated provider, everything on
 * loopback. Prints a table and writes bench/results/capacity.json.
 *
 *   npm run bench:capacity            (CAPACITY_SECONDS=3 per path by default)
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import pg from 'pg';
import { startRedis } from '../test/helpers/redis-server.js';
import { spawnServe } from '../test/helpers/serve-process.js';
import { ADMIN, API_KEY, benchEnv, initService } from './setup.js';

const SECONDS = Number(process.env.CAPACITY_SECONDS ?? 3);
const PG_ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const DATABASE = 'mds_bench';
const pinned = spawnSync('taskset', ['--version']).error === undefined && cpus().length >= 2;
const SERVER_CPU = pinned ? ['taskset', '-c', '1'] : [];

interface PathFigures {
  path: string;
  requestsPerSecond: number;
  redisCommandsPerRequest: number;
  databaseTransactionsPerRequest: number;
  p99Ms: number;
  non2xx: number;
  requests: number;
}

async function postgresUrl(): Promise<string> {
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await admin.end();
  }
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${DATABASE}`;
  // A fresh schema each run: the tables of an earlier run would make the first reads hits.
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  await client.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public');
  await client.end();
  return url.toString();
}

async function databaseTransactions(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // The statistics collector publishes what a backend did when its transaction ends; this snapshot
    // is taken fresh for the query below.
    await client.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ n: string }>('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1', [DATABASE]);
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

async function redisCommands(redis: Redis): Promise<number> {
  const info = await redis.info('stats');
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'mds-capacity-'));
  const redis = await startRedis();
  const counter = new Redis(redis.port, '127.0.0.1', { lazyConnect: true });
  await counter.connect();
  const databaseUrl = await postgresUrl();
  const env = { ...benchEnv(dir, redis.url), DATABASE_URL: databaseUrl, REFRESH_INTERVAL_SECONDS: '0', BCRYPT_ROUNDS: '12', STREAM_MAX_CLIENTS: '100000' };
  initService(env);
  const serve = await spawnServe(['--port', '0'], { env, stdout: 'ignore', prefix: SERVER_CPU });
  const base = serve.url;
  const results: PathFigures[] = [];

  const backfill = spawnSync(process.execPath, [resolve(import.meta.dirname, '../bin/run.js'), 'history', 'backfill', 'AAPL', '--since', '2015-01-01'], { env, encoding: 'utf8' });
  if (backfill.status !== 0) throw new Error(`backfill failed: ${backfill.stderr}`);
  const token = ((await (await fetch(`${base}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) })).json()) as { access_token: string }).access_token;

  const measure = async (path: string, options: { requests: autocannon.Request[]; connections: number }): Promise<void> => {
    const redisBefore = await redisCommands(counter);
    const dbBefore = await databaseTransactions(databaseUrl);
    const result = await autocannon({ url: base, connections: options.connections, duration: SECONDS, requests: options.requests });
    const requests = result.requests.total;
    const redisAfter = await redisCommands(counter);
    // Let the last transactions reach the statistics before they are read.
    await new Promise((r) => setTimeout(r, 700));
    const dbAfter = await databaseTransactions(databaseUrl);
    const round = (n: number, d = 2) => Math.round(n * 10 ** d) / 10 ** d;
    results.push({
      path,
      requestsPerSecond: round(requests / SECONDS, 0),
      // Less the two INFO calls of this measurement itself.
      redisCommandsPerRequest: round((redisAfter - redisBefore - 1) / Math.max(1, requests)),
      databaseTransactionsPerRequest: round((dbAfter - dbBefore - 1) / Math.max(1, requests)),
      p99Ms: result.latency.p99,
      non2xx: result.non2xx,
      requests,
    });
  };

  // Warm the cached paths once.
  await fetch(`${base}/api/quotes/AAPL`);
  await measure('cached read (GET /api/quotes/AAPL, anonymous)', { connections: 50, requests: [{ method: 'GET', path: '/api/quotes/AAPL' }] });
  await measure('cached read with an API key (GET /api/quotes/AAPL)', { connections: 50, requests: [{ method: 'GET', path: '/api/quotes/AAPL', headers: { 'x-api-key': API_KEY } }] });
  // Every request a window no earlier one asked: a representation-cache miss answered from the store.
  let day = 0;
  const storeWindow = (): string => {
    day += 1;
    const start = new Date(Date.UTC(2016, 0, 4) + (day % 2000) * 86_400_000).toISOString().slice(0, 10);
    const end = new Date(Date.UTC(2016, 0, 4) + ((day % 2000) + 365 + Math.floor(day / 2000)) * 86_400_000).toISOString().slice(0, 10);
    return `/api/history/AAPL?interval=1d&start=${start}&end=${end}`;
  };
  await measure('history from the store (1 year of AAPL daily, cache missed)', { connections: 10, requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: storeWindow() }) }] });
  // A miss that reaches the upstream: a symbol whose quote is not cached (the cache is flushed between rounds).
  const symbols = ['MSFT', 'NVDA', 'AMZN', 'GOOGL', 'META', 'TSLA', 'JPM', 'V', 'XOM', 'KO', 'PEP', 'WMT', 'DIS', 'INTC', 'CSCO', 'ORCL', 'IBM', 'ADBE', 'CRM', 'NFLX'];
  let next = 0;
  await measure('miss (GET /api/quotes/{symbol}, upstream asked, cache flushed every 20)', {
    connections: 1,
    requests: [
      {
        method: 'GET',
        setupRequest: (req) => {
          next += 1;
          return { ...req, path: `/api/quotes/${symbols[next % symbols.length]}` };
        },
        onResponse: () => {
          if (next % symbols.length === symbols.length - 1) void fetch(`${base}/api/admin/cache`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
        },
      },
    ],
  });
  await measure('login (bcrypt cost 12)', { connections: 2, requests: [{ method: 'POST', path: '/api/auth/login', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) }] });
  // A stream never ends: each connection reads its first event and closes; connections per second.
  {
    const redisBefore = await redisCommands(counter);
    const dbBefore = await databaseTransactions(databaseUrl);
    const latencies: number[] = [];
    let failed = 0;
    const until = Date.now() + SECONDS * 1000;
    const connectOnce = async () => {
      const started = performance.now();
      const controller = new AbortController();
      const answer = await fetch(`${base}/api/stream?symbols=AAPL`, { signal: controller.signal, headers: { 'x-api-key': API_KEY } });
      if (answer.status !== 200) failed += 1;
      else await answer.body!.getReader().read();
      latencies.push(performance.now() - started);
      controller.abort();
    };
    await Promise.all(Array.from({ length: 10 }, async () => {
      while (Date.now() < until) await connectOnce().catch(() => (failed += 1));
    }));
    const redisAfter = await redisCommands(counter);
    await new Promise((r) => setTimeout(r, 700));
    const dbAfter = await databaseTransactions(databaseUrl);
    latencies.sort((a, b) => a - b);
    const n = latencies.length;
    results.push({
      path: 'stream connect (GET /api/stream?symbols=AAPL, first event, then closed)',
      requestsPerSecond: Math.round(n / SECONDS),
      redisCommandsPerRequest: Math.round(((redisAfter - redisBefore - 1) / Math.max(1, n)) * 100) / 100,
      databaseTransactionsPerRequest: Math.round(((dbAfter - dbBefore - 1) / Math.max(1, n)) * 100) / 100,
      p99Ms: Math.round(latencies[Math.floor(n * 0.99)] ?? 0),
      non2xx: failed,
      requests: n,
    });
  }

  await serve.stop('SIGTERM');
  counter.disconnect();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });

  process.stdout.write(`capacity: ${SECONDS} s per path, ${cpus().length} cores, ${pinned ? 'server on core 1' : 'not pinned'}, Redis and PostgreSQL on this machine\n`);
  for (const r of results) {
    process.stdout.write(
      `  ${r.path.padEnd(76)} ${String(r.requestsPerSecond).padStart(7)} req/s  p99 ${String(r.p99Ms).padStart(5)} ms  Redis ${String(r.redisCommandsPerRequest).padStart(5)}/req  DB ${String(r.databaseTransactionsPerRequest).padStart(5)}/req  non-2xx ${r.non2xx}\n`,
    );
  }
  const out = resolve(import.meta.dirname, 'results');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'capacity.json'), JSON.stringify({ at: new Date().toISOString(), seconds: SECONDS, pinned, results }, null, 2));
}

await main();
