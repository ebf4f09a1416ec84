/**
 * `npm run bench`: one run measures a bare node:http baseline serving the same bytes as a cached
 * GET /api/indices, then the real service (`mds serve`, one process, real Redis) in each scenario,
 * and reports requests/s, p50/p99 latency, non-2xx counts and the ratio to the baseline (of req/s,
 * and of the server's own CPU time per request where its process is known). Results go
 * to bench/results/latest.json. Load comes from wrk when it is installed (a C client, so the client
 * is not the bottleneck), else from autocannon. Every address is on loopback.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { createParser } from 'eventsource-parser';
import { Redis } from 'ioredis';
import { freePort, startRedis, type RedisProcess } from '../test/helpers/redis-server.js';
import { ADMIN, API_KEY, benchEnv, initService, median, startBaseline, type BaselineRoute } from './setup.js';
import { spawnServe, type ServeProcess } from '../test/helpers/serve-process.js';
import { quoteChangeMessage, quoteEventsChannel } from '../src/services/stream/fleet.js';
import { encodeEnvelope } from '../src/infra/cache/cache-bus.js';

const ROOT = resolve(import.meta.dirname, '..');
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 5);
/** Rounds per scenario, each paired with its own baseline run; medians are reported. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
/** Seconds of load on a scenario before its first round. */
const WARM_UP_S = Number(process.env.BENCH_WARM_UP_S ?? 3);
/** A per-minute quota the bench cannot reach: every request is counted, none is refused. */
const UNREACHABLE_QUOTA = '10000000';
/** `;`-separated substrings; when set, only scenarios whose name contains one of them run (`BENCH_SCENARIOS='quote;health'`). */
const ONLY = (process.env.BENCH_SCENARIOS ?? '').split(';').map((s) => s.trim()).filter((s) => s.length > 0);
const selected = (name: string) => ONLY.length === 0 || ONLY.some((s) => name.includes(s));
/** Live-quote subscribers held open on one process in the stream scenarios. */
const SUBSCRIBERS = Number(process.env.BENCH_SUBSCRIBERS ?? 2000);
/** Quote changes announced in the fan-out scenario. */
const STREAM_CHANGES = Number(process.env.BENCH_STREAM_CHANGES ?? 20);

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
  /** The answering server's own CPU time per request (µs, from /proc), when its process is known (`serverPids`). */
  cpuUsPerRequest?: number;
}

/**
 * The process answering each origin measured (`http://127.0.0.1:port`), for its CPU time per request:
 * with the server pinned to one core and saturated, req/s is about the inverse of it, but the CPU time
 * does not move with how the load generator and the server happen to share the machine.
 */
const serverPids = new Map<string, number>();

type Baseline = 'node:http' | 'express' | 'REST';

interface Row extends Measured {
  scenario: string;
  /** What `ratio` divides by: the bare node:http server, the bare Express 5 route, or the same server's REST call. */
  baseline?: Baseline;
  /** Median over the rounds of (scenario req/s) / (mean baseline req/s of the runs just before and just after it). */
  ratio: number | null;
  /** The same for CPU time per request, inverted so that it reads like `ratio`: (baseline µs per request) / (scenario µs per request). */
  cpuRatio?: number;
  /** The baseline's median req/s in this scenario's rounds. */
  baselineRps?: number;
  /** The median over the rounds of the baseline's p99 around each (the worse of its two runs): what the machine itself allowed then. */
  baselineP99Ms?: number;
  rounds?: Array<{ rps: number; p99Ms: number; baselineRps: number; baselineP99Ms: number }>;
  note?: string;
}

const hasWrk = spawnSync('wrk', ['--version']).error === undefined;
const CLOCK_TICKS_PER_S = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;
/**
 * With taskset and 2+ cores, each server runs on core 1 and wrk on core 0, as "one core" figures
 * mean; without it everything shares whatever cores there are (said in the output).
 */
const pinned = spawnSync('taskset', ['-c', '0', 'true']).status === 0 && cpus().length >= 2;
const SERVER_CPU = pinned ? ['taskset', '-c', '1'] : [];
const CLIENT_CPU = pinned ? ['taskset', '-c', '0'] : [];

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
    const [command, ...rest] = [...CLIENT_CPU, 'wrk', ...args];
    const child = spawn(command!, rest);
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

async function measure(load: Load, dir: string): Promise<Measured> {
  const pid = serverPids.get(new URL(load.url).origin);
  const before = pid === undefined ? Number.NaN : cpuSeconds(pid);
  const m = await (hasWrk ? runWrk(load, dir) : runAutocannon(load));
  if (pid === undefined || m.requests === 0) return m;
  const cpuUsPerRequest = ((cpuSeconds(pid) - before) * 1e6) / m.requests;
  return Number.isFinite(cpuUsPerRequest) ? { ...m, cpuUsPerRequest } : m;
}

