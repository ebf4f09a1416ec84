/**
 * Live bench (DESIGN 23): WebSocket subscribers of one `mds serve` fed by a local replay of Yahoo's
 * streamer that pushes one price per symbol every 100 ms.
 *
 *   npm run build && node --import tsx bench/live.ts
 *   LIVE_BENCH_CLIENTS=10000 LIVE_BENCH_SYMBOLS=100 LIVE_BENCH_SECONDS=10 (the defaults)
 *   LIVE_BENCH_WORKERS (client processes; 2 from 2,000 clients, else 1), LIVE_BENCH_HANDSHAKES
 *   (handshakes under way at once over all workers, 200), LIVE_BENCH_RETRIES (tries again of a failed
 *   handshake, 3), LIVE_BENCH_CONNECT_UNDER_LOAD=1 (keep pushing while the subscribers after the
 *   baseline connect; by default pushes pause meanwhile)
 *
 * Reports, for a baseline of one subscriber per symbol and then for every subscriber, the delivery
 * latency (push sent -> quote received: the frame's `time` is the moment it was sent, and the quote's
 * `timestamp` carries it) p50/p99 and their ratio to the baseline's; the server's RSS per connection;
 * and the server's RSS while one more client subscribed to 50 symbols has stopped reading.
 *
 * The clients run in their own processes (`bench/live-clients.ts`), opened at a bounded number of
 * handshakes at a time, each failed handshake tried again a bounded number of times; failures are
 * counted and printed by reason. With taskset and 2+ cores the server runs on core 1 and the clients
 * on core 0. The open-files limit each process needs is checked first and raised with `prlimit` up to
 * the hard limit (or the bench stops and says which limit it needs). Before measuring, the number of
 * sessions the server counts (`mds_stream_clients`) must equal the subscriptions it acknowledged.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import WebSocket from 'ws';
import { SIMULATED_DIRECTORY } from '../src/infra/market/simulated-directory.js';
import { startFakeYahooStreamer } from '../test/helpers/fake-push-upstream.js';
import { sampleValue } from '../test/helpers/metrics.js';
import { freePort, startRedis } from '../test/helpers/redis-server.js';
import { spawnServe } from '../test/helpers/serve-process.js';
import type { FromWorker, ToWorker } from './live-clients.js';
import { benchEnv, initService } from './setup.js';

const CLIENTS = Number(process.env.LIVE_BENCH_CLIENTS ?? 10_000);
const SYMBOLS = Math.min(Number(process.env.LIVE_BENCH_SYMBOLS ?? 100), 150);
const SECONDS = Number(process.env.LIVE_BENCH_SECONDS ?? 10);
const WORKERS = Math.max(1, Number(process.env.LIVE_BENCH_WORKERS ?? (CLIENTS >= 2000 ? 2 : 1)));
const IN_FLIGHT = Math.max(1, Number(process.env.LIVE_BENCH_HANDSHAKES ?? 200));
const RETRIES = Math.max(0, Number(process.env.LIVE_BENCH_RETRIES ?? 3));
const CONNECT_UNDER_LOAD = process.env.LIVE_BENCH_CONNECT_UNDER_LOAD === '1';
const HANDSHAKE_TIMEOUT_MS = 30_000;
const BASE_SECONDS = Math.max(2, Math.round(SECONDS / 3));
const PUSH_EVERY_MS = 100;
/** Descriptors a process needs beyond its sockets (Redis, the database, listeners, node itself). */
const FD_MARGIN = 512;

const pinned = spawnSync('taskset', ['-c', '0', 'true']).status === 0 && cpus().length >= 2;
const SERVER_CPU = pinned ? ['taskset', '-c', '1'] : [];
/** Core 0 for the clients, and every core past the server's when there are more than two. */
const CLIENT_CPU = pinned ? ['taskset', '-c', cpus().length > 2 ? `0,2-${cpus().length - 1}` : '0'] : [];

function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

const CLOCK_TICKS_PER_S = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;

/** User + system CPU seconds process `pid` has used so far (utime and stime of /proc/<pid>/stat). */
function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S;
}

/** Seconds the main thread of `pid` has waited on a run queue for a core (/proc/<pid>/schedstat); NaN without it. */
function runQueueSecondsOf(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e9;
  } catch {
    return Number.NaN;
  }
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * This process's open-files limits (children inherit them); Infinity for unlimited. Node raises its
 * own soft limit to the hard one as it starts, so the hard limit is what decides.
 */
