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
 * The indicators figure is `mds serve` answering GET /api/indicators with ten studies over 10-year
 * windows of stored daily bars (the representation cache missed: each request a window of its own),
 * alternating with history reads of the same windows in the same run; target: p99 at most 2x history's.
 * The currency figure (DESIGN 25) is the same 10-year history read as listed and with `currency=EUR`, alternating,
 * the representation cache missed; target: converted p99 at most 1.5x. BENCH_STORE_ONLY=currency runs it alone.
 * BENCH_STORE_ONLY=indicators runs that figure alone (=http the history-over-HTTP one); BENCH_STORE_READS sets
 * the reads per figure (default 2,000).
 * The daily bars are realistic: stamped at the opens of the US exchange's sessions (no weekends or
 * holidays, by src/domain/market-calendar.ts), prices the data-quality validator keeps untouched (checked
 * before each figure), written as the provider `mds serve` runs here (`simulated`), so its provenance
 * rule keeps them: the history and indicators reads of a 10-year window both answer the same 2,520 bars.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { CandleStore, StoredCandle } from '../src/domain/ports/history-store.js';
import { openUserStore, type OpenedUserStore } from '../src/infra/db/typeorm-user-store.js';
import { sessionsBetween } from '../src/domain/market-calendar.js';
import { validateHistory } from '../src/domain/quality/validate-history.js';
import type { History } from '../src/domain/ports/market-data.js';
import type { RateDay } from '../src/domain/ports/fx-rates.js';
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
const READS = Number(process.env.BENCH_STORE_READS ?? 2000);
/** Ten studies at their usual periods, as a chart asks for them. */
const TEN_STUDIES = 'sma:20,ema:50,wma:20,rsi:14,macd:12:26:9,bbands:20:2,stoch:14:3:3,atr:14,adx:14,cci:20';
const LARGE_CANDLES = Number(process.env.BENCH_STORE_CANDLES ?? 10_000_000);
/**
 * The provider the stored bars are written as: `mds serve` here runs the default chain (`simulated`), and
 * the history store drops, on first read, a series stored by a provider outside its chain (provenance):
 * bars written as any other provider would be purged and refetched, and the figures would time that.
 */
const SOURCE = { provider: 'simulated', fetchedAtMs: Date.now() };
/** The first session of 2010 (a Monday, 4 January) at 00:00 UTC: every 10-year window starts here. */
const START = Date.UTC(2010, 0, 4);
/**
 * The stamps of the bench's daily bars: the opens of the US exchange's sessions (weekends and the
 * exchange's holidays left out, as an upstream answers them), 2000 to 2025: 26 years, all in the past.
 */
const US_OPENS = sessionsBetween('US', '2000-01-01', '2025-12-31').map((s) => s.segments[0]!.startMs);
/** Where START falls in US_OPENS. */
const START_INDEX = US_OPENS.findIndex((t) => t >= START);
/** The sessions from START on, 2,520 of them: 10 years of daily bars (2010-01-04 to 2019-12-30). */
const TEN_YEARS_OPENS = US_OPENS.slice(START_INDEX, START_INDEX + TEN_YEARS_DAILY);
/** The window of the `sessions` sessions from START: it ends a day past the last one's open. */
function sessionsSpan(sessions: number): { startMs: number; endMs: number } {
  return { startMs: START, endMs: US_OPENS[START_INDEX + sessions - 1]! + DAY_MS };
}
/** Sessions (four years) kept before the first window the HTTP figures read: the studies' warm-up. */
const WARMUP_SESSIONS = 1007;

/**
 * The `i`th 10-year daily window the HTTP figures read, as query parameters: 2,520 sessions starting
 * `i` sessions after the first one past the warm-up. The service snaps a window's bounds to the
 * interval's bar grid (the next session) before they become a cache key, so windows that differ by less
 * than a session would share one answer: each read shifts by a whole session to miss the representation
 * cache, and every window still holds exactly 2,520 bars.
 */
function slidingWindow(i: number): string {
  const first = WARMUP_SESSIONS + i;
  const last = first + TEN_YEARS_DAILY - 1;
  if (last >= US_OPENS.length) throw new Error(`BENCH_STORE_READS is at most ${US_OPENS.length - WARMUP_SESSIONS - TEN_YEARS_DAILY + 1}: the stored sessions hold no more distinct 10-year windows`);
  return `interval=1d&start=${new Date(US_OPENS[first]!).toISOString()}&end=${new Date(US_OPENS[last]! + DAY_MS).toISOString()}`;
}
/** Every stored session's bar, covered from the first to a day past the last: what the HTTP figures serve from. */
async function storeAllSessions(store: CandleStore, symbol: string): Promise<void> {
  await store.putCandles(symbol, '1d', clean(candles(US_OPENS)), SOURCE);
  await store.putInstrument(symbol, { currency: 'USD', timezone: 'America/New_York' }, SOURCE);
  await store.markCovered(symbol, '1d', { startMs: US_OPENS[0]!, endMs: US_OPENS[US_OPENS.length - 1]! + DAY_MS }, SOURCE);
}

