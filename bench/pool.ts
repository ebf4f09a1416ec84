/**
 * The compute pool's bench (DESIGN 24): `/api/health` latency under wrk, alone and while 20 clients
 * send the worst indicators request (10 studies of period 500 over 3 days of 1-minute bars; each a
 * window no request asked before, so every one computes), each client sending its next as soon as
 * the last answered. Target: health's p99 during the load within 2x its p99 alone, and under 50 ms.
 *
 *   npm run bench:pool
 *   BENCH_POOL_CLIENTS=20 BENCH_POOL_SECONDS=5 BENCH_POOL_ROUNDS=5 BENCH_POOL_CONNECTIONS=10 (the defaults)
 *   MDS_BIN=<another build>/bin/run.js benches another build (the one before the pool, to compare)
 *   BENCH_POOL_ENV='WORKER_POOL_NICE=0' adds settings to both servers
 *
 * Two servers one after the other (production mode, real Redis, SQLite, the simulated provider): one
 * whose queue holds every client (WORKER_POOL_QUEUE=20: the pool saturated, nothing refused), and one
 * with the default pool settings, whose refused clients wait their Retry-After. Each runs ROUNDS
 * rounds of health alone then health during the load, alternating, since a shared machine's speed
 * drifts over a run; the medians are compared. With taskset and 2+ cores the server (and so its
 * worker threads) runs on core 1 and wrk and the clients on core 0, as in bench/run.ts; the clients
 * run in a process of their own at the lowest priority (`pool-clients.ts`), so that receiving their
 * answers does not delay wrk's requests on the core they share. Before
 * measuring, one request fills the history store with the bars the windows and their warm-up need,
 * and a few more warm the code up. Prints the figures and writes bench/results/pool.json.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort, startRedis } from '../test/helpers/redis-server.js';
import { spawnServe } from '../test/helpers/serve-process.js';
import { benchEnv, initService } from './setup.js';
import { worst } from './pool-clients.js';

const CLIENTS = Number(process.env.BENCH_POOL_CLIENTS ?? 20);
const SECONDS = Number(process.env.BENCH_POOL_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_POOL_CONNECTIONS ?? 10);
/** More settings for both servers, `NAME=value` separated by spaces (`BENCH_POOL_ENV='WORKER_POOL_NICE=0'`). */
const EXTRA_ENV = Object.fromEntries(
  (process.env.BENCH_POOL_ENV ?? '')
    .split(/\s+/)
    .filter((pair) => pair.includes('='))
    .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
);
/** Rounds of (health alone, health during the load) per server; medians are reported. */
const ROUNDS = Number(process.env.BENCH_POOL_ROUNDS ?? 5);

const pinned = spawnSync('taskset', ['-c', '0', 'true']).status === 0 && cpus().length >= 2;
const SERVER_CPU = pinned ? ['taskset', '-c', '1'] : [];
const CLIENT_CPU = pinned ? ['taskset', '-c', '0'] : [];
const CLOCK_TICKS_PER_S = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;

interface WrkFigures {
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  requests: number;
  non2xx: number;
  /** Requests wrk gave up on after its 2 s timeout (not in the latencies). */
  timeouts: number;
}