function openFilesLimits(): { soft: number; hard: number } {
  const out = spawnSync('sh', ['-c', 'ulimit -Sn; ulimit -Hn'], { encoding: 'utf8' }).stdout.trim().split('\n');
  const read = (s: string | undefined) => (s === 'unlimited' ? Infinity : Number(s));
  return { soft: read(out[0]), hard: read(out[1]) };
}

/**
 * The command prefix that gives a child `need` open files: none when the soft limit suffices,
 * `prlimit --nofile=<need>:<hard>` when the hard limit allows it. Throws, naming the limit, otherwise.
 */
function openFilesPrefix(need: number, who: string): { prefix: string[]; said: string } {
  const { soft, hard } = openFilesLimits();
  if (soft >= need) return { prefix: [], said: `${who} needs ${need} open files: soft limit ${soft} suffices` };
  if (hard < need) {
    throw new Error(
      `${who} needs ${need} open files; the hard limit is ${hard}. Raise it (as root: ulimit -Hn ${need}, /etc/security/limits.conf "nofile", or LimitNOFILE= in systemd), or lower LIVE_BENCH_CLIENTS / raise LIVE_BENCH_WORKERS`,
    );
  }
  if (spawnSync('prlimit', ['--version']).error !== undefined) {
    throw new Error(`${who} needs ${need} open files; the soft limit is ${soft} and prlimit is not installed: run \`ulimit -n ${need}\` first`);
  }
  const hardText = hard === Infinity ? 'unlimited' : String(hard);
  return { prefix: ['prlimit', `--nofile=${need}:${hardText}`], said: `${who} needs ${need} open files: raised from ${soft} with prlimit (hard ${hardText})` };
}

/**
 * Source addresses for `clients` connections to one server port: 127.0.0.1 while the ephemeral port
 * range holds them with room for TIME_WAIT leftovers of a previous run, else more loopback addresses
 * (each has the whole range towards the server's port).
 */
function sourceAddresses(clients: number): { addresses: string[]; said: string } {
  const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number) as [number, number];
  const ports = high - low + 1;
  const perAddress = Math.floor(ports / 2);
  const count = Math.max(1, Math.ceil(clients / perAddress));
  const addresses = Array.from({ length: count }, (_, i) => `127.0.0.${i + 1}`);
  return { addresses, said: `ephemeral ports ${low}-${high} (${ports}): ${count === 1 ? 'one source address suffices' : `clients spread over ${count} loopback addresses`}` };
}

/** A client process and its messages. */
class ClientWorker {
  readonly #waiting = new Map<string, (m: FromWorker) => void>();
  readonly child: ChildProcess;

  constructor(prefix: string[]) {
    const [command, ...args] = [...prefix, process.execPath, '--import', 'tsx', resolve(import.meta.dirname, 'live-clients.ts')];
    this.child = spawn(command!, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (m: FromWorker) => {
      const waiter = this.#waiting.get(m.type);
      this.#waiting.delete(m.type);
      waiter?.(m);
    });
  }

  next<T extends FromWorker['type']>(type: T): Promise<Extract<FromWorker, { type: T }>> {
    return new Promise((done, fail) => {
      const exited = () => fail(new Error(`a client process exited while the bench waited for '${type}'`));
      this.child.once('exit', exited);
      this.#waiting.set(type, (m) => {
        this.child.off('exit', exited);
        done(m as Extract<FromWorker, { type: T }>);
      });
    });
  }

  tell(message: ToWorker): void {
    this.child.send(message);
  }
}

type Connected = Omit<Extract<FromWorker, { type: 'connected' }>, 'type'>;

function merge(results: Connected[]): Connected {
  const reasons: Record<string, number> = {};
  for (const r of results) for (const [k, v] of Object.entries(r.reasons)) reasons[k] = (reasons[k] ?? 0) + v;
  return {
    acknowledged: results.reduce((s, r) => s + r.acknowledged, 0),
    failed: results.reduce((s, r) => s + r.failed, 0),
    retried: results.reduce((s, r) => s + r.retried, 0),
    reasons,
    ms: Math.max(0, ...results.map((r) => r.ms)),
  };
}

function percentileOf(histogram: Map<number, number>, total: number, p: number): number {
  if (total === 0) return Number.NaN;
  const rank = Math.min(total - 1, Math.floor((p / 100) * total));
  let seen = 0;
  for (const ms of [...histogram.keys()].sort((a, b) => a - b)) {
    seen += histogram.get(ms)!;
    if (seen > rank) return ms;
  }
  return Number.NaN;
}

