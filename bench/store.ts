/**
 * The history store's figures (part of `npm run bench`): bulk write candles/s on SQLite and
 * PostgreSQL, bytes per stored candle, the p99 of reading 10 years of daily bars (the candles alone,
 * and everything a representation-cache miss asks of the store), and the p99 of a
 * one-year daily range with 10 million candles stored in PostgreSQL. Targets: >= 100,000 candles/s on
 * SQLite, >= 50,000 on PostgreSQL, reads under 10 ms at p99. Results go to bench/results/store.json.
 * PostgreSQL is the machine's (127.0.0.1:5432, database `test`), in a schema of its own, dropped after.
 * The HTTP figure is `mds serve` answering GET /api/history for 10 years of stored daily bars with
 * the representation cache missed (every request a window of its own), one request at a time, beside
 * a bare node:http server sending the same bytes to the same client in the same run.
 * BENCH_STORE_CANDLES sets the size of the large PostgreSQL table (default 10,000,000).
 * The validation figure (DESIGN 20) is a 10-year daily history miss through `HistoryStore.read` (the
 * upstream's answer handed in from memory, validated, stored, read back) with the data-quality checks on
 * and off, interleaved in the same run on SQLite; target: on costs at most 5 % more. BENCH_QUALITY_MISSES
 * sets the misses per mode (default 200); BENCH_STORE_ONLY=quality runs that figure alone.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { CandleStore, StoredCandle } from '../src/domain/ports/history-store.js';
import { openUserStore, type OpenedUserStore } from '../src/infra/db/typeorm-user-store.js';
import { sessionsBetween } from '../src/domain/market-calendar.js';
import type { History } from '../src/domain/ports/market-data.js';
import { DataQuality } from '../src/services/data-quality.js';
import { HistoryStore } from '../src/services/history-store.js';
import { createTestSchema, findPostgres } from '../test/helpers/postgres.js';
import { freePort } from '../test/helpers/redis-server.js';
import { spawnServe } from '../test/helpers/serve-process.js';
import { benchEnv, initService, startBaseline } from './setup.js';

const ROOT = resolve(import.meta.dirname, '..');
const DAY_MS = 86_400_000;
const WRITE_CANDLES = 500_000;
const TEN_YEARS_DAILY = 2520;
const READS = 2000;
const LARGE_CANDLES = Number(process.env.BENCH_STORE_CANDLES ?? 10_000_000);
const SOURCE = { provider: 'bench', fetchedAtMs: Date.now() };
const START = Date.UTC(2010, 0, 4);

function candles(count: number, stepMs: number, seed = 1): StoredCandle[] {
  const out: StoredCandle[] = new Array(count);
  let price = 100 + seed;
  for (let i = 0; i < count; i++) {
    const open = Math.round(price * 100) / 100;
    price = Math.max(1, price + Math.sin(i * 0.37 + seed) * 1.3);
    const close = Math.round(price * 100) / 100;
    out[i] = { timeMs: START + i * stepMs, open, high: Math.max(open, close) + 0.5, low: Math.min(open, close) - 0.5, close, adjClose: close, volume: 1_000_000 + i };
  }
  return out;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function writeRate(store: CandleStore, symbol: string, all: StoredCandle[]): Promise<number> {
  const started = performance.now();
  // As a backfill writes: one provider page (here 10,000 bars) per call.
  for (let at = 0; at < all.length; at += 10_000) await store.putCandles(symbol, '1m', all.slice(at, at + 10_000), SOURCE);
  return all.length / ((performance.now() - started) / 1000);
}

async function readLatency(store: CandleStore, symbols: string[], spanMs: number, expected: number): Promise<{ p50Ms: number; p99Ms: number }> {
  const times: number[] = [];
  for (let i = 0; i < READS; i++) {
    const symbol = symbols[i % symbols.length]!;
    const started = performance.now();
    const got = await store.getCandles(symbol, '1d', { startMs: START, endMs: START + spanMs });
    times.push(performance.now() - started);
    if (got.length !== expected) throw new Error(`read ${got.length} candles of ${symbol}, expected ${expected}`);
  }
  times.sort((a, b) => a - b);
  return { p50Ms: percentile(times, 50), p99Ms: percentile(times, 99) };
}

/**
 * What a miss of the representation cache asks of the store, timed whole: `HistoryStore.read` of a
 * covered window (its coverage, candles, corporate actions and instrument), the upstream never called.
 */
