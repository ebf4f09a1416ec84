import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { StoredCandle } from '../src/domain/ports.js';
import { openUserStore } from '../src/infra/db/typeorm-user-store.js';
import { freePort } from '../test/helpers/redis-server.js';
import { spawnServe } from '../test/helpers/serve-process.js';
import { benchEnv, initService } from './setup.js';
const DAY_MS = 86_400_000, N = 2520, READS = Number(process.env.READS ?? 2000), START = Date.UTC(2010, 0, 4);
const SOURCE = { provider: 'bench', fetchedAtMs: Date.now() };
function candles(count: number, stepMs: number, seed = 1): StoredCandle[] {
  const out: StoredCandle[] = new Array(count); let price = 100 + seed;
  for (let i = 0; i < count; i++) { const open = Math.round(price * 100) / 100; price = Math.max(1, price + Math.sin(i * 0.37 + seed) * 1.3); const close = Math.round(price * 100) / 100;
    out[i] = { timeMs: START + i * stepMs, open, high: Math.max(open, close) + 0.5, low: Math.min(open, close) - 0.5, close, adjClose: close, volume: 1_000_000 + i }; }
  return out;
}
const pct = (s: number[], p: number) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
const dir = mkdtempSync(join(tmpdir(), 'mds-h-'));
const env = { STRBODY: process.env.STRBODY ?? '', FLOOR: process.env.FLOOR ?? '', XFLAGS: process.env.XFLAGS ?? '', ...benchEnv(dir, process.env.REDIS ?? 'redis://127.0.0.1:1/0'), DATABASE_URL: `sqlite:${join(dir, 'http.sqlite')}`, LOG_LEVEL: process.env.LL ?? 'warn', ...(process.env.MAXE ? { CACHE_MEMORY_MAX_ENTRIES: process.env.MAXE } : {}) };
initService(env);
const db = await openUserStore(env.DATABASE_URL, { runMigrations: true });
const span = { startMs: START, endMs: START + N * DAY_MS };
await db.candles.putCandles('AAPL', '1d', candles(N, DAY_MS), SOURCE);
await db.candles.putInstrument('AAPL', { currency: 'USD', timezone: 'America/New_York' }, SOURCE);
await db.candles.markCovered('AAPL', '1d', span, SOURCE);
await db.close();
const server = await spawnServe(['--port', String(await freePort())], { env, ...(process.env.LL ? {} : { stdout: 'ignore' as const }), cwd: dir, prefix: process.env.PROF_ARGS ? ['/tmp/wrap.sh'] : process.env.PIN ? ['taskset', '-c', '1'] : [] });
if (process.env.WRK) {
  const { spawnSync } = await import('node:child_process');
  const out = spawnSync('taskset', ['-c', '0', 'wrk', '-t1', '-c1', '-d10s', '--latency', '-s', process.env.LUA ?? '/tmp/hist.lua', server.url], { encoding: 'utf8' });
  console.log(out.stdout, out.stderr);
  if (process.env.LL) { const rt = server.stdout().split('\n').filter((l) => l.includes('/api/history')).map((l) => JSON.parse(l)); const bad = rt.filter((l) => l.res.statusCode !== 200).length; const t = rt.map((l) => l.responseTime as number).sort((a, b) => a - b); console.log('server', { n: t.length, bad, p50: pct(t, 50), p90: pct(t, 90), p99: pct(t, 99) }); }
  console.log('rss MB', Number((await import('node:fs')).readFileSync(`/proc/${server.child.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)![1]) / 1024);
  await server.stop();
  const { readdirSync, readFileSync } = await import('node:fs');
  process.exit(0);
}
const times: number[] = [];
import { Agent, get as httpGet } from 'node:http';
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
async function get(url: string): Promise<{ res: { status: number; headers: Map<string, string> }; bytes: Buffer }> {
  if (!process.env.RAW) { const r = await fetch(url); const b = Buffer.from(await r.arrayBuffer()); return { res: { status: r.status, headers: new Map([['x-cache', r.headers.get('x-cache') ?? '']]) }, bytes: b }; }
  return new Promise((done, fail) => httpGet(url, { agent }, (res) => { const chunks: Buffer[] = []; res.on('data', (c: Buffer) => chunks.push(c)); res.on('end', () => done({ res: { status: res.statusCode!, headers: new Map([['x-cache', String(res.headers['x-cache'])]]) }, bytes: Buffer.concat(chunks) })); res.on('error', fail); }).on('error', fail));
}
const end = new Date(span.endMs).toISOString();
const PACE = Number(process.env.PACE ?? 0);
const t0 = performance.now();
for (let i = 0; i < READS; i++) {
  const start = new Date(START - 1000 * (process.env.HIT ? 1 : i + 1)).toISOString();
  if (PACE > 0) { const at = t0 + i * PACE; const wait = at - performance.now(); if (wait > 0) await new Promise((r) => setTimeout(r, wait)); }
  const t = PACE > 0 ? Math.min(performance.now(), t0 + i * PACE) : performance.now();
  const { res, bytes } = await get(`${server.url}/api/history/AAPL?interval=1d&start=${start}&end=${end}`);
  times.push(performance.now() - t);
  if (res.status !== 200) throw new Error(String(res.status));
  if (i === 0) console.log('bytes', bytes.byteLength, res.headers.get('x-cache'));
}
times.sort((a, b) => a - b);
console.log({ p50: pct(times, 50), p90: pct(times, 90), p99: pct(times, 99), max: times.at(-1) });
if (process.env.LL) { const rt = server.stdout().split('\n').filter((l) => l.includes('/api/history')).map((l) => JSON.parse(l).responseTime as number).sort((a, b) => a - b); console.log('server', { n: rt.length, p50: pct(rt, 50), p90: pct(rt, 90), p99: pct(rt, 99) }); }
await server.stop();
console.log('dir', dir);