/**
 * Bars at `times`: a bounded walk around 100 + seed (steps of at most 1.3), each bar's high and low
 * half a unit outside its open and close; prices that pass every data-quality rule (checked by `clean`).
 */
function candles(times: readonly number[], seed = 1): StoredCandle[] {
  const out: StoredCandle[] = new Array(times.length);
  let price = 100 + seed;
  for (let i = 0; i < times.length; i++) {
    const open = Math.round(price * 100) / 100;
    price = Math.max(1, price + Math.sin(i * 0.37 + seed) * 1.3);
    const close = Math.round(price * 100) / 100;
    out[i] = { timeMs: times[i]!, open, high: Math.max(open, close) + 0.5, low: Math.min(open, close) - 0.5, close, adjClose: close, volume: 1_000_000 + i };
  }
  return out;
}

/** Minute bars for the write figure: `count` consecutive minutes from START (written straight to the store, never validated). */
function minuteTimes(count: number): number[] {
  return Array.from({ length: count }, (_, i) => START + i * 60_000);
}

/**
 * `bars` as the data-quality validator judges a US daily answer: throws unless it keeps every bar
 * unchanged and finds nothing (no bar off-session, none repaired, dropped or suspect, no session missing).
 */
function clean(bars: StoredCandle[]): StoredCandle[] {
  const judged = validateHistory({ interval: '1d', currency: 'USD', market: 'US', candles: bars, splits: [], provider: SOURCE.provider, nowMs: Date.now() });
  if (judged.issues.length > 0 || judged.candles.length !== bars.length || judged.missingSessions > 0) {
    throw new Error(`the bench's bars do not pass the data-quality checks: ${judged.candles.length} of ${bars.length} kept, ${judged.missingSessions} sessions missing, ${JSON.stringify(judged.issues.slice(0, 3))}`);
  }
  return bars;
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

async function readLatency(store: CandleStore, symbols: string[], endMs: number, expected: number): Promise<{ p50Ms: number; p99Ms: number }> {
  const times: number[] = [];
  for (let i = 0; i < READS; i++) {
    const symbol = symbols[i % symbols.length]!;
    const started = performance.now();
    const got = await store.getCandles(symbol, '1d', { startMs: START, endMs });
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
async function historyReadLatency(store: CandleStore, symbol: string, endMs: number, expected: number): Promise<{ p50Ms: number; p99Ms: number }> {
  const history = new HistoryStore({
    store,
    fetch: () => Promise.reject(new Error('the window is covered: the bench expects no upstream call')),
    provider: () => SOURCE.provider,
  });
  const times: number[] = [];
  for (let i = 0; i < READS; i++) {
    const started = performance.now();
    const got = await history.read(symbol, '1d', { startMs: START, endMs }, 5001);
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
  const tenYears = sessionsSpan(TEN_YEARS_DAILY);
  await store.putCandles('DAILY', '1d', clean(candles(TEN_YEARS_OPENS)), SOURCE);
  await store.putInstrument('DAILY', { currency: 'USD', timezone: 'America/New_York' }, SOURCE);
  await store.markCovered('DAILY', '1d', tenYears, SOURCE);
  const tenYearsDaily = await readLatency(store, ['DAILY'], tenYears.endMs, TEN_YEARS_DAILY);
  const tenYearsDailyHistoryRead = await historyReadLatency(store, 'DAILY', tenYears.endMs, TEN_YEARS_DAILY);
  const writePerS = await writeRate(store, 'WRITE', candles(minuteTimes(WRITE_CANDLES)));
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
    for (const [i, symbol] of symbols.entries()) await store.putCandles(symbol, '1d', candles(TEN_YEARS_OPENS, i), SOURCE);
    const loadS = (performance.now() - started) / 1000;
    const total = await store.footprint();
    row.large = {
      candles: total.candles,
      loadCandlesPerS: Math.round((seriesCount * perSeries) / loadS),
      bytesPerCandle: Math.round((total.bytes / total.candles) * 10) / 10,
      oneYearDaily: await readLatency(store, symbols, sessionsSpan(252).endMs, 252),
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
  await storeAllSessions(db.candles, 'AAPL');
  await db.close();
  // A window a session later each time: 2,520 bars, a key the representation cache has not seen.
  const path = (i: number) => `/api/history/AAPL?${slidingWindow(i)}`;
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
    const bars = clean(candles(TEN_YEARS_OPENS));
    const answer: History = {
      symbol: 'Q',
      currency: 'USD',
      timezone: 'America/New_York',
      interval: '1d',
      candles: bars.map((c) => ({ time: new Date(c.timeMs).toISOString(), open: c.open, high: c.high, low: c.low, close: c.close, adj_close: c.adjClose, volume: c.volume })),
      events: { dividends: [], splits: [] },
    };
    const span = { startMs: TEN_YEARS_OPENS[0]!, endMs: sessionsSpan(TEN_YEARS_DAILY).endMs };
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

/**
 * Ten studies over 10 years of stored daily bars (four more years before them, for the warm-up), the
 * representation cache missed, beside history reads of the same windows, alternating in one run so
 * both meet the same machine: p99 of each and their ratio (target <= 2).
 */
async function indicatorRead(dir: string): Promise<Record<string, unknown>> {
  const env = { ...benchEnv(dir, 'redis://127.0.0.1:1/0'), DATABASE_URL: `sqlite:${join(dir, 'indicators.sqlite')}`, LOG_LEVEL: 'warn' };
  initService(env);
  const db = await openUserStore(env.DATABASE_URL, { runMigrations: true });
  // Four years of sessions before the first window (the warm-up), then the windows' sessions.
  await storeAllSessions(db.candles, 'AAPL');
  await db.close();
  // A window a session later each time: 2,520 bars, a key the representation cache has not seen.
  const window = slidingWindow;
  const server = await spawnServe(['--port', String(await freePort())], { env, stdout: 'ignore' });
  const history: number[] = [];
  const studies: number[] = [];
  let studyBytes = 0;
  let historyTimes: string[] = [];
  try {
    for (let i = 0; i < READS; i++) {
      for (const [path, times] of [
        [`/api/history/AAPL?${window(i)}`, history],
        [`/api/indicators/AAPL?${window(i)}&studies=${TEN_STUDIES}`, studies],
      ] as const) {
        const started = performance.now();
        const res = await fetch(`${server.url}${path}`);
        const bytes = await res.arrayBuffer();
        times.push(performance.now() - started);
        if (res.status !== 200 || res.headers.get('x-cache') !== 'MISS') throw new Error(`${path} answered ${res.status} ${res.headers.get('x-cache')}`);
        if (i === 0 && times === history) {
          const body = JSON.parse(Buffer.from(bytes).toString('utf8')) as { data: { candles: Array<{ time: string }> } };
          historyTimes = body.data.candles.map((c) => c.time);
          if (historyTimes.length !== TEN_YEARS_DAILY) throw new Error(`the history answer is not 10 years of daily bars: ${historyTimes.length} candles`);
        }
        if (i === 0 && times === studies) {
          studyBytes = bytes.byteLength;
          const body = JSON.parse(Buffer.from(bytes).toString('utf8')) as { data: { times: string[]; studies: Record<string, Array<number | null> | Record<string, Array<number | null>>> } };
          if (body.data.times.length !== TEN_YEARS_DAILY || Object.keys(body.data.studies).length !== 10) throw new Error(`the indicators answer is not ten studies over 10 years: ${body.data.times.length} times, ${Object.keys(body.data.studies).length} studies`);
          if (body.data.times.some((t, at) => t !== historyTimes[at])) throw new Error('the indicators answer and the history answer of the same window have different bar times');
          if ((body.data.studies['rsi:14'] as Array<number | null>)[0] === null) throw new Error("the window's first RSI is null: the warm-up was not read");
        }
      }
    }
  } finally {
    await server.stop();
  }
  history.sort((a, b) => a - b);
  studies.sort((a, b) => a - b);
  return {
    store: 'http (sqlite, representation cache missed): ten studies vs history, same windows',
    studies: TEN_STUDIES,
    reads: READS,
    indicatorsBodyBytes: studyBytes,
    tenYearsDailyHistory: { p50Ms: percentile(history, 50), p99Ms: percentile(history, 99) },
    tenYearsDailyTenStudies: { p50Ms: percentile(studies, 50), p99Ms: percentile(studies, 99) },
    p99StudiesOverHistory: Math.round((percentile(studies, 99) / percentile(history, 99)) * 100) / 100,
  };
}

/**
 * Reference rates for every weekday from ECB's first day (1999-01-04) to today, 30 currencies, as a walk
 * around plausible levels: the size of ECB's real history (about 200,000 rows), current, so the service
 * never looks for a newer publication while it is measured.
 */
function benchRates(): RateDay[] {
  const levels: Record<string, number> = { USD: 1.1, JPY: 140, GBP: 0.85, CHF: 1.05, SEK: 10.5, NOK: 10, DKK: 7.45, PLN: 4.3, CZK: 25, HUF: 350, RON: 4.8, BGN: 1.9558, ISK: 140, TRY: 20, AUD: 1.6, BRL: 5, CAD: 1.45, CNY: 7.8, HKD: 8.5, IDR: 16_000, ILS: 4, INR: 85, KRW: 1400, MXN: 20, MYR: 4.9, NZD: 1.75, PHP: 60, SGD: 1.45, THB: 38, ZAR: 19 };
  const days: RateDay[] = [];
  for (let t = Date.UTC(1999, 0, 4), i = 0; t <= Date.now(); t += DAY_MS) {
    const weekday = new Date(t).getUTCDay();
    if (weekday === 0 || weekday === 6) continue;
    i++;
    days.push({ date: new Date(t).toISOString().slice(0, 10), rates: new Map(Object.entries(levels).map(([c, level], k) => [c, Number((level * (1 + 0.1 * Math.sin(i * 0.013 + k))).toPrecision(6))])) });
  }
  return days;
}

/**
 * 10 years of stored daily bars read over HTTP with the representation cache missed, as listed and
 * converted to EUR (`currency=EUR`, every bar at its date's rate), alternating in one run on the same
 * windows: p99 of each and their ratio (target <= 1.5, DESIGN 25). The rates are in the database (the
 * service reads them once, in the warm-up reads); ECB_BASE_URL points nowhere, so nothing is fetched.
 */
async function currencyRead(dir: string): Promise<Record<string, unknown>> {
  const env = { ...benchEnv(dir, 'redis://127.0.0.1:1/0'), DATABASE_URL: `sqlite:${join(dir, 'currency.sqlite')}`, LOG_LEVEL: 'warn', ECB_BASE_URL: 'http://127.0.0.1:1' };
  initService(env);
  const db = await openUserStore(env.DATABASE_URL, { runMigrations: true });
  await storeAllSessions(db.candles, 'AAPL');
  await db.fxRates.write('ecb', benchRates());
  await db.close();
  const server = await spawnServe(['--port', String(await freePort())], { env, stdout: 'ignore' });
  const listed: number[] = [];
  const converted: number[] = [];
  const warmup = Math.min(20, Math.floor(READS / 10));
  let bodyBytes = 0;
  try {
    for (let i = 0; i < READS; i++) {
      for (const [path, times] of [
        [`/api/history/AAPL?${slidingWindow(i)}`, listed],
        [`/api/history/AAPL?${slidingWindow(i)}&currency=EUR`, converted],
      ] as const) {
        const started = performance.now();
        const res = await fetch(`${server.url}${path}`);
        const bytes = await res.arrayBuffer();
        const ms = performance.now() - started;
        if (res.status !== 200 || res.headers.get('x-cache') !== 'MISS') throw new Error(`${path} answered ${res.status} ${res.headers.get('x-cache')}`);
        if (i === 0 && times === converted) {
          bodyBytes = bytes.byteLength;
          const body = JSON.parse(Buffer.from(bytes).toString('utf8')) as { data: { currency: string; candles: unknown[]; fx?: { carried: number } } };
          if (body.data.currency !== 'EUR' || body.data.candles.length !== TEN_YEARS_DAILY || body.data.fx === undefined) throw new Error(`the converted answer is not 10 years of daily bars in EUR: ${body.data.currency}, ${body.data.candles.length} candles`);
        }
        if (i >= warmup) times.push(ms);
      }
    }
  } finally {
    await server.stop();
  }
  listed.sort((a, b) => a - b);
  converted.sort((a, b) => a - b);
  return {
    store: 'http (sqlite, representation cache missed): 10 years daily converted to EUR vs as listed, same windows',
    reads: listed.length,
    convertedBodyBytes: bodyBytes,
    tenYearsDailyListed: { p50Ms: percentile(listed, 50), p99Ms: percentile(listed, 99) },
    tenYearsDailyInEur: { p50Ms: percentile(converted, 50), p99Ms: percentile(converted, 99) },
    p99ConvertedOverListed: Math.round((percentile(converted, 99) / percentile(listed, 99)) * 100) / 100,
    p50ConvertedOverListed: Math.round((percentile(converted, 50) / percentile(listed, 50)) * 100) / 100,
  };
}

const rows: Array<Record<string, unknown>> = [];
const dir = mkdtempSync(join(tmpdir(), 'mds-bench-store-'));
const only = process.env.BENCH_STORE_ONLY?.trim() || undefined;
if (only !== undefined && !['quality', 'indicators', 'http', 'currency'].includes(only)) throw new Error(`BENCH_STORE_ONLY is quality, indicators, http or currency, not ${only}`);
try {
  if (only === undefined || only === 'quality') rows.push(await validationCost(dir));
  if (only === 'indicators') rows.push(await indicatorRead(dir));
  if (only === 'http') rows.push(await httpRead(dir));
  if (only === 'currency') rows.push(await currencyRead(dir));
  if (only === undefined) await others();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

async function others(): Promise<void> {
  rows.push(await httpRead(dir));
  rows.push(await indicatorRead(dir));
  rows.push(await currencyRead(dir));
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
