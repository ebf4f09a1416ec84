/**
 * Live bars bench (DESIGN 26): the leader's bar path in this process, fed as a push upstream would
 * feed it: `LiveBars.accept` for 500 symbols x 10 ticks a second, the builder state written to a real
 * redis-server through the service's own cache (createCache: the store and the broadcast main.ts
 * uses), bars published on the bus and received back as every instance receives them.
 *
 *   node --import tsx bench/live-bars.ts      (npm run bench:live-bars)
 *   LIVE_BARS_BENCH_SYMBOLS=500 LIVE_BARS_BENCH_RATE=10 (ticks a second per symbol) LIVE_BARS_BENCH_SECONDS=20
 *
 * The feed starts 8 s before a minute ends, so the run crosses a minute boundary and every symbol's
 * bar becomes final during it. Reports:
 * - CPU per tick: the process's CPU time (user + system) over the feed divided by the ticks fed. It
 *   includes the feed itself, the timers, the Redis writes and the bus; and, apart, the time spent
 *   inside `accept` (the builder and the bookkeeping, synchronous).
 * - bar-close latency: for each final bar received from the bus, the time from its minute's end plus
 *   LIVE_BAR_GRACE_MS to its arrival; p50, p99, max over every symbol's final bar.
 */
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { barSessions } from '../src/domain/bar-sessions.js';
import type { LiveBar } from '../src/domain/live-bar.js';
import { channels, keys } from '../src/domain/key-space.js';
import { loadConfig } from '../src/config.js';
import { createCache } from '../src/infra/cache/index.js';
import { LiveBars } from '../src/services/live-bars.js';
import { startRedis } from '../test/helpers/redis-server.js';

const SYMBOLS = Number(process.env.LIVE_BARS_BENCH_SYMBOLS ?? 500);
const RATE = Number(process.env.LIVE_BARS_BENCH_RATE ?? 10);
const SECONDS = Number(process.env.LIVE_BARS_BENCH_SECONDS ?? 20);
const GRACE_MS = 2000;
const MINUTE = 60_000;
const STEP_MS = 10;

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function main(): Promise<void> {
  const redis = await startRedis();
  const logger = pino({ level: 'warn' });
  const config = loadConfig({ CACHE_URL: `${redis.url}/0`, SECRET_KEY: 'bench-secret-key-0123456789abcdef0123456789' }, { readFile: false });
  const cache = createCache(config.cache, logger);
  await cache.start();
  if (cache.status().mode !== 'redis') throw new Error('the bench needs its redis-server answering');
  const symbols = Array.from({ length: SYMBOLS }, (_, i) => `S${String(i).padStart(4, '0')}-USD`);
  const closeLatency: number[] = [];
  let updates = 0;
  const bars = new LiveBars({
    store: cache,
    stateKey: (upstream, symbol) => keys.liveBarState('bench', upstream, symbol),
    broadcast: cache,
    channel: channels.liveBars('bench'),
    leading: () => ['yahoo'],
    symbols: () => [],
    deliver: (_symbol, json) => {
      const bar = JSON.parse(json) as { time: string; final: boolean; revised: boolean };
      if (!bar.final) {
        updates += 1;
        return;
      }
      if (!bar.revised) closeLatency.push(Date.now() - (Date.parse(bar.time) + MINUTE + GRACE_MS));
    },
    sink: { storeFinal: async (_list: readonly LiveBar[]) => undefined },
    sessionOf: barSessions(),
    graceMs: GRACE_MS,
    revisionWindowMs: 5 * MINUTE,
    logger,
  });
  bars.start();

  // Start 8 s before a minute ends: the run crosses the boundary.
  const startAt = Math.ceil((Date.now() + 9000) / MINUTE) * MINUTE - 8000;
  console.log(`live bars bench: ${SYMBOLS} symbols x ${RATE} ticks/s for ${SECONDS} s; starting at ${new Date(startAt).toISOString()} (waits ${((startAt - Date.now()) / 1000).toFixed(0)} s)`);
  await new Promise((resolve) => setTimeout(resolve, startAt - Date.now()));

  const dayVolume = new Array<number>(SYMBOLS).fill(1_000_000);
  const perStep = (SYMBOLS * RATE * STEP_MS) / 1000;
  let fed = 0;
  let acceptMs = 0;
  let carry = 0;
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const endAt = t0 + SECONDS * 1000;
  await new Promise<void>((resolve) => {
    const step = () => {
      const now = performance.now();
      if (now >= endAt) {
        resolve();
        return;
      }
      // Ticks due by now at the configured rate, spread over the symbols round-robin.
      const due = Math.floor(((now - t0) / 1000) * SYMBOLS * RATE) - fed + carry;
      carry = 0;
      const wall = Date.now();
      const a = performance.now();
      for (let i = 0; i < due; i++) {
        const s = next;
        next = (next + 1) % SYMBOLS;
        dayVolume[s]! += 100 + ((fed * 7919) % 900);
        bars.accept({ symbol: symbols[s]!, price: 100 + ((fed * 37) % 23) * 0.25, timeMs: wall, dayVolume: dayVolume[s]! }, 'yahoo');
        fed += 1;
      }
      acceptMs += performance.now() - a;
      setTimeout(step, STEP_MS);
    };
    step();
  });
  const cpu = process.cpuUsage(cpu0);
  const wallS = (performance.now() - t0) / 1000;
  // The last bars become final after the feed: wait for them (minute end plus grace), then a little more.
  const lastMinuteEnd = Math.ceil(Date.now() / MINUTE) * MINUTE;
  const finalsExpected = closeLatency.length + SYMBOLS;
  const waitUntil = Math.min(lastMinuteEnd + GRACE_MS + 3000, Date.now() + 5000);
  while (Date.now() < waitUntil && closeLatency.length < finalsExpected) await new Promise((resolve) => setTimeout(resolve, 100));
  // A Redis that stopped answering in time (a loaded machine) puts the cache in memory: the figures then are not Redis's.
  const mode = cache.status().mode;
  await bars.close();
  await cache.close();
  await redis.stop();

  const sorted = [...closeLatency].sort((x, y) => x - y);
  const cpuUs = (cpu.user + cpu.system) / fed;
  console.log(`fed ${fed} ticks in ${wallS.toFixed(1)} s (${(fed / wallS).toFixed(0)}/s, target ${SYMBOLS * RATE}/s, ${perStep} per ${STEP_MS} ms step)`);
  console.log(`CPU per tick (whole process: feed, builder, Redis writes, bus): ${cpuUs.toFixed(1)} µs (user ${(cpu.user / fed).toFixed(1)}, system ${(cpu.system / fed).toFixed(1)}); ${(((cpu.user + cpu.system) / 1e6 / wallS) * 100).toFixed(1)} % of one core`);
  console.log(`time inside accept per tick (builder + bookkeeping): ${((acceptMs * 1000) / fed).toFixed(2)} µs`);
  console.log(`open-bar updates received: ${updates} (at most 1/s per symbol: bound ${Math.ceil(SYMBOLS * (wallS + 1))})`);
  console.log(`bar-close latency (minute end + grace -> final bar received), ${sorted.length} final bars: min ${sorted[0]} ms, p50 ${percentile(sorted, 50)} ms, p99 ${percentile(sorted, 99)} ms, max ${sorted[sorted.length - 1]} ms`);
  console.log(`cache at the end: ${mode}${mode === 'redis' ? '' : ' (Redis stopped answering in time during the run: not a Redis figure, run again)'}; load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
}

await main();