function wrkLatency(text: string, pct: string): number {
  const m = new RegExp(`^\\s*${pct}%\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm').exec(text);
  if (!m?.[1]) return Number.NaN;
  const v = Number(m[1]);
  return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
}

/** wrk on `url` for `seconds`, one thread, CONNECTIONS connections. */
async function wrk(url: string, seconds: number): Promise<WrkFigures> {
  const [command, ...args] = [...CLIENT_CPU, 'wrk', '-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', url];
  const out = await new Promise<string>((done, fail) => {
    const child = spawn(command!, args);
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    child.once('error', fail);
    child.once('exit', () => done(text));
  });
  const max = /Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)/.exec(out);
  const maxMs = max ? Number(max[1]) * (max[2] === 'us' ? 0.001 : max[2] === 's' ? 1000 : 1) : Number.NaN;
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN),
    p50Ms: wrkLatency(out, '50'),
    p90Ms: wrkLatency(out, '90'),
    p99Ms: wrkLatency(out, '99'),
    maxMs,
    requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? 0),
    non2xx: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0),
    timeouts: Number(/Socket errors:.*timeout (\d+)/.exec(out)?.[1] ?? 0),
  };
}

/** User + system CPU seconds of process `pid` (every thread), from /proc. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S;
}

/**
 * The next window's shift in minutes, across both servers: they share one Redis, so a window the
 * first asked would be a cached answer for the second.
 */
let shift = 0;

const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

interface Round {
  idle: WrkFigures;
  during: WrkFigures;
}

interface Run {
  label: string;
  env: Record<string, string>;
  rounds: Round[];
  /** Medians over the rounds. */
  idleP99Ms: number;
  duringP99Ms: number;
  idleP50Ms: number;
  duringP50Ms: number;
  idleRps: number;
  duringRps: number;
  p99Ratio: number;
  indicatorAnswers: Record<string, number>;
  computedPerSecond: number;
  /** The same clients without wrk: what the service computes when nothing else asks for the core. */
  computedAlonePerSecond: number;
  serverCpuSecondsPerLoadSecond: number;
  /** Health requests wrk gave up on (2 s) during the load, over the rounds. */
  duringTimeouts: number;
  met: boolean;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * One server with `extra` settings, in ROUNDS rounds of health alone then health during the load
 * (alternating, so the drift of a shared machine falls on both alike); medians over the rounds.
 * `honourRetryAfter`: a refused client waits the Retry-After it was given before asking again.
 */
async function measureServer(label: string, dir: string, redisUrl: string, extra: Record<string, string>, honourRetryAfter: boolean): Promise<Run> {
  const env = { ...benchEnv(dir, redisUrl), MARKET_DATA_PROVIDER: 'simulated', REFRESH_INTERVAL_SECONDS: '0', STREAM_REFRESH_SECONDS: '0', ...EXTRA_ENV, ...extra };
  const server = await spawnServe(['--port', String(await freePort())], { env, stdout: 'ignore', prefix: SERVER_CPU });
  try {
    const base = server.url;
    const pid = server.child.pid!;
    const health = `${base}/api/health`;

    // Fills the store (the windows and their warm-up, about 20 days of bars) on the first run, then warms the code up.
    for (let i = 0; i < 4; i++) {
      const res = await fetch(worst(base, shift++));
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`warm-up request: HTTP ${res.status}`);
    }
    await wrk(health, 2);

    const statuses = new Map<number, number>();
    const rounds: Round[] = [];
    let computed = 0;
    let loadSeconds = 0;
    let cpuS = 0;
    /** The clients (`pool-clients.ts`, at the lowest priority beside wrk), each sending its next request as soon as the last answered, until `stop`. */
    const startLoad = () => {
      const counts = { answered: 0 };
      const [command, ...args] = [...CLIENT_CPU, 'nice', '-n', '19', process.execPath, '--import', 'tsx', resolve(import.meta.dirname, 'pool-clients.ts'), base, String(CLIENTS), String(shift), honourRetryAfter ? '1' : '0'];
      const child = spawn(command!, args, { stdio: ['pipe', 'pipe', 'inherit'] });
      let pending = '';
      child.stdout.on('data', (chunk: Buffer) => {
        pending += chunk.toString();
        const lines = pending.split('\n');
        pending = lines.pop()!;
        for (const line of lines) {
          if (line.startsWith('shift ')) {
            // Where the child stopped: the next load's windows are new ones too.
            shift = Number(line.slice('shift '.length));
            continue;
          }
          const status = Number(line);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          if (status === 200) counts.answered++;
        }
      });
      const done = new Promise<void>((resolveDone, fail) => {
        child.once('error', fail);
        child.once('exit', (code) => (code === 0 ? resolveDone() : fail(new Error(`the load's clients exited with ${code}`))));
      });
      return {
        counts,
        stop: () => {
          child.stdin.end();
          return done;
        },
      };
    };
    for (let round = 0; round < ROUNDS; round++) {
      const idle = await wrk(health, SECONDS);
      const load = startLoad();
      // wrk starts once every client has a request under way.
      await new Promise((r) => setTimeout(r, 1000));
      const answeredBefore = load.counts.answered;
      const cpuBefore = cpuSeconds(pid);
      const during = await wrk(health, SECONDS);
      cpuS += cpuSeconds(pid) - cpuBefore;
      computed += load.counts.answered - answeredBefore;
      loadSeconds += SECONDS;
      await load.stop();
      rounds.push({ idle, during });
    }
    const alone = startLoad();
    await new Promise((r) => setTimeout(r, 1000));
    const aloneBefore = alone.counts.answered;
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const computedAlonePerSecond = (alone.counts.answered - aloneBefore) / SECONDS;
    await alone.stop();
    const idleP99Ms = median(rounds.map((r) => r.idle.p99Ms));
    const duringP99Ms = median(rounds.map((r) => r.during.p99Ms));
    return {
      label,
      env: extra,
      rounds,
      idleP99Ms,
      duringP99Ms,
      idleP50Ms: median(rounds.map((r) => r.idle.p50Ms)),
      duringP50Ms: median(rounds.map((r) => r.during.p50Ms)),
      idleRps: median(rounds.map((r) => r.idle.rps)),
      duringRps: median(rounds.map((r) => r.during.rps)),
      p99Ratio: duringP99Ms / idleP99Ms,
      indicatorAnswers: Object.fromEntries(statuses),
      computedPerSecond: computed / loadSeconds,
      computedAlonePerSecond,
      serverCpuSecondsPerLoadSecond: cpuS / loadSeconds,
      duringTimeouts: rounds.reduce((sum, r) => sum + r.during.timeouts, 0),
      // A round in which health got no answer, or lost some to wrk's timeout, fails whatever the latencies of the rest.
      met: duringP99Ms <= 2 * idleP99Ms && duringP99Ms < 50 && rounds.every((r) => r.during.requests > 0 && r.during.timeouts === 0),
    };
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  if (spawnSync('wrk', ['--version']).error !== undefined) throw new Error('bench:pool needs wrk (apt-get install wrk)');
  const dir = mkdtempSync(join(tmpdir(), 'mds-bench-pool-'));
  const redis = await startRedis();
  try {
    initService({ ...benchEnv(dir, redis.url) });
    const runs = [
      // Every client's request admitted: the pool saturated for the whole of each loaded phase.
      await measureServer(`the queue holds the ${CLIENTS} clients (WORKER_POOL_QUEUE=${CLIENTS})`, dir, redis.url, { WORKER_POOL_QUEUE: String(CLIENTS) }, false),
      // The default queue (4 per thread): the requests past it are refused (503) before the store is
      // read, and their clients ask again after the Retry-After they were given.
      await measureServer('the default queue; a refused client waits its Retry-After', dir, redis.url, {}, true),
    ];
    const result = {
      at: new Date().toISOString(),
      pinned,
      cores: cpus().length,
      node: process.version,
      build: process.env.MDS_BIN ?? 'this checkout',
      extraEnv: EXTRA_ENV,
      clients: CLIENTS,
      seconds: SECONDS,
      wrkConnections: CONNECTIONS,
      rounds: ROUNDS,
      target: 'during p99 <= 2 x idle p99 and < 50 ms',
      runs,
    };
    mkdirSync(resolve(import.meta.dirname, 'results'), { recursive: true });
    const output = process.env.BENCH_OUTPUT ?? resolve(import.meta.dirname, 'results', 'pool.json');
    writeFileSync(output, `${JSON.stringify(result, null, 2)}\n`);

    const f = (n: number) => fmt(n, 2).padStart(7);
    console.log(`GET /api/health under wrk (${CONNECTIONS} connections; ${ROUNDS} rounds of ${SECONDS} s alone, then ${SECONDS} s during the load; ${pinned ? 'server and its worker threads on core 1, wrk and clients on core 0' : 'not pinned'}; ${cpus().length} cores, node ${process.version}; build: ${result.build}${Object.keys(EXTRA_ENV).length > 0 ? `; ${Object.entries(EXTRA_ENV).map(([k, v]) => `${k}=${v}`).join(' ')}` : ''})`);
    console.log(`the load: ${CLIENTS} clients each sending the worst indicators request (10 x adx:491..500 over 3 days of 1m bars, each window new) as soon as the last answered`);
    for (const run of runs) {
      console.log(`${run.label}:`);
      for (const [i, r] of run.rounds.entries()) {
        const lost = r.during.timeouts > 0 ? `, ${r.during.timeouts} timed out (2 s)` : '';
        const during = r.during.requests === 0 ? `during: no answer in ${SECONDS} s${lost}` : `during p99 ${f(r.during.p99Ms)} ms (max ${f(r.during.maxMs)}, ${fmt(r.during.rps, 0)} req/s${lost})`;
        console.log(`  round ${i + 1}: idle p99 ${f(r.idle.p99Ms)} ms (max ${f(r.idle.maxMs)}), ${during}`);
      }
      console.log(`  median  : idle p50 ${f(run.idleP50Ms)} ms p99 ${f(run.idleP99Ms)} ms ${fmt(run.idleRps, 0)} req/s; during p50 ${f(run.duringP50Ms)} ms p99 ${f(run.duringP99Ms)} ms ${fmt(run.duringRps, 0)} req/s`);
      console.log(
        `  indicator answers ${Object.entries(run.indicatorAnswers).map(([s, n]) => `${n} x ${s}`).join(', ')}; computed ${fmt(run.computedPerSecond, 2)}/s beside wrk (server CPU ${fmt(run.serverCpuSecondsPerLoadSecond, 2)} s per s), ${fmt(run.computedAlonePerSecond, 2)}/s without it`,
      );
      console.log(`  health p99 during / idle: ${fmt(run.p99Ratio, 2)} (target <= 2 and p99 < 50 ms: ${run.met ? 'met' : 'not met'})`);
    }
    console.log(`written to ${output}`);
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