async function historyReadLatency(store: CandleStore, symbol: string, spanMs: number, expected: number): Promise<{ p50Ms: number; p99Ms: number }> {
  const history = new HistoryStore({
    store,
    fetch: () => Promise.reject(new Error('the window is covered: the bench expects no upstream call')),
    provider: () => SOURCE.provider,
  });
  const times: number[] = [];
  for (let i = 0; i < READS; i++) {
    const started = performance.now();
    const got = await history.read(symbol, '1d', { startMs: START, endMs: START + spanMs }, 5001);
    times.push(performance.now() - started);
    if (got.candles.length !== expected || got.fetched || got.info === undefined) throw new Error(`history read gave ${got.candles.length} candles (fetched: ${got.fetched})`);
  }
  times.sort((a, b) => a - b);
  return { p50Ms: percentile(times, 50), p99Ms: percentile(times, 99) };
}

async function measure(name: string, db: OpenedUserStore, large: boolean) {
  const store = db.candles;
  // Reads first: measured after the bulk write, they would also time the database still settling it
  // (PostgreSQL's autovacuum and checkpoint of 500,000 new rows), which no read of a settled store pays.
  const tenYearsMs = TEN_YEARS_DAILY * DAY_MS;
  await store.putCandles('DAILY', '1d', candles(TEN_YEARS_DAILY, DAY_MS), SOURCE);
  await store.putInstrument('DAILY', { currency: 'USD', timezone: 'America/New_York' }, SOURCE);
  await store.markCovered('DAILY', '1d', { startMs: START, endMs: START + tenYearsMs }, SOURCE);
  const tenYearsDaily = await readLatency(store, ['DAILY'], tenYearsMs, TEN_YEARS_DAILY);
  const tenYearsDailyHistoryRead = await historyReadLatency(store, 'DAILY', tenYearsMs, TEN_YEARS_DAILY);
  const writePerS = await writeRate(store, 'WRITE', candles(WRITE_CANDLES, 60_000));
  const { candles: stored, bytes } = await store.footprint();
  const row: Record<string, unknown> = {
    store: name,
    writeCandlesPerS: Math.round(writePerS),
    bytesPerCandle: Math.round((bytes / stored) * 10) / 10,
    tenYearsDaily,
    tenYearsDailyHistoryRead,
  };
  if (large) {
    const perSeries = TEN_YEARS_DAILY;
    const seriesCount = Math.ceil(LARGE_CANDLES / perSeries);
    const symbols = Array.from({ length: seriesCount }, (_, i) => `S${i}`);
    const started = performance.now();
    for (const [i, symbol] of symbols.entries()) await store.putCandles(symbol, '1d', candles(perSeries, DAY_MS, i), SOURCE);
    const loadS = (performance.now() - started) / 1000;
    const total = await store.footprint();
    row.large = {
      candles: total.candles,
      loadCandlesPerS: Math.round((seriesCount * perSeries) / loadS),
      bytesPerCandle: Math.round((total.bytes / total.candles) * 10) / 10,
      oneYearDaily: await readLatency(store, symbols, 252 * DAY_MS, 252),
    };
  }
  return row;
}

/**
 * `READS` sequential GETs of `path(i)` on `url`, each timed to its last byte; the bytes of the first
 * answer, whose status and candle count are checked (the others' status only).
 */