/** Starts `mds serve` on a free port and resolves once it listens. */
async function startServer(env: NodeJS.ProcessEnv, extraArgs: string[] = [], prefix: string[] = SERVER_CPU): Promise<ServeProcess> {
  const server = await spawnServe(['--port', String(await freePort()), ...extraArgs], { env, stdout: 'ignore', prefix });
  // With --workers the answering processes are the workers, whose CPU time the primary's /proc line does not show.
  if (!extraArgs.includes('--workers') && server.child.pid !== undefined) serverPids.set(new URL(server.url).origin, server.child.pid);
  return server;
}

/** The service's cached answer of `path` (read twice, so the second is a hit), as a baseline route. */
async function cachedAnswer(url: string, path: string): Promise<BaselineRoute> {
  await fetch(`${url}${path}`).then((r) => r.arrayBuffer());
  const res = await fetch(`${url}${path}`);
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status} ${body.toString('utf8').slice(0, 200)}`);
  return {
    body,
    headers: {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': String(body.length),
      'X-Cache': 'HIT',
      ETag: res.headers.get('etag') ?? '',
      'Cache-Control': res.headers.get('cache-control') ?? 'public, max-age=60',
    },
  };
}

/**
 * The bare Express 5 baseline: one route per measured response, each sending a body of the same
 * bytes and type, with nothing in front of it. ETag generation is off, as it is in mds, so the
 * baseline does not pay for hashing that mds does not do on these routes.
 */
async function startExpressBaseline(bodies: Record<string, Buffer>): Promise<{ url: (name: string) => string; child: ChildProcess }> {
  const port = await freePort();
  const script = `
    const express = require('express');
    const bodies = JSON.parse(process.env.BODIES);
    const app = express();
    app.set('etag', false);
    for (const [name, b64] of Object.entries(bodies)) {
      const body = Buffer.from(b64, 'base64');
      app.get('/' + name, (req, res) => { res.type('application/json').send(body); });
    }
    app.listen(${port}, '127.0.0.1', () => process.stdout.write('ready\\n'));`;
  const [command, ...rest] = [...SERVER_CPU, process.execPath, '-e', script];
  const child = spawn(command!, rest, {
    cwd: ROOT,
    env: { ...process.env, BODIES: JSON.stringify(Object.fromEntries(Object.entries(bodies).map(([k, v]) => [k, v.toString('base64')]))) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((done) => child.stdout!.once('data', () => done()));
  return { url: (name) => `http://127.0.0.1:${port}/${name}`, child };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  // A server stopped (SIGSTOP) between its scenarios must run again to hear SIGTERM.
  child.kill('SIGCONT');
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/** CPU time (user + system) process `pid` has used so far, in seconds; NaN where /proc is missing. */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th of the line.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S;
  } catch {
    return Number.NaN;
  }
}

function fmt(n: number, digits = 0): string {
  return Number.isFinite(n) ? n.toFixed(digits) : '-';
}

