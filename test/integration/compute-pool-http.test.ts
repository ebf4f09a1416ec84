/**
 * The compute pool behind the real service (DESIGN 24), over a socket, with the simulated provider's
 * one-minute bars of BTC-USD in the history store: the worst indicators request (10 studies of period
 * 500 over 3 days of 1-minute bars, 33,000 bars with the warm-up) answers byte for byte what the study
 * functions give when called directly on the stored bars; an export streamed in several pages is one
 * Arrow stream; a full queue answers 503 with Retry-After in the envelope, and the pool serves again
 * once it drains. The latency bound under load is in compute-pool-latency.test.ts (run alone).
 */
import { tableFromIPC } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeStudy, parseStudies, warmupOf } from '../../src/domain/indicators/catalogue.js';
import type { Series } from '../../src/domain/indicators/studies.js';
import { openUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { startTestService, type TestService } from '../helpers/service.js';

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** The worst request of issue 46: ten ADX of periods 491 to 500. */
const WORST_STUDIES = Array.from({ length: 10 }, (_, i) => `adx:${500 - i}`).join(',');

/** The instant the windows end from, fixed for the file so that windows read in turn fit together. */
const NOW_MS = Date.now();

/** A 3-day window of one-minute bars ending `daysAgo` days before `NOW_MS`, on the minute grid. */
function window(daysAgo: number, days = 3): { startMs: number; endMs: number; query: string } {
  const endMs = Math.floor((NOW_MS - daysAgo * DAY_MS) / MINUTE_MS) * MINUTE_MS;
  const startMs = endMs - days * DAY_MS;
  return { startMs, endMs, query: `interval=1m&start=${new Date(startMs).toISOString()}&end=${new Date(endMs).toISOString()}` };
}

describe('compute pool: the worst indicators request', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ CACHE_URL: 'redis://127.0.0.1:1/0', MARKET_DATA_PROVIDER: 'simulated' });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('when 10 studies of period 500 are asked over 3 days of 1-minute bars, then the answer is byte for byte the studies computed directly over the stored bars', async () => {
    const w = window(1);
    const res = await svc.fetch(`/api/indicators/BTC-USD?${w.query}&studies=${WORST_STUDIES}`);
    expect(res.status).toBe(200);
    const text = await res.text();
    const answer = JSON.parse(text) as { source: string; updated_at: string };

    // The same bars the service read: the window, and the warm-up just before it.
    const studies = parseStudies(WORST_STUDIES, true);
    const warmup = warmupOf(studies);
    const db = await openUserStore(svc.config.database.url, { runMigrations: false });
    const inWindow = await db.candles.getCandles('BTC-USD', '1m', { startMs: w.startMs, endMs: w.endMs });
    const before = await db.candles.getCandles('BTC-USD', '1m', { startMs: w.startMs - 30 * DAY_MS, endMs: w.startMs });
    await db.close();
    expect(inWindow.length).toBeGreaterThan(4000);
    expect(before.length, 'the store holds the whole warm-up').toBeGreaterThanOrEqual(warmup);
    const candles = [...before.slice(before.length - warmup), ...inWindow];
    const bars = { high: candles.map((c) => c.high), low: candles.map((c) => c.low), close: candles.map((c) => c.close), volume: candles.map((c) => c.volume ?? 0) };
    const computed: Record<string, Series | Record<string, Series>> = {};
    for (const study of studies) {
      const own = Math.min(warmup, study.definition.warmup(study.params));
      const from = warmup - own;
      const slice = { high: bars.high.slice(from), low: bars.low.slice(from), close: bars.close.slice(from), volume: bars.volume.slice(from) };
      computed[study.key] = computeStudy(study, { bars: slice, sessions: [] }, own);
    }
    const expected = JSON.stringify({
      success: true,
      data: { symbol: 'BTC-USD', interval: '1m', times: inWindow.map((c) => new Date(c.timeMs).toISOString()), studies: computed },
      source: answer.source,
      updated_at: answer.updated_at,
    });
    expect(text.length).toBe(expected.length);
    expect(text === expected, 'the answer equals the direct computation byte for byte').toBe(true);
    expect((computed['adx:500'] as Record<string, Series>)['adx']![0], 'the window starts warm').not.toBeNull();
  });

  it('when an export spans several pages of the store (over 10,000 candles), then its Arrow pages make one stream holding the CSV rows in order', async () => {
    // A 1m window over 7 days is served from the store only: two 6-day reads fill it first.
    for (const part of [window(1, 6), window(7, 6)]) {
      const res = await svc.fetch(`/api/history/BTC-USD?${part.query}&format=csv`);
      expect(res.status, await res.text()).toBe(200);
    }
    const w = window(1, 12);
    const csv = await svc.fetch(`/api/history/BTC-USD?${w.query}&format=csv`);
    expect(csv.status).toBe(200);
    const rows = (await csv.text()).trim().split('\r\n').slice(1);
    expect(rows.length).toBeGreaterThan(15_000);

    const arrow = await svc.fetch(`/api/history/BTC-USD?${w.query}&format=arrow`);
    expect(arrow.status).toBe(200);
    const table = tableFromIPC(new Uint8Array(await arrow.arrayBuffer()));
    expect(table.numRows).toBe(rows.length);
    expect(table.batches.length).toBeGreaterThan(1);
    const times = table.getChild('time')!.toArray() as BigInt64Array | Float64Array;
    const closes = table.getChild('close')!.toArray() as Float64Array;
    for (const i of [0, 9_999, 10_000, rows.length - 1]) {
      const [time, , , , close] = rows[i]!.split(',');
      expect(Number(times[i]), `row ${i}`).toBe(Date.parse(time!));
      expect(closes[i], `row ${i}`).toBe(Number(close));
    }
  });
});

describe('compute pool: a full queue', () => {
  let svc: TestService;
  beforeAll(async () => {
    // One thread, one task waiting: the third at once is refused.
    svc = await startTestService({ CACHE_URL: 'redis://127.0.0.1:1/0', MARKET_DATA_PROVIDER: 'simulated', WORKER_POOL_THREADS: '1', WORKER_POOL_QUEUE: '1' });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('when more exports arrive than the thread and the queue hold, then the extra ones are 503 with Retry-After in the envelope, and the pool answers again once drained', async () => {
    // A CSV of 3 days of bars with the worst studies' 30 columns: both JSON answers are cached after
    // the first call, so each later call is a task of ~0.1 s on the thread and almost nothing before it.
    const path = `/api/history/BTC-USD?${window(1).query}&format=csv&studies=${WORST_STUDIES}`;
    const first = await svc.fetch(path);
    expect(first.status).toBe(200);
    const csv = await first.text();

    const answers = await Promise.all(Array.from({ length: 8 }, () => svc.fetch(path)));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 503).length, `statuses ${statuses.join(',')}`).toBeGreaterThanOrEqual(1);
    expect(statuses.every((s) => s === 200 || s === 503), `statuses ${statuses.join(',')}`).toBe(true);
    for (const res of answers) {
      if (res.status === 200) {
        expect(await res.text()).toBe(csv);
        continue;
      }
      expect(res.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const body = (await res.json()) as { success: boolean; code: number; error: string; detail: string };
      expect(body).toMatchObject({ success: false, code: 503 });
      expect(body.error).toMatch(/compute pool is full: retry in \d+ seconds/);
      expect(body.detail).toBe(body.error);
    }

    const again = await svc.fetch(path);
    expect(again.status).toBe(200);
    expect(await again.text()).toBe(csv);
  });
});