async function timedReads(url: string, path: (i: number) => string): Promise<{ times: number[]; first: Buffer }> {
  const times: number[] = [];
  let first = Buffer.alloc(0);
  for (let i = 0; i < READS; i++) {
    const started = performance.now();
    const res = await fetch(`${url}${path(i)}`);
    // The answer as bytes: what the server spent, not the bench's own JSON parsing (checked once below).
    const bytes = await res.arrayBuffer();
    times.push(performance.now() - started);
    if (res.status !== 200) throw new Error(`history read answered ${res.status}`);
    if (i === 0) first = Buffer.from(bytes);
  }
  const body = JSON.parse(first.toString('utf8')) as { data?: { candles: unknown[] } };
  if (body.data?.candles.length !== TEN_YEARS_DAILY) throw new Error(`history read answered ${body.data?.candles.length} candles`);
  return { times: times.sort((a, b) => a - b), first };
}

/**
 * 10 years of daily bars of one symbol in a fresh SQLite file, served by `mds serve`: latency of reads
 * that miss the representation cache, and, in the same run, of a bare node:http server sending the
 * same bytes to the same client (before and after; the worse p99 of the two counts, as in run.ts):
 * what this machine allows for a 320 KB answer at all.
 */
async function httpRead(dir: string): Promise<Record<string, unknown>> {
  const env = { ...benchEnv(dir, 'redis://127.0.0.1:1/0'), DATABASE_URL: `sqlite:${join(dir, 'http.sqlite')}`, LOG_LEVEL: 'warn' };
  initService(env);
  const db = await openUserStore(env.DATABASE_URL, { runMigrations: true });
  const bars = candles(TEN_YEARS_DAILY, DAY_MS);
  const span = { startMs: START, endMs: START + TEN_YEARS_DAILY * DAY_MS };
  await db.candles.putCandles('AAPL', '1d', bars, SOURCE);
  await db.candles.putInstrument('AAPL', { currency: 'USD', timezone: 'America/New_York' }, SOURCE);
  await db.candles.markCovered('AAPL', '1d', span, SOURCE);
  await db.close();
  const end = new Date(span.endMs).toISOString();
  // A window a second earlier each time: the same bars, a key the representation cache has not seen.
  const path = (i: number) => `/api/history/AAPL?interval=1d&start=${new Date(START - 1000 * (i + 1)).toISOString()}&end=${end}`;
  const server = await spawnServe(['--port', String(await freePort())], { env, stdout: 'ignore' });
  let measured: { times: number[]; first: Buffer };
  try {
    measured = await timedReads(server.url, path);
  } finally {
    await server.stop();
  }
  const headers = { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(measured.first.length) };
  const bare = async () => {
    const baseline = await startBaseline({ '/': { body: measured.first, headers } });
    try {
      return (await timedReads(baseline.url, path)).times;
    } finally {
      baseline.child.kill();
    }
  };
  const [before, after] = [await bare(), await bare()];
  const baseline = percentile(before, 99) >= percentile(after, 99) ? before : after;
  const p99 = percentile(measured.times, 99);
  return {
    store: 'http (sqlite, representation cache missed)',
    bodyBytes: measured.first.length,
    tenYearsDaily: { p50Ms: percentile(measured.times, 50), p99Ms: p99 },
    bareNodeHttpSameBytes: { p50Ms: percentile(baseline, 50), p99Ms: percentile(baseline, 99) },
    p99OverBaselineMs: p99 - percentile(baseline, 99),
  };
}

const QUALITY_MISSES = Number(process.env.BENCH_QUALITY_MISSES ?? 200);

/**
 * A 10-year daily history miss with the data-quality checks on and off, alternating, each miss a new
 * symbol (so nothing is covered): the upstream's answer (2,520 US sessions, clean) is handed in from
 * memory, so the figure is the store's and the validator's work alone.
 */