/** Resident set size of a process in MiB, from /proc (NaN where there is none). */
function rssMiB(pid: number | undefined): number {
  try {
    const kb = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
    return kb / 1024;
  } catch {
    return Number.NaN;
  }
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

interface Subscribers {
  /** Resolves when every subscriber has received a quote at `price`; to each one's arrival time (performance.now()). */
  arrivals(price: number): Promise<number[]>;
  close(): void;
}

/**
 * Opens `count` event streams (one socket each) and waits for each one's first event. Every quote
 * event's arrival is noted by price, so a change can be timed to its delivery to all of them.
 */
async function subscribe(url: string, count: number): Promise<Subscribers> {
  const waiting = new Map<number, { times: number[]; done: (times: number[]) => void }>();
  const requests: Array<ReturnType<typeof request>> = [];
  const opened: Array<Promise<void>> = [];
  for (let i = 0; i < count; i += 1) {
    opened.push(
      new Promise<void>((ready, fail) => {
        const req = request(url, { agent: false, headers: { accept: 'text/event-stream' } }, (res) => {
          if (res.statusCode !== 200) fail(new Error(`stream answered ${res.statusCode}`));
          let first = true;
          const parser = createParser({
            onEvent(event) {
              if (first) {
                first = false;
                ready();
                return;
              }
              const at = performance.now();
              const price = (JSON.parse(event.data) as { price: number }).price;
              const w = waiting.get(price);
              if (w === undefined) return;
              w.times.push(at);
              if (w.times.length === count) w.done(w.times);
            },
          });
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => parser.feed(chunk));
        });
        req.on('error', (err) => fail(err));
        req.end();
        requests.push(req);
      }),
    );
    // Connect in waves, so the listen backlog never overflows.
    if (i % 200 === 199) await Promise.all(opened.slice(-200));
  }
  await Promise.all(opened);
  return {
    arrivals: (price) => new Promise((done) => waiting.set(price, { times: [], done })),
    close: () => {
      for (const req of requests) req.destroy();
    },
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'mds-bench-'));
  const children: ChildProcess[] = [];
  let redis: RedisProcess | undefined;
  try {
    redis = await startRedis();
    const env = benchEnv(dir, redis.url);
    initService(env);

    const redisMode = await startServer(env);
    children.push(redisMode.child);
    const memoryMode = await startServer({ ...env, CACHE_URL: `redis://127.0.0.1:${await freePort()}/0` });
    children.push(memoryMode.child);
    const limited = await startServer({ ...env, RATE_LIMIT_ANONYMOUS_PER_MINUTE: UNREACHABLE_QUOTA, RATE_LIMIT_AUTHENTICATED_PER_MINUTE: UNREACHABLE_QUOTA });
    children.push(limited.child);
    const refusing = await startServer({ ...env, RATE_LIMIT_ANONYMOUS_PER_MINUTE: '1' });
    children.push(refusing.child);
    const metricsPort = await freePort();
    // The metrics pair runs no scheduler: whichever instance holds the fleet's refresh lock does the
    // refresh work, and an A/A run of two servers without metrics measured the lock holder up to 18 %
    // slower. Without it in either, the pair differs by metrics alone.
    const twinEnv = { ...env, REFRESH_INTERVAL_SECONDS: '0' };
    const withMetrics = await startServer({ ...twinEnv, METRICS_PORT: String(metricsPort) });
    children.push(withMetrics.child);
    // Its twin without metrics, started and used alike, so the comparison sees nothing but metrics
    // (not a server that has been under every other scenario's load against a fresh one).
    const withoutMetrics = await startServer(twinEnv);
    children.push(withoutMetrics.child);

    /**
     * Only the servers a scenario measures may run: the others are stopped (SIGSTOP) meanwhile, so
     * their timers (scheduler, stream refresh, Redis reconnects) never take the measured core.
     */
    const mdsServers = [redisMode, memoryMode, limited, refusing, withMetrics, withoutMetrics];
    const focus = (...measured: ServeProcess[]) => {
      for (const server of mdsServers) server.child.kill(measured.includes(server) ? 'SIGCONT' : 'SIGSTOP');
    };

    /** The cached reads measured against a baseline that serves the same bytes on the same path. */
    const CACHED_PATHS = {
      indices: '/api/indices',
      quotes: '/api/quotes?symbols=AAPL,MSFT',
      quote: '/api/quotes/AAPL',
      history: '/api/history/AAPL?interval=1d&range=1y',
      search: '/api/search?q=apple',
    } as const;
    const routes: Record<string, BaselineRoute> = {};
    for (const path of Object.values(CACHED_PATHS)) routes[path] = await cachedAnswer(redisMode.url, path);
    const etag = routes[CACHED_PATHS.indices]!.headers.ETag ?? '';
    const body = routes[CACHED_PATHS.indices]!.body;
    const baseline = await startBaseline(routes, SERVER_CPU);
    serverPids.set(new URL(baseline.url).origin, baseline.child.pid!);
    children.push(baseline.child);
    await fetch(`${memoryMode.url}/api/indices`);
    await fetch(`${limited.url}/api/indices`);
    await fetch(`${withMetrics.url}/api/indices`);
    await fetch(`${withoutMetrics.url}/api/indices`);
    focus(redisMode);

    const login = await fetch(`${redisMode.url}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(ADMIN),
    });
    const token = ((await login.json()) as { access_token: string }).access_token;

    // The general request path is compared with what Express itself costs for a body of the same size.
    const general = {
      health: { url: `${redisMode.url}/api/health`, headers: {} as Record<string, string> },
      bearer: { url: `${redisMode.url}/api/admin/status`, headers: { Authorization: `Bearer ${token}` } },
      apikey: { url: `${redisMode.url}/api/admin/status`, headers: { 'X-API-Key': API_KEY } },
    };
    const bodies: Record<string, Buffer> = {};
    for (const [name, load] of Object.entries(general)) {
      const res = await fetch(load.url, { headers: load.headers });
      if (res.status !== 200) throw new Error(`${name}: ${load.url} answered ${res.status}`);
      bodies[name] = Buffer.from(await res.arrayBuffer());
    }
    const expressBaseline = await startExpressBaseline(bodies);
    serverPids.set(new URL(expressBaseline.url('health')).origin, expressBaseline.child.pid!);
    children.push(expressBaseline.child);

    const rows: Row[] = [];
    const baselineLoad: Load = { url: `${baseline.url}${CACHED_PATHS.indices}` };
    await measure({ ...baselineLoad, durationS: 1 }, dir); // warm-up
    /**
     * Metrics on against metrics off: two servers started alike but for METRICS_PORT and used only
     * here, measured back to back in every round (alternating which goes first, so a drift of the
     * machine's speed favours neither), while a scraper polls the metrics listener every second as Prometheus would. Reports
     * the median over the rounds of the req/s ratio and of the CPU time per request ratio (the server's
     * own CPU time from /proc, which moves less than req/s when other work shares the cores).
     */
    const compareMetrics = async (): Promise<{ rpsRatio: number; cpuPerRequestRatio: number }> => {
      const off: Load = { url: `${withoutMetrics.url}/api/indices` };
      const on: Load = { url: `${withMetrics.url}/api/indices` };
      // Both servers are known by their origin (`serverPids`): `measure` reads their CPU time per request.
      const measureCpu = async (load: Load) => {
        const m = await measure(load, dir);
        return { ...m, cpuUsPerRequest: m.cpuUsPerRequest ?? Number.NaN };
      };
      // Warmed alike: both reach the same optimised code before anything is measured.
      for (const load of [off, on, off, on]) await measure({ ...load, durationS: 1 }, dir);
      const scraper = setInterval(() => void fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.arrayBuffer(), () => undefined), 1000);
      const rounds: Array<{ off: Measured & { cpuUsPerRequest: number }; on: Measured & { cpuUsPerRequest: number } }> = [];
      try {
        // A difference of a few percent needs more pairs than a scenario's rounds to stand out of the noise.
        for (let r = 0; r < Math.max(ROUNDS, 6); r += 1) {
          if (r % 2 === 0) {
            const a = await measureCpu(off);
            rounds.push({ off: a, on: await measureCpu(on) });
          } else {
            const b = await measureCpu(on);
            rounds.push({ off: await measureCpu(off), on: b });
          }
        }
      } finally {
        clearInterval(scraper);
      }
      const rpsRatio = median(rounds.map((r) => r.on.rps / r.off.rps));
      const cpuPerRequestRatio = median(rounds.map((r) => r.on.cpuUsPerRequest / r.off.cpuUsPerRequest));
      const cpu = (side: 'on' | 'off') => fmt(median(rounds.map((r) => r[side].cpuUsPerRequest)), 1);
      rows.push({
        scenario: 'indices cached (redis), metrics on',
        rps: median(rounds.map((r) => r.on.rps)),
        p50Ms: median(rounds.map((r) => r.on.p50Ms)),
        p99Ms: median(rounds.map((r) => r.on.p99Ms)),
        non2xx: rounds.reduce((sum, r) => sum + r.on.non2xx, 0),
        requests: rounds.reduce((sum, r) => sum + r.on.requests, 0),
        ratio: null,
        note: `x metrics off: ${fmt(rpsRatio, 3)} req/s, ${fmt(cpuPerRequestRatio, 3)} CPU per request (${cpu('on')} vs ${cpu('off')} us)`,
      });
      process.stderr.write(`  metrics on / off: ${fmt(rpsRatio, 3)} x req/s, ${fmt(cpuPerRequestRatio, 3)} x CPU per request (${cpu('on')} vs ${cpu('off')} us)\n`);
      return { rpsRatio, cpuPerRequestRatio };
    };

    /**
     * The machine's speed drifts (shared cores), so each round measures the baseline right before
     * the scenario and the ratio is taken per round; the row reports medians over the rounds.
     */
    const paired = async (name: string, run: () => Promise<Measured>, note?: string, against: { load: Load; name: Baseline } = { load: baselineLoad, name: 'node:http' }): Promise<Row | undefined> => {
      if (!selected(name)) return undefined;
      // Baseline, round, baseline, round, ..., baseline: each round is compared with the mean of the
      // baseline runs just before and just after it, so a drift of the machine's speed during the
      // round moves both sides alike.
      const rounds: Array<Measured & { baselineRps: number; baselineP99Ms: number; baselineCpuUs?: number }> = [];
      let before = await measure(against.load, dir);
      for (let r = 0; r < ROUNDS; r += 1) {
        const m = await run();
        const after = await measure(against.load, dir);
        const baselineCpuUs = before.cpuUsPerRequest !== undefined && after.cpuUsPerRequest !== undefined ? (before.cpuUsPerRequest + after.cpuUsPerRequest) / 2 : undefined;
        rounds.push({ ...m, baselineRps: (before.rps + after.rps) / 2, baselineP99Ms: Math.max(before.p99Ms, after.p99Ms), ...(baselineCpuUs === undefined ? {} : { baselineCpuUs }) });
        before = after;
      }
      const cpuRounds = rounds.filter((r) => r.cpuUsPerRequest !== undefined && r.baselineCpuUs !== undefined);
      const cpuRatio = cpuRounds.length === rounds.length && rounds.length > 0 ? median(cpuRounds.map((r) => r.baselineCpuUs! / r.cpuUsPerRequest!)) : undefined;
      const row: Row = {
        scenario: name,
        baseline: against.name,
        rps: median(rounds.map((r) => r.rps)),
        p50Ms: median(rounds.map((r) => r.p50Ms)),
        p99Ms: median(rounds.map((r) => r.p99Ms)),
        non2xx: rounds.reduce((sum, r) => sum + r.non2xx, 0),
        requests: rounds.reduce((sum, r) => sum + r.requests, 0),
        ratio: median(rounds.map((r) => r.rps / r.baselineRps)),
        ...(cpuRatio === undefined ? {} : { cpuRatio, cpuUsPerRequest: median(cpuRounds.map((r) => r.cpuUsPerRequest!)) }),
        baselineRps: median(rounds.map((r) => r.baselineRps)),
        baselineP99Ms: median(rounds.map((r) => r.baselineP99Ms)),
        rounds: rounds.map((r) => ({ rps: r.rps, p99Ms: r.p99Ms, baselineRps: r.baselineRps, baselineP99Ms: r.baselineP99Ms, cpuUsPerRequest: r.cpuUsPerRequest, baselineCpuUs: r.baselineCpuUs })),
        ...(note ? { note } : {}),
      };
      rows.push(row);
      const cpu = cpuRatio === undefined ? '' : `; CPU per request ${fmt(row.cpuUsPerRequest ?? Number.NaN, 1)} us, ${fmt(cpuRatio, 2)} x`;
      process.stderr.write(`  ${name}: ${fmt(row.rps)} req/s (${fmt(row.ratio ?? Number.NaN, 2)} x ${against.name}${cpu}), p99 ${fmt(row.p99Ms, 2)} ms (${against.name} ${fmt(row.baselineP99Ms ?? Number.NaN, 2)} ms), non-2xx ${row.non2xx}\n`);
      return row;
    };
    const scenario = async (name: string, load: Load, note?: string, against?: { load: Load; name: Baseline }) => {
      if (!selected(name)) return undefined;
      // Warm-up: with 1 s, the first round of an mds scenario still ran 10-20 % slower than the others
      // (more code to optimise than in a baseline).
      await measure({ ...load, durationS: WARM_UP_S }, dir);
      if (against) await measure({ ...against.load, durationS: 1 }, dir);
      return paired(name, () => measure(load, dir), note, against);
    };
    const expressFor = (name: keyof typeof general) => ({ load: { url: expressBaseline.url(name) }, name: 'express' as const });

    process.stderr.write(
      `bench: ${hasWrk ? 'wrk' : 'autocannon'}, ${CONNECTIONS} connections, ${ROUNDS} rounds of ${DURATION_S} s per scenario, each between two baseline runs, ${cpus().length} cores, ${pinned ? 'servers on core 1 and the client on core 0' : 'not pinned (no taskset)'}\n`,
    );
    // First, while the pair is as fresh as in a run of this comparison alone: after minutes of being
    // stopped while other scenarios ran, an A/A run of the pair (metrics off in both) differed by
    // 14-18 %, against 1.5 % when run first.
    focus(withoutMetrics, withMetrics);
    const metricsCost = selected('indices cached (redis), metrics on') ? await compareMetrics() : undefined;
    focus(redisMode);
    await scenario('indices cached (redis)', { url: `${redisMode.url}/api/indices` });
    focus(limited);
    await scenario('indices cached (redis), rate limited', { url: `${limited.url}/api/indices` }, 'anonymous quota on (counted in Redis), never reached');
    focus(refusing);
    await scenario('indices over the quota (429)', { url: `${refusing.url}/api/indices` }, 'every answer a 429 envelope: the refusal path');
    focus(memoryMode);
    await scenario('indices cached (memory)', { url: `${memoryMode.url}/api/indices` });
    focus(redisMode);
    const nodeFor = (path: string) => ({ load: { url: `${baseline.url}${path}` }, name: 'node:http' as const });
    await scenario('quotes batch cached (AAPL,MSFT)', { url: `${redisMode.url}${CACHED_PATHS.quotes}` }, undefined, nodeFor(CACHED_PATHS.quotes));
    await scenario('quote cached (AAPL)', { url: `${redisMode.url}${CACHED_PATHS.quote}` }, undefined, nodeFor(CACHED_PATHS.quote));
    // MCP (DESIGN 22): a get_quote tool call on /mcp against the REST call it makes in-process, on the
    // same server, one of its own: MCP traffic (the shortcut, and the SDK's way with its in-process
    // request each time a target is validated again) left the cached REST reads served after it by the
    // same process about 15 % dearer in CPU per request (two fresh servers, MCP load on one, then
    // alternated), which would charge the scenarios measured after it here with MCP's cost.
    if (selected('mcp get_quote cached (AAPL)')) {
      const mcpMode = await startServer(env);
      children.push(mcpMode.child);
      mdsServers.push(mcpMode);
      focus(mcpMode);
      await fetch(`${mcpMode.url}${CACHED_PATHS.quote}`).then((r) => r.arrayBuffer());
      const toolCall = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_quote', arguments: { symbol: 'AAPL' } } });
      await scenario(
        'mcp get_quote cached (AAPL)',
        { url: `${mcpMode.url}/mcp`, method: 'POST', body: toolCall, headers: { Accept: 'application/json, text/event-stream' } },
        'one tools/call (stateless Streamable HTTP) vs GET /api/quotes/AAPL on the same server; target ratio >= 0.67 (<= 1.5x the cost)',
        { load: { url: `${mcpMode.url}${CACHED_PATHS.quote}` }, name: 'REST' },
      );
      focus(redisMode);
    }
    await scenario('history cached (AAPL 1d, 1y)', { url: `${redisMode.url}${CACHED_PATHS.history}` }, `baseline serves the same ${routes[CACHED_PATHS.history]!.body.length}-byte body`, nodeFor(CACHED_PATHS.history));
    await scenario('search cached (apple)', { url: `${redisMode.url}${CACHED_PATHS.search}` }, undefined, nodeFor(CACHED_PATHS.search));
    await scenario('indices If-None-Match (304)', { url: `${redisMode.url}/api/indices`, headers: { 'If-None-Match': etag } }, 'wrk counts 304 as a success');
    await scenario('health', general.health, `vs a bare Express 5 route sending ${bodies.health!.length} bytes`, expressFor('health'));
    await scenario('admin status (bearer)', general.bearer, `vs a bare Express 5 route sending ${bodies.bearer!.length} bytes`, expressFor('bearer'));
    await scenario('admin status (API key)', general.apikey, `vs a bare Express 5 route sending ${bodies.apikey!.length} bytes`, expressFor('apikey'));
    const managed = await fetch(`${redisMode.url}/api/admin/api-keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', Authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: 'bench', role: 'admin' }),
    });
    // `bench:compare` runs this script against older builds too: before 0.2.0 a created key was answered bare.
    const created = (await managed.json()) as { data?: { key: string }; key?: string };
    const managedKey = created.data?.key ?? created.key!;
    await scenario('admin status (managed API key)', { url: `${redisMode.url}/api/admin/status`, headers: { 'X-API-Key': managedKey } }, 'database lookup at most every 500 ms per key', expressFor('apikey'));

    // Logins (bcrypt-bound) and cached reads at once: the reads must not starve.
    let logins: Measured[] = [];
    const duringLogins = await paired(
      'indices cached, during logins',
      async () => {
        const [login, reads] = await Promise.all([
          measure({ url: `${redisMode.url}/api/auth/login`, method: 'POST', body: JSON.stringify(ADMIN), connections: 4 }, dir),
          measure({ url: `${redisMode.url}/api/indices`, connections: CONNECTIONS }, dir),
        ]);
        logins = [...logins, login];
        return reads;
      },
      'cached reads while 4 connections log in',
    );
    if (duringLogins) rows.push({
      scenario: 'login (bcrypt cost 12)',
      rps: median(logins.map((l) => l.rps)),
      p50Ms: median(logins.map((l) => l.p50Ms)),
      p99Ms: median(logins.map((l) => l.p99Ms)),
      non2xx: logins.reduce((sum, l) => sum + l.non2xx, 0),
      requests: logins.reduce((sum, l) => sum + l.requests, 0),
      ratio: null,
      note: 'logins/s with 4 connections, during the reads above',
    });

    if (selected('streams')) {
      focus();
      // Live quotes: SUBSCRIBERS streams of one symbol on one process; a change is announced on the
      // Redis channel as another instance would, and timed from the publish to its arrival at every
      // subscriber (the subscribers run in this process, so their parsing is part of the time).
      const streamServer = await startServer({ ...env, STREAM_MAX_CLIENTS: String(SUBSCRIBERS + 100), STREAM_MAX_PER_ADDRESS: '0', STREAM_REFRESH_SECONDS: '0' });
      children.push(streamServer.child);
      await fetch(`${streamServer.url}/api/indices`);
      const rssIdle = rssMiB(streamServer.child.pid);
      const subscribers = await subscribe(`${streamServer.url}/api/stream?symbols=%5EGSPC`, SUBSCRIBERS);
      const rssSubscribed = rssMiB(streamServer.child.pid);
      const quote = ((await (await fetch(`${streamServer.url}/api/quotes/%5EGSPC`)).json()) as { data: Record<string, unknown> }).data;
      const publisher = new Redis(redis.url, { lazyConnect: true });
      await publisher.connect();
      const toAll: number[] = [];
      const each: number[] = [];
      try {
        for (let i = 1; i <= STREAM_CHANGES; i += 1) {
          const price = 1_000_000 + i;
          const arrived = subscribers.arrivals(price);
          const version = Date.now() + i;
          const message = quoteChangeMessage({ symbol: '^GSPC', version, quote: JSON.stringify({ ...quote, price }) });
          // A build from before FORMATS.quoteChanges 2 (bench:compare's old build) reads only the format-1
          // message on its own channel, this one only the typed message: both go in one write, each reaches one.
          const formatOne = JSON.stringify({ s: '^GSPC', v: version, q: { ...quote, price } });
          const sent = performance.now();
          await publisher.pipeline().publish(quoteEventsChannel('simulated'), encodeEnvelope({ from: 'bench', message })).publish('mds:v1:quote-events:simulated', `bench:${formatOne}`).exec();
          const times = await arrived;
          for (const t of times) each.push(t - sent);
          toAll.push(Math.max(...times) - sent);
          await new Promise((r) => setTimeout(r, 100));
        }
      } finally {
        await publisher.quit();
      }
      rows.push({
        scenario: `streams: change -> all ${SUBSCRIBERS} subscribers`,
        rps: Number.NaN,
        p50Ms: percentile(toAll, 50),
        p99Ms: percentile(toAll, 99),
        non2xx: 0,
        requests: STREAM_CHANGES,
        ratio: null,
        note: `time from the Redis publish until the last subscriber has the event, over ${STREAM_CHANGES} changes; per subscriber p50 ${fmt(percentile(each, 50), 1)} ms, p99 ${fmt(percentile(each, 99), 1)} ms; server RSS ${fmt(rssIdle)} MiB idle, ${fmt(rssSubscribed)} MiB with the subscribers`,
      });
      process.stderr.write(`  ${rows.at(-1)!.scenario}: p50 ${fmt(rows.at(-1)!.p50Ms, 1)} ms, p99 ${fmt(rows.at(-1)!.p99Ms, 1)} ms; ${rows.at(-1)!.note}\n`);
      await scenario(`indices cached (redis), ${SUBSCRIBERS} streams open`, { url: `${streamServer.url}/api/indices` }, `while ${SUBSCRIBERS} subscribers stay connected; target >= 0.4 x baseline`);
      subscribers.close();
      await stop(streamServer.child);
    }

    if (selected('failover')) {
      focus();
      // The first provider hangs (a socket that accepts and never answers): every read that misses the
      // cache fails over to the second. Each read asks a window not asked before, so none is cached;
      // after three timeouts the first provider's breaker opens and it is skipped at no cost until
      // its next probe (every 10 s).
      const hanging = createServer(() => undefined);
      await new Promise<void>((done) => hanging.listen(0, '127.0.0.1', done));
      const hangPort = (hanging.address() as AddressInfo).port;
      const timeoutMs = 500;
      const failover = await startServer({
        ...env,
        MARKET_DATA_PROVIDERS: 'yahoo,simulated',
        YAHOO_BASE_URL: `http://127.0.0.1:${hangPort}`,
        YAHOO_TIMEOUT_MS: String(timeoutMs),
        REFRESH_INTERVAL_SECONDS: '0',
        STREAM_REFRESH_SECONDS: '0',
      });
      children.push(failover.child);
      const reads = Number(process.env.BENCH_FAILOVER_READS ?? 400);
      const concurrency = 4;
      const times: number[] = [];
      let non2xx = 0;
      let next = 0;
      const startedAt = performance.now();
      const worker = async () => {
        while (next < reads) {
          const i = next++;
          // A week of daily bars: the answer itself is cheap, so the time is the failover's.
          const startMs = Date.UTC(2020, 0, 1) + i * 86_400_000;
          const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
          const sent = performance.now();
          const res = await fetch(`${failover.url}/api/history/AAPL?interval=1d&start=${day(startMs)}&end=${day(startMs + 7 * 86_400_000)}`);
          await res.arrayBuffer();
          times.push(performance.now() - sent);
          if (res.status !== 200) non2xx += 1;
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      const elapsedS = (performance.now() - startedAt) / 1000;
      const waited = times.filter((t) => t >= timeoutMs).length;
      rows.push({
        scenario: 'failover: first provider hanging (history week, cold)',
        rps: reads / elapsedS,
        p50Ms: percentile(times, 50),
        p99Ms: percentile(times, 99),
        non2xx,
        requests: reads,
        ratio: null,
        note: `MARKET_DATA_PROVIDERS=yahoo,simulated with yahoo hanging (YAHOO_TIMEOUT_MS=${timeoutMs}); ${reads} uncached reads, ${concurrency} at a time; ${waited} waited out the timeout (before the breaker opened, and its probes), max ${fmt(Math.max(...times), 1)} ms`,
      });
      process.stderr.write(`  ${rows.at(-1)!.scenario}: p50 ${fmt(rows.at(-1)!.p50Ms, 1)} ms, p99 ${fmt(rows.at(-1)!.p99Ms, 1)} ms; ${rows.at(-1)!.note}\n`);
      await stop(failover.child);
      hanging.close();
      hanging.closeAllConnections?.();
    }

    await stop(redisMode.child);
    await stop(memoryMode.child);
    await stop(limited.child);
    await stop(refusing.child);
    await stop(withMetrics.child);
    if (selected('indices cached (redis), 2 workers')) {
      const twoWorkers = await startServer(env, ['--workers', '2'], []);
      children.push(twoWorkers.child);
      await fetch(`${twoWorkers.url}/api/indices`);
      await scenario('indices cached (redis), 2 workers', { url: `${twoWorkers.url}/api/indices` }, 'the load generator shares the 2 cores');
    }
    const baselineRow: Row = {
      scenario: 'baseline node:http (median of all its runs)',
      ...(await measure(baselineLoad, dir)),
      ratio: 1,
    };
    const nodeBaselineRuns = rows.filter((r) => r.baseline === 'node:http').flatMap((r) => (r.rounds ?? []).map((x) => x.baselineRps));
    if (nodeBaselineRuns.length > 0) baselineRow.rps = median(nodeBaselineRuns);
    rows.unshift(baselineRow);

    const result = {
      at: new Date().toISOString(),
      tool: hasWrk ? 'wrk' : 'autocannon',
      connections: CONNECTIONS,
      durationS: DURATION_S,
      rounds: ROUNDS,
      pinned,
      cores: cpus().length,
      node: process.version,
      bodyBytes: body.length,
      /** Metrics on over metrics off for cached reads: medians of per-round ratios. */
      metricsCost: metricsCost ?? null,
      rows,
    };
    const output = process.env.BENCH_OUTPUT ?? join(ROOT, 'bench', 'results', 'latest.json');
    mkdirSync(dirname(output), { recursive: true });
    writeFileSync(output, `${JSON.stringify(result, null, 2)}\n`);

    const header = ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'x baseline', 'x CPU', 'baseline', 'its p99 ms'];
    const lines = rows.map((r) => [
      r.scenario,
      fmt(r.rps, r.rps < 100 ? 1 : 0),
      fmt(r.p50Ms, 2),
      fmt(r.p99Ms, 2),
      String(r.non2xx),
      r.ratio === null ? '-' : fmt(r.ratio, 2),
      r.cpuRatio === undefined ? '-' : fmt(r.cpuRatio, 2),
      r.ratio === null ? '' : (r.baseline ?? 'node:http'),
      r.baselineP99Ms === undefined ? '' : fmt(r.baselineP99Ms, 2),
    ]);
    const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
    const print = (cells: string[]) => console.log(cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '));
    print(header);
    for (const l of lines) print(l);
    if (metricsCost !== undefined) {
      const pct = (ratio: number) => fmt((1 - ratio) * 100, 1);
      console.log(
        `\ncost of metrics on cached reads (budget 10 %): ${pct(metricsCost.rpsRatio)} % of req/s, ${fmt((metricsCost.cpuPerRequestRatio - 1) * 100, 1)} % more CPU per request`,
      );
    }
    console.log(`\nx baseline: median over ${ROUNDS} rounds of the scenario's req/s over the mean of the baseline runs just before and just after it:`);
    console.log('node:http = bare node:http writing the cached indices bytes; express = a bare Express 5 route sending a body of the same size as the scenario answer.');
    console.log('x CPU: the same pairing for the server\'s own CPU time per request (from /proc), inverted to read like x baseline: baseline us / scenario us.');
    console.log("its p99 ms: the baseline's own p99 in those runs, what the machine allowed at the time.");
    console.log(`written to ${output} (${result.tool}, ${CONNECTIONS} connections, ${ROUNDS} x ${DURATION_S} s per scenario)`);
  } finally {
    for (const child of children) await stop(child);
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
