/**
 * `npm run bench`: one run measures a bare node:http baseline serving the same bytes as a cached
 * GET /api/indices, then the real service (`mds serve`, one process, real Redis) in each scenario,
 * and reports requests/s, p50/p99 latency, non-2xx counts and the ratio to the baseline. Results go
 * to bench/results/latest.json. Load comes from wrk when it is installed (a C client, so the client
 * is not the bottleneck), else from autocannon. Every address is on loopback.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import autocannon from 'autocannon';
import { freePort, startRedis, type RedisProcess } from '../test/helpers/redis-server.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../test/helpers/serve-process.js';

const ROOT = resolve(import.meta.dirname, '..');
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const API_KEY = 'bench-api-key-0123456789';
const ADMIN = { username: 'admin', password: 'bench-admin-password' };

interface Load {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  connections?: number;
  durationS?: number;
}

interface Measured {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  requests: number;
}

interface Row extends Measured {
  scenario: string;
  ratio: number | null;
  note?: string;
}

const hasWrk = spawnSync('wrk', ['--version']).error === undefined;

function parseWrkLatency(text: string, pct: string): number {
  const m = new RegExp(`^\\s*${pct}%\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm').exec(text);
  if (!m?.[1]) return Number.NaN;
  const v = Number(m[1]);
  return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
}

async function runWrk(load: Load, dir: string): Promise<Measured> {
  const args = ['-t1', `-c${load.connections ?? CONNECTIONS}`, `-d${load.durationS ?? DURATION_S}s`, '--latency'];
  for (const [k, v] of Object.entries(load.headers ?? {})) args.push('-H', `${k}: ${v}`);
  if (load.method === 'POST') {
    const script = join(dir, `post-${Math.random().toString(36).slice(2)}.lua`);
    writeFileSync(script, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(load.body ?? '')}\nwrk.headers["Content-Type"] = "application/json"\n`);
    args.push('-s', script);
  }
  args.push(load.url);
  const out = await new Promise<string>((done, fail) => {
    const child = spawn('wrk', args);
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    child.once('error', fail);
    child.once('exit', () => done(text));
  });
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN);
  const requests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0);
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
  const errors = /Socket errors:.*/.exec(out)?.[0];
  if (errors) process.stderr.write(`  wrk: ${errors}\n`);
  return { rps, p50Ms: parseWrkLatency(out, '50'), p99Ms: parseWrkLatency(out, '99'), non2xx, requests };
}

async function runAutocannon(load: Load): Promise<Measured> {
  const result = await autocannon({
    url: load.url,
    method: load.method ?? 'GET',
    headers: { ...(load.headers ?? {}), ...(load.body ? { 'content-type': 'application/json' } : {}) },
    body: load.body,
    connections: load.connections ?? CONNECTIONS,
    duration: load.durationS ?? DURATION_S,
  });
  return { rps: result.requests.average, p50Ms: result.latency.p50, p99Ms: result.latency.p99, non2xx: result.non2xx, requests: result.requests.total };
}

function measure(load: Load, dir: string): Promise<Measured> {
  return hasWrk ? runWrk(load, dir) : runAutocannon(load);
}

/** Starts `mds serve` on a free port and resolves once it listens. */
async function startServer(env: NodeJS.ProcessEnv, extraArgs: string[] = []): Promise<ServeProcess> {
  return spawnServe(['--port', String(await freePort()), ...extraArgs], { env, stdout: 'ignore' });
}

