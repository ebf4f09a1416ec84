/**
 * Live bench (DESIGN 23): WebSocket subscribers of one `mds serve` fed by a local replay of Yahoo's
 * streamer that pushes one price per symbol every 100 ms.
 *
 *   npm run build && node --import tsx bench/live.ts
 *   LIVE_BENCH_CLIENTS=10000 LIVE_BENCH_SYMBOLS=100 LIVE_BENCH_SECONDS=10 (the defaults)
 *
 * Reports, for a baseline of one subscriber per symbol and then for every subscriber, the delivery
 * latency (push sent -> quote received: the frame's `time` is the moment it was sent, and the quote's
 * `timestamp` carries it) p50/p99 and their ratio to the baseline's; the server's RSS per connection;
 * and the server's RSS while one more client subscribed to 50 symbols has stopped reading.
 * The clients run in this process: on a small machine they compete with the server for the CPU.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { SIMULATED_DIRECTORY } from '../src/infra/market/simulated-directory.js';
import { startFakeYahooStreamer } from '../test/helpers/fake-push-upstream.js';
import { startRedis } from '../test/helpers/redis-server.js';
import { spawnServe } from '../test/helpers/serve-process.js';
import { benchEnv, initService } from './setup.js';

const CLIENTS = Number(process.env.LIVE_BENCH_CLIENTS ?? 10_000);
const SYMBOLS = Math.min(Number(process.env.LIVE_BENCH_SYMBOLS ?? 100), 150);
const SECONDS = Number(process.env.LIVE_BENCH_SECONDS ?? 10);
const BASE_SECONDS = Math.max(2, Math.round(SECONDS / 3));
const PUSH_EVERY_MS = 100;
const TIMESTAMP = /"timestamp":"([^"]+)"/;

function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

async function main(): Promise<void> {
  const symbols = SIMULATED_DIRECTORY.filter((i) => /^[A-Z]/.test(i.symbol)).slice(0, SYMBOLS).map((i) => i.symbol);
  const redis = await startRedis();
  const yahoo = await startFakeYahooStreamer();
  const dir = mkdtempSync(join(tmpdir(), 'mds-live-bench-'));
  const env = {
    ...benchEnv(dir, `${redis.url}/0`),
    MARKET_DATA_PROVIDER: 'simulated',
    REFRESH_INTERVAL_SECONDS: '0',
    STREAM_REFRESH_SECONDS: '0',
    STREAM_UPSTREAMS: 'yahoo',
    YAHOO_STREAM_URL: yahoo.url,
    STREAM_MAX_CLIENTS: String(CLIENTS + 10),
    STREAM_MAX_PER_ADDRESS: '0',
    LOG_LEVEL: 'warn',
  };
  initService(env);
  const server = await spawnServe(['--port', '0', '--host', '127.0.0.1'], { env, cwd: dir, stdout: 'ignore' });
  const pid = server.child.pid!;
  const wsUrl = `${server.url.replace(/^http/, 'ws')}/api/ws`;
  let recording: number[] | undefined;
  const sockets: WebSocket[] = [];

  const connect = (subscribe: string[]): Promise<WebSocket> =>
    new Promise((resolve, reject) => {
      const ws = new WebSocket(wsUrl, { perMessageDeflate: false });
      let acknowledged = false;
      ws.on('message', (data) => {
        const text = data.toString();
        if (!acknowledged) {
          if (text.startsWith('{"event":"subscribed"')) {
            acknowledged = true;
            resolve(ws);
          }
          return;
        }
        if (recording === undefined || !text.startsWith('{"event":"quote"')) return;
        const ts = TIMESTAMP.exec(text)?.[1];
        if (ts !== undefined) recording.push(Date.now() - Date.parse(ts));
      });
      ws.once('open', () => ws.send(JSON.stringify({ action: 'subscribe', symbols: subscribe })));
      ws.once('error', (err) => {
        ws.terminate();
        reject(err);
      });
      sockets.push(ws);
    });

  /** Connects clients `from`..`to` in batches; a handshake refused under load (408, reset) is tried again, twice. */
  let retried = 0;
  const connectMany = async (from: number, to: number) => {
    const one = async (symbol: string) => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await connect([symbol]);
        } catch (err) {
          if (attempt >= 2) throw err;
          retried += 1;
        }
      }
    };
    for (let i = from; i < to; i += 100) {
      await Promise.all(Array.from({ length: Math.min(100, to - i) }, (_, k) => one(symbols[(i + k) % symbols.length]!)));
    }
  };

  let price = 100;
  const pushing = setInterval(() => {
    price += 0.01;
    const time = Date.now();
    for (const id of symbols) yahoo.push({ id, price: Number((price + symbols.indexOf(id)).toFixed(2)), time });
  }, PUSH_EVERY_MS);

  /** Records deliveries for `seconds` (after a second of warm-up), sampling the server's RSS each second. */
  const measure = async (seconds: number) => {
    await new Promise((r) => setTimeout(r, 1000));
    recording = [];
    const rss: number[] = [];
    for (let s = 0; s < seconds; s++) {
      await new Promise((r) => setTimeout(r, 1000));
      rss.push(rssOf(pid));
    }
    const got = recording.sort((a, b) => a - b);
    recording = undefined;
    return { count: got.length, p50: percentile(got, 50), p99: percentile(got, 99), rss };
  };

  try {
    const rssIdle = rssOf(pid);
    await connectMany(0, symbols.length);
    await waitForUpstream(yahoo, symbols);
    const baseline = await measure(BASE_SECONDS);
    const rssBefore = rssOf(pid);
    await connectMany(symbols.length, CLIENTS);
    const rssConnected = rssOf(pid);
    const full = await measure(SECONDS);

    // One more client follows 50 symbols and stops reading; the server's RSS is watched meanwhile.
    const slow = await connect(symbols.slice(0, 50));
    (slow as unknown as { _socket: { pause(): void } })._socket.pause();
    const rssSlowStart = rssOf(pid);
    const withSlow = await measure(SECONDS);
    const samples = withSlow.rss;

    console.log(`live bench: ${CLIENTS} WebSocket subscribers (1 symbol each) of ${symbols.length} symbols, one pushed price per symbol per ${PUSH_EVERY_MS} ms`);
    console.log(`  baseline (${symbols.length} subscribers, ${BASE_SECONDS} s): ${baseline.count} deliveries, p50 ${baseline.p50} ms, p99 ${baseline.p99} ms`);
    console.log(`  full     (${CLIENTS} subscribers, ${SECONDS} s): ${full.count} deliveries (${Math.round(full.count / SECONDS)}/s, expected ${Math.round((CLIENTS * 1000) / PUSH_EVERY_MS)}/s), p50 ${full.p50} ms, p99 ${full.p99} ms; p99 ratio to baseline ${(full.p99 / Math.max(1, baseline.p99)).toFixed(1)}x`);
    if (retried > 0) console.log(`  (${retried} handshakes refused under load were tried again)`);
    console.log(`  server RSS: idle ${mb(rssIdle)}, ${symbols.length} clients ${mb(rssBefore)}, ${CLIENTS} clients ${mb(rssConnected)}: ${((rssConnected - rssBefore) / 1024 / Math.max(1, CLIENTS - symbols.length)).toFixed(1)} KB per connection`);
    console.log(`  server RSS each second while all read: ${full.rss.map(mb).join(', ')} (growth ${mb(Math.max(...full.rss) - full.rss[0]!)})`);
    console.log(`  one more client stopped reading: RSS ${mb(rssSlowStart)} when it stopped, then ${samples.map(mb).join(', ')} (growth ${mb(Math.max(...samples) - rssSlowStart)}); the others meanwhile: p99 ${withSlow.p99} ms`);
  } finally {
    clearInterval(pushing);
    for (const ws of sockets) ws.terminate();
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
    await new Promise((r) => setTimeout(r, 50));
  }
}

await main();