async function validationCost(dir: string): Promise<Record<string, unknown>> {
  const db = await openUserStore(`sqlite:${join(dir, 'quality.sqlite')}`, { runMigrations: true });
  try {
    const sessions = sessionsBetween('US', '2010-01-04', '2020-12-31').slice(0, TEN_YEARS_DAILY);
    const bars = candles(TEN_YEARS_DAILY, DAY_MS);
    const answer: History = {
      symbol: 'Q',
      currency: 'USD',
      timezone: 'America/New_York',
      interval: '1d',
      candles: bars.map((c, i) => ({ time: new Date(sessions[i]!.segments[0]!.startMs).toISOString(), open: c.open, high: c.high, low: c.low, close: c.close, adj_close: c.adjClose, volume: c.volume })),
      events: { dividends: [], splits: [] },
    };
    const span = { startMs: sessions[0]!.segments[0]!.startMs, endMs: sessions[TEN_YEARS_DAILY - 1]!.segments[0]!.startMs + DAY_MS };
    const stores = (process.env.BENCH_QUALITY_AA === "1" ? [true, true] : [false, true]).map((enabled) => {
      const quality = new DataQuality({ store: db.dataIssues, enabled });
      return new HistoryStore({ store: db.candles, fetch: async () => answer, provider: () => 'bench', quality, now: () => span.endMs + 30 * DAY_MS });
    });
    const times: [number[], number[]] = [[], []];
    for (let i = 0; i < QUALITY_MISSES * 2; i++) {
      const mode = i % 2;
      const started = performance.now();
      const got = await stores[mode]!.read(`Q${i}`, '1d', span, 5001);
      times[mode]!.push(performance.now() - started);
      if (got.candles.length !== TEN_YEARS_DAILY || got.quality !== undefined) throw new Error(`validation bench: ${got.candles.length} candles, quality ${JSON.stringify(got.quality)}`);
    }
    const [off, on] = times.map((t) => t.sort((a, b) => a - b)) as [number[], number[]];
    const mean = (t: number[]) => t.reduce((a, b) => a + b, 0) / t.length;
    return {
      store: 'history miss, 10 years daily (sqlite): data-quality checks on vs off, same run',
      misses: QUALITY_MISSES,
      off: { p50Ms: percentile(off, 50), p99Ms: percentile(off, 99), meanMs: mean(off) },
      on: { p50Ms: percentile(on, 50), p99Ms: percentile(on, 99), meanMs: mean(on) },
      onOverOffMedian: percentile(on, 50) / percentile(off, 50),
      onOverOffMean: mean(on) / mean(off),
    };
  } finally {
    await db.close();
  }
}

const rows: Array<Record<string, unknown>> = [];
const dir = mkdtempSync(join(tmpdir(), 'mds-bench-store-'));
const only = process.env.BENCH_STORE_ONLY;
try {
  rows.push(await validationCost(dir));
  if (only !== 'quality') await others();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

async function others(): Promise<void> {
  rows.push(await httpRead(dir));
  const sqlite = await openUserStore(`sqlite:${join(dir, 'mds.sqlite')}`, { runMigrations: true });
  try {
    rows.push(await measure('sqlite', sqlite, false));
  } finally {
    await sqlite.close();
  }
  const url = await findPostgres();
  if (url === undefined) rows.push({ store: 'postgres', note: 'no PostgreSQL answered at 127.0.0.1:5432: not measured' });
  else {
    const schema = await createTestSchema(url);
    const pg = await openUserStore(url, { runMigrations: true, schema: schema.name });
    try {
      rows.push(await measure('postgres', pg, LARGE_CANDLES > 0));
    } finally {
      await pg.close();
      await schema.drop();
    }
  }
}

mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
writeFileSync(join(ROOT, 'bench', 'results', 'store.json'), `${JSON.stringify({ at: new Date().toISOString(), node: process.version, rows }, null, 2)}\n`);
console.log('\nhistory store (targets: write >= 100,000/s SQLite, >= 50,000/s PostgreSQL; reads < 10 ms p99)');
for (const row of rows) console.log(JSON.stringify(row));
console.log('written to bench/results/store.json');