/** The bare node:http baseline: the same bytes and headers as a cached /api/indices, nothing else. */
async function startBaseline(body: Buffer, headers: Record<string, string>): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const script = `
    const http = require('node:http');
    const body = Buffer.from(process.env.BODY_B64, 'base64');
    const headers = JSON.parse(process.env.HEADERS);
    http.createServer((req, res) => { res.writeHead(200, headers); res.end(body); })
      .listen(${port}, '127.0.0.1', () => process.stdout.write('ready\\n'));`;
  const child = spawn(process.execPath, ['-e', script], {
    env: { ...process.env, BODY_B64: body.toString('base64'), HEADERS: JSON.stringify(headers) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((done) => child.stdout!.once('data', () => done()));
  return { url: `http://127.0.0.1:${port}/api/indices`, child };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

function fmt(n: number, digits = 0): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '-';
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'mds-bench-'));
  const children: ChildProcess[] = [];
  let redis: RedisProcess | undefined;
  try {
    redis = await startRedis();
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: dir,
      NODE_ENV: 'production',
      SECRET_KEY: 'bench-secret-key-0123456789abcdef0123456789',
      DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
      CACHE_URL: redis.url,
      API_KEYS: API_KEY,
      DEFAULT_ADMIN_USERNAME: ADMIN.username,
      DEFAULT_ADMIN_PASSWORD: ADMIN.password,
      LOG_LEVEL: 'info',
      CACHE_TTL_SECONDS: '600',
    };
    const init = spawnSync(process.execPath, [MDS_BIN, 'init'], { env, encoding: 'utf8' });
    if (init.status !== 0) throw new Error(`mds init failed: ${init.stderr}`);

    const redisMode = await startServer(env);
    children.push(redisMode.child);
    const memoryMode = await startServer({ ...env, CACHE_URL: `redis://127.0.0.1:${await freePort()}/0` });
    children.push(memoryMode.child);

    const first = await fetch(`${redisMode.url}/api/indices`);
    const body = Buffer.from(await first.arrayBuffer());
    const etag = first.headers.get('etag') ?? '';
    const baseline = await startBaseline(body, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': String(body.length),
      'X-Cache': 'HIT',
      ETag: etag,
      'Cache-Control': 'public, max-age=60',
    });
    children.push(baseline.child);
    await fetch(`${memoryMode.url}/api/indices`);

    const login = await fetch(`${redisMode.url}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(ADMIN),
    });
    const token = ((await login.json()) as { access_token: string }).access_token;

    const rows: Row[] = [];
    let baselineRps = Number.NaN;
    const scenario = async (name: string, load: Load, note?: string) => {
      await measure({ ...load, durationS: 1 }, dir); // warm-up
      const m = await measure(load, dir);
      if (name === 'baseline node:http') baselineRps = m.rps;
      const row: Row = { scenario: name, ...m, ratio: Number.isFinite(baselineRps) ? m.rps / baselineRps : null, ...(note ? { note } : {}) };
      rows.push(row);
      process.stderr.write(`  ${name}: ${fmt(m.rps)} req/s, p99 ${fmt(m.p99Ms, 2)} ms, non-2xx ${m.non2xx}\n`);
    };

    process.stderr.write(`bench: ${hasWrk ? 'wrk' : 'autocannon'}, ${CONNECTIONS} connections, ${DURATION_S} s per scenario, ${cpus().length} cores\n`);
    await scenario('baseline node:http', { url: baseline.url });
    await scenario('indices cached (redis)', { url: `${redisMode.url}/api/indices` });
    await scenario('indices cached (memory)', { url: `${memoryMode.url}/api/indices` });
    await scenario('indices If-None-Match (304)', { url: `${redisMode.url}/api/indices`, headers: { 'If-None-Match': etag } }, '304s count as non-2xx in wrk');
    await scenario('health', { url: `${redisMode.url}/api/health` });
    await scenario('admin status (bearer)', { url: `${redisMode.url}/api/admin/status`, headers: { Authorization: `Bearer ${token}` } });
    await scenario('admin status (API key)', { url: `${redisMode.url}/api/admin/status`, headers: { 'X-API-Key': API_KEY } });

    // Logins (bcrypt-bound) and cached reads at once: the reads must not starve.
    const [logins, reads] = await Promise.all([
      measure({ url: `${redisMode.url}/api/auth/login`, method: 'POST', body: JSON.stringify(ADMIN), connections: 4 }, dir),
      measure({ url: `${redisMode.url}/api/indices`, connections: CONNECTIONS }, dir),
    ]);
    rows.push({ scenario: 'login (bcrypt cost 12)', ...logins, ratio: logins.rps / baselineRps, note: 'logins/s with 4 connections' });
    rows.push({ scenario: 'indices cached, during logins', ...reads, ratio: reads.rps / baselineRps });
    process.stderr.write(`  login: ${fmt(logins.rps, 1)} logins/s; reads during logins: ${fmt(reads.rps)} req/s, p99 ${fmt(reads.p99Ms, 2)} ms\n`);

    await stop(redisMode.child);
    await stop(memoryMode.child);
    const twoWorkers = await startServer(env, ['--workers', '2']);
    children.push(twoWorkers.child);
    await fetch(`${twoWorkers.url}/api/indices`);
    await scenario('indices cached (redis), 2 workers', { url: `${twoWorkers.url}/api/indices` }, 'the load generator shares the 2 cores');

    const result = {
      at: new Date().toISOString(),
      tool: hasWrk ? 'wrk' : 'autocannon',
      connections: CONNECTIONS,
      durationS: DURATION_S,
      cores: cpus().length,
      node: process.version,
      bodyBytes: body.length,
      rows,
    };
    mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
    writeFileSync(join(ROOT, 'bench', 'results', 'latest.json'), `${JSON.stringify(result, null, 2)}\n`);

    const header = ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'x baseline'];
    const lines = rows.map((r) => [r.scenario, fmt(r.rps, r.rps < 100 ? 1 : 0), fmt(r.p50Ms, 2), fmt(r.p99Ms, 2), String(r.non2xx), r.ratio === null ? '-' : fmt(r.ratio, 2)]);
    const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
    const print = (cells: string[]) => console.log(cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '));
    print(header);
    for (const l of lines) print(l);
    console.log(`\nwritten to bench/results/latest.json (${result.tool}, ${CONNECTIONS} connections, ${DURATION_S} s each)`);
  } finally {
    for (const child of children) await stop(child);
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