async function main(): Promise<void> {
  const symbols = SIMULATED_DIRECTORY.filter((i) => /^[A-Z]/.test(i.symbol)).slice(0, SYMBOLS).map((i) => i.symbol);
  if (CLIENTS < symbols.length) throw new Error(`LIVE_BENCH_CLIENTS (${CLIENTS}) must be at least LIVE_BENCH_SYMBOLS (${symbols.length}): the baseline has one subscriber per symbol`);
  const perWorker = Math.ceil(CLIENTS / WORKERS);
  const serverFiles = openFilesPrefix(CLIENTS + 1 + FD_MARGIN, 'the server');
  const workerFiles = openFilesPrefix(perWorker + FD_MARGIN, `each of ${WORKERS} client processes`);
  const sources = sourceAddresses(CLIENTS + 1);
  const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8').trim());
  // Node listens with a backlog of 511 (capped by somaxconn): handshakes under way stay below it.
  const inFlight = Math.max(1, Math.min(IN_FLIGHT, Math.min(511, somaxconn) - 11));
  console.log(`live bench setup: ${cpus().length} cores, ${pinned ? `server on core 1, clients on core(s) ${CLIENT_CPU[2]}` : 'not pinned (no taskset or one core)'}, ${WORKERS} client process(es), at most ${inFlight} handshakes under way (somaxconn ${somaxconn}), ${RETRIES} tries again per client`);
  console.log(`  ${serverFiles.said}; ${workerFiles.said}; ${sources.said}; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);

  const redis = await startRedis();
  const yahoo = await startFakeYahooStreamer();
  const dir = mkdtempSync(join(tmpdir(), 'mds-live-bench-'));
  const metricsPort = await freePort();
  const env = {
    ...benchEnv(dir, `${redis.url}/0`),
    MARKET_DATA_PROVIDER: 'simulated',
    REFRESH_INTERVAL_SECONDS: '0',
    STREAM_REFRESH_SECONDS: '0',
    STREAM_UPSTREAMS: 'yahoo',
    YAHOO_STREAM_URL: yahoo.url,
    STREAM_MAX_CLIENTS: String(CLIENTS + 10),
    STREAM_MAX_PER_ADDRESS: '0',
    // The client that stops reading must stay connected while it is watched, not be dropped by a missed ping.
    STREAM_HEARTBEAT_SECONDS: String(Math.max(60, SECONDS * 4)),
    METRICS_PORT: String(metricsPort),
    LOG_LEVEL: 'warn',
  };
  initService(env);
  const server = await spawnServe(['--port', '0', '--host', '127.0.0.1'], { env, cwd: dir, stdout: 'ignore', prefix: [...SERVER_CPU, ...serverFiles.prefix] });
  const pid = server.child.pid!;
  // Redis's own process, to tell a server waiting on Redis from a server short of CPU.
  const redisPid = Number(spawnSync('pgrep', ['-f', `redis-server 127.0.0.1:${redis.port}`], { encoding: 'utf8' }).stdout?.trim().split('\n')[0]) || undefined;
  const wsUrl = `${server.url.replace(/^http/, 'ws')}/api/ws`;
  const sessions = async () => sampleValue(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text(), 'mds_stream_clients');
  /** Waits until the server counts `expected` sessions (deadline 30 s); resolves to its count. */
  const serverCounts = async (expected: number) => {
    const deadline = Date.now() + 30_000;
    let counted = await sessions();
    while (counted !== expected && Date.now() < deadline) {
      await sleep(200);
      counted = await sessions();
    }
    return counted;
  };

  const workers: ClientWorker[] = [];
  let pushing: NodeJS.Timeout | undefined;
  let slow: WebSocket | undefined;
  try {
    for (let i = 0; i < WORKERS; i++) {
      const worker = new ClientWorker([...CLIENT_CPU, ...workerFiles.prefix]);
      await worker.next('ready');
      workers.push(worker);
    }
    const connect = async (worker: ClientWorker, clients: string[][], share: number) => {
      const answer = worker.next('connected');
      worker.tell({ type: 'connect', url: wsUrl, clients, inFlight: share, retries: RETRIES, localAddresses: sources.addresses, handshakeTimeoutMs: HANDSHAKE_TIMEOUT_MS });
      return answer;
    };
    const record = async (on: ClientWorker[], seconds: number) => {
      for (const w of on) w.tell({ type: 'record' });
      const cpuFrom = cpuSecondsOf(pid);
      const redisFrom = redisPid === undefined ? Number.NaN : cpuSecondsOf(redisPid);
      const waitFrom = runQueueSecondsOf(pid);
      const rss: number[] = [];
      for (let s = 0; s < seconds; s++) {
        await sleep(1000);
        rss.push(rssOf(pid));
      }
      const serverCpu = (cpuSecondsOf(pid) - cpuFrom) / seconds;
      const redisCpu = redisPid === undefined ? Number.NaN : (cpuSecondsOf(redisPid) - redisFrom) / seconds;
      const serverWaited = (runQueueSecondsOf(pid) - waitFrom) / seconds;
      const answers = await Promise.all(on.map((w) => {
        const answer = w.next('recorded');
        w.tell({ type: 'stop' });
        return answer;
      }));
      const histogram = new Map<number, number>();
      for (const a of answers) for (const [ms, n] of a.histogram) histogram.set(ms, (histogram.get(ms) ?? 0) + n);
      const count = answers.reduce((s, a) => s + a.count, 0);
      return {
        count,
        p50: percentileOf(histogram, count, 50),
        p99: percentileOf(histogram, count, 99),
        rss,
        serverCpu,
        serverWaited,
        redisCpu,
        closedMeanwhile: answers.reduce((s, a) => s + a.closedMeanwhile, 0),
        loopDelayP99Ms: Math.max(...answers.map((a) => a.loopDelayP99Ms)),
      };
    };

    let price = 100;
    const push = () => {
      price += 0.01;
      const time = Date.now();
      symbols.forEach((id, i) => yahoo.push({ id, price: Number((price + i).toFixed(2)), time }));
    };
    pushing = setInterval(push, PUSH_EVERY_MS);

    const rssIdle = rssOf(pid);
    // Baseline: one subscriber per symbol, all in the first client process.
    const base = await connect(workers[0]!, symbols.map((s) => [s]), inFlight);
    if (base.acknowledged !== symbols.length) throw new Error(`baseline: ${base.failed} of ${symbols.length} subscribers failed (${JSON.stringify(base.reasons)})`);
    await waitForUpstream(yahoo, symbols);
    const baseSessions = await serverCounts(base.acknowledged);
    if (baseSessions !== base.acknowledged) throw new Error(`baseline: the server counts ${baseSessions} sessions, ${base.acknowledged} were acknowledged`);
    await sleep(1000);
    const baseline = await record([workers[0]!], BASE_SECONDS);
    const rssBefore = rssOf(pid);

    // Everyone else, spread over the client processes, each with its share of the handshakes under way.
    const rest = Array.from({ length: CLIENTS - symbols.length }, (_, k) => [symbols[(symbols.length + k) % symbols.length]!]);
    const shares = workers.map((_, w) => rest.filter((_, k) => k % WORKERS === w));
    // Pushes pause while they connect unless LIVE_BENCH_CONNECT_UNDER_LOAD=1: a server delivering to
    // thousands is slow to take handshakes, which then wait long in its backlog.
    if (!CONNECT_UNDER_LOAD) clearInterval(pushing);
    const later = await Promise.all(workers.map((w, i) => connect(w, shares[i]!, Math.max(1, Math.floor(inFlight / WORKERS)))));
    const full = merge([base, ...later]);
    const laterMs = Math.max(0, ...later.map((r) => r.ms));
    const counted = await serverCounts(full.acknowledged);
    if (!CONNECT_UNDER_LOAD) pushing = setInterval(push, PUSH_EVERY_MS);
    console.log(`live bench: ${CLIENTS} WebSocket subscribers (1 symbol each) of ${symbols.length} symbols, one pushed price per symbol per ${PUSH_EVERY_MS} ms`);
    console.log(`  connected: ${full.acknowledged} of ${CLIENTS} acknowledged ('subscribed'), ${full.failed} failed after ${RETRIES} tries again${full.failed > 0 ? ' (NOT MEASURED)' : ''}; ${full.retried} handshakes tried again; the server counts ${counted} sessions${counted !== full.acknowledged ? ` (MISMATCH: ${full.acknowledged} acknowledged)` : ''}`);
    // Figures of fewer subscribers than asked are printed, and the run ends in failure.
    if (full.failed > 0 || counted !== full.acknowledged) process.exitCode = 1;
    if (Object.keys(full.reasons).length > 0) console.log(`  handshake failures by reason: ${Object.entries(full.reasons).map(([k, v]) => `${k}: ${v}`).join(', ')}`);
    console.log(`  connecting the ${CLIENTS - symbols.length} after the baseline took ${(laterMs / 1000).toFixed(1)} s (${Math.round(((CLIENTS - symbols.length) * 1000) / Math.max(1, laterMs))}/s) ${CONNECT_UNDER_LOAD ? 'while prices were pushed' : 'with pushes paused (LIVE_BENCH_CONNECT_UNDER_LOAD=1 keeps them)'}`);
    const rssConnected = rssOf(pid);
    await sleep(1000);
    const measured = await record(workers, SECONDS);
    const expectedPerS = (n: number) => Math.round((n * 1000) / PUSH_EVERY_MS);
    console.log(`  baseline (${symbols.length} subscribers, ${BASE_SECONDS} s): ${baseline.count} deliveries (${Math.round(baseline.count / BASE_SECONDS)}/s, expected ${expectedPerS(symbols.length)}/s), p50 ${baseline.p50} ms, p99 ${baseline.p99} ms; server CPU ${(baseline.serverCpu * 100).toFixed(0)}% of a core (waited for one ${(baseline.serverWaited * 100).toFixed(0)}%)`);
    console.log(`  full     (${full.acknowledged} subscribers, ${SECONDS} s): ${measured.count} deliveries (${Math.round(measured.count / SECONDS)}/s, expected ${expectedPerS(full.acknowledged)}/s), p50 ${measured.p50} ms, p99 ${measured.p99} ms; p99 ratio to baseline ${(measured.p99 / Math.max(1, baseline.p99)).toFixed(1)}x; ${measured.closedMeanwhile} connections closed meanwhile; server CPU ${(measured.serverCpu * 100).toFixed(0)}% of a core (its main thread waited for a core ${(measured.serverWaited * 100).toFixed(0)}% of the time), Redis CPU ${(measured.redisCpu * 100).toFixed(0)}%; client event-loop delay p99 ${measured.loopDelayP99Ms.toFixed(0)} ms`);
    console.log(`  server RSS: idle ${mb(rssIdle)}, ${symbols.length} clients ${mb(rssBefore)}, ${full.acknowledged} clients ${mb(rssConnected)}: ${((rssConnected - rssBefore) / 1024 / Math.max(1, full.acknowledged - symbols.length)).toFixed(1)} KB per connection`);
    console.log(`  server RSS each second while all read: ${measured.rss.map(mb).join(', ')} (growth ${mb(Math.max(...measured.rss) - measured.rss[0]!)})`);

    // One more client follows 50 symbols and stops reading; the server's RSS is watched meanwhile.
    slow = await new Promise<WebSocket>((done, fail) => {
      const ws = new WebSocket(wsUrl, { perMessageDeflate: false, handshakeTimeout: HANDSHAKE_TIMEOUT_MS });
      let acknowledged = false;
      const timer = setTimeout(() => ws.terminate(), HANDSHAKE_TIMEOUT_MS * 2);
      ws.on('message', (data) => {
        const text = data.toString();
        if (!acknowledged && text.startsWith('{"event":"subscribed"')) {
          acknowledged = true;
          clearTimeout(timer);
          done(ws);
        } else if (!acknowledged && text.startsWith('{"event":"error"')) fail(new Error(`the client that stops reading was refused: ${text}`));
      });
      ws.once('open', () => ws.send(JSON.stringify({ action: 'subscribe', symbols: symbols.slice(0, 50) })));
      ws.on('error', (err) => fail(err));
      ws.once('close', (code) => {
        clearTimeout(timer);
        if (!acknowledged) fail(new Error(`the client that stops reading was closed (${code}) before it was subscribed`));
      });
    });
    (slow as unknown as { _socket: { pause(): void } })._socket.pause();
    const rssSlowStart = rssOf(pid);
    const withSlow = await record(workers, SECONDS);
    const slowKept = (await sessions()) === counted + 1;
    console.log(`  one more client stopped reading: RSS ${mb(rssSlowStart)} when it stopped, then ${withSlow.rss.map(mb).join(', ')} (growth ${mb(Math.max(...withSlow.rss) - rssSlowStart)}); still connected at the end: ${slowKept ? 'yes' : 'no'}; the others meanwhile: p99 ${withSlow.p99} ms, ${withSlow.closedMeanwhile} closed`);
  } finally {
    if (pushing !== undefined) clearInterval(pushing);
    slow?.terminate();
    for (const w of workers) {
      if (w.child.exitCode !== null || w.child.signalCode !== null) continue;
      const exited = new Promise((r) => w.child.once('exit', r));
      if (w.child.connected) w.tell({ type: 'close' });
      else w.child.kill();
      await exited;
    }
    await server.stop('SIGTERM');
    await yahoo.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function waitForUpstream(yahoo: Awaited<ReturnType<typeof startFakeYahooStreamer>>, symbols: string[]): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!symbols.every((s) => yahoo.subscribed().has(s))) {
    if (Date.now() > deadline) throw new Error('the server never subscribed the streamer to every symbol');
    await sleep(50);
  }
}

await main();
