/**
 * The compute pool on real worker threads (PiscinaComputePool, started from the TypeScript sources as
 * vitest runs them, so its threads load the worker through tsx): answers equal to the same task run
 * on this thread, the bounded queue (refusal with Retry-After, a later page waiting for room), an
 * abort while waiting, small tasks on the calling thread, and the shutdown.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { candleColumns } from '../../src/domain/candle-columns.js';
import { parseStudies } from '../../src/domain/indicators/catalogue.js';
import { indicatorsAnswer, studySpecs } from '../../src/domain/indicators/answer.js';
import { etagOf } from '../../src/domain/sent-json.js';
import { ServiceBusyError } from '../../src/domain/errors.js';
import type { IndicatorTask, PageExportTask } from '../../src/domain/ports/compute.js';
import type { StoredCandle } from '../../src/domain/ports/history-store.js';
import { PiscinaComputePool } from '../../src/infra/compute/piscina-compute-pool.js';
import { runTask } from '../../src/infra/compute/tasks.js';
import { exportPart } from '../../src/infra/compute/export-files.js';

const T0 = Date.UTC(2026, 0, 5);

/** A deterministic random walk of one-minute bars. */
function bars(count: number, seed = 1): StoredCandle[] {
  let x = seed;
  const random = () => ((x = (x * 16807) % 2147483647) - 1) / 2147483646;
  let price = 100;
  return Array.from({ length: count }, (_, i) => {
    const open = price;
    price *= 1 + (random() - 0.5) * 0.004;
    const close = price;
    return { timeMs: T0 + i * 60_000, open, high: Math.max(open, close) * (1 + random() * 0.001), low: Math.min(open, close) * (1 - random() * 0.001), close, adjClose: i % 7 === 0 ? null : close, volume: i % 11 === 0 ? null : Math.round(random() * 1e6) };
  });
}

function indicatorTask(count: number, studies = 'adx:300,adx:299,adx:298,sma:20,macd,bbands,vwap,obv', seed = 1): IndicatorTask {
  const all = bars(count, seed);
  return {
    warmup: candleColumns(all.slice(0, Math.floor(count / 2))),
    candles: candleColumns(all.slice(Math.floor(count / 2))),
    actions: [],
    adjust: 'splits',
    studies: studySpecs(parseStudies(studies, true)),
    market: 'CRYPTO',
    symbol: 'BTC-USD',
    interval: '1m',
    source: 'simulated',
    updatedAt: '2026-01-05T00:00:00.000Z',
  };
}

let pool: PiscinaComputePool | undefined;
afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

describe('PiscinaComputePool', () => {
  it('when tasks run on worker threads, then each answer equals the same task run on this thread, and the columns were moved, not copied', async () => {
    pool = new PiscinaComputePool({ threads: 2, maxQueue: 4 });
    const sent = indicatorTask(20_000);
    const expected = indicatorsAnswer(indicatorTask(20_000));
    const answer = await pool.indicators(sent);
    expect(answer.sent.body.toString('utf8') === expected, 'the JSON equals the one written on this thread').toBe(true);
    // Encoded and hashed on the thread: the bytes are the JSON's, the ETag theirs.
    expect(answer.sent.body.equals(Buffer.from(expected, 'utf8'))).toBe(true);
    expect(answer.sent.etag).toBe(etagOf(Buffer.from(expected, 'utf8')));
    // Transferred to the thread: the caller's arrays are left empty.
    expect(sent.candles.close.length).toBe(0);
    expect(sent.warmup.close.length).toBe(0);

    for (const format of ['csv', 'arrow'] as const) {
      for (const first of [true, false]) {
        const page = (): PageExportTask => ({ format, candles: candleColumns(bars(12_000, 3)), actions: [{ kind: 'split', timeMs: T0 + 6000 * 60_000, numerator: 4, denominator: 1 }], adjust: 'none', first });
        const part = await pool.exportPage(page());
        const local = exportPart(format, first, runTask({ name: 'exportPage', input: page() }));
        // Buffer.equals: a deep comparison of a megabyte takes vitest tens of seconds.
        expect(Buffer.from(part.body).equals(Buffer.from(local.body)), `${format} body, first=${first}`).toBe(true);
        expect(Buffer.from(part.end).equals(Buffer.from(local.end)), `${format} end`).toBe(true);
      }
    }
  });

  it('when more tasks arrive than threads and queue hold, then the extra ones are refused at once with ServiceBusyError and a Retry-After, and the others complete', async () => {
    pool = new PiscinaComputePool({ threads: 1, maxQueue: 1 });
    const tasks = [1, 2, 3, 4].map((seed) => pool!.indicators(indicatorTask(30_000, undefined, seed)));
    const settled = await Promise.allSettled(tasks);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected']);
    for (const refused of settled.slice(2)) {
      const reason = (refused as PromiseRejectedResult).reason as ServiceBusyError;
      expect(reason).toBeInstanceOf(ServiceBusyError);
      expect(reason.code).toBe('SERVICE_BUSY');
      expect(reason.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(reason.message).toMatch(/compute pool is full: retry in \d+ seconds/);
    }
    expect(pool.load).toEqual({ running: 0, waiting: 0, reserved: 0 });
  });

  it('when the queue is full, then a task that may wait (a later export page) waits for room instead of failing', async () => {
    pool = new PiscinaComputePool({ threads: 1, maxQueue: 0 });
    const running = pool.indicators(indicatorTask(30_000));
    const page = pool.exportPage({ format: 'csv', candles: candleColumns(bars(5000)), actions: [], adjust: 'splits', first: true }, { whenFull: 'wait' });
    const refused = pool.exportPage({ format: 'csv', candles: candleColumns(bars(5000)), actions: [], adjust: 'splits', first: true });
    await expect(refused).rejects.toBeInstanceOf(ServiceBusyError);
    expect(pool.load).toEqual({ running: 1, waiting: 1, reserved: 0 });
    await running;
    expect(((await page).body as string).split('\r\n')[0]).toBe('time,open,high,low,close,adj_close,volume');
  });

  it('when a waiting task is aborted (its client went away), then it leaves the queue without running and the others go on', async () => {
    pool = new PiscinaComputePool({ threads: 1, maxQueue: 2 });
    const running = pool.indicators(indicatorTask(30_000));
    const controller = new AbortController();
    const dropped = pool.indicators(indicatorTask(30_000, undefined, 2), { signal: controller.signal });
    const next = pool.indicators(indicatorTask(30_000, undefined, 3));
    expect(pool.load).toEqual({ running: 1, waiting: 2, reserved: 0 });
    controller.abort(new Error('client gone'));
    await expect(dropped).rejects.toThrow('client gone');
    expect(pool.load).toEqual({ running: 1, waiting: 1, reserved: 0 });
    await Promise.all([running, next]);
    expect(pool.load).toEqual({ running: 0, waiting: 0, reserved: 0 });
  });

  it('when places are reserved before the input is read, then a full pool refuses the reservation itself, a reserved task waits for a thread, and a released place is room again', async () => {
    pool = new PiscinaComputePool({ threads: 1, maxQueue: 1 });
    expect(pool.reserve(100), 'a task that small runs inline and needs no place').toBeUndefined();
    const first = pool.reserve(30_000)!;
    const second = pool.reserve(30_000)!;
    expect(() => pool!.reserve(30_000)).toThrow(ServiceBusyError);
    expect(pool.load).toEqual({ running: 0, waiting: 0, reserved: 2 });
    // A task without a place finds the thread free and runs; the reserved ones would wait for it.
    const unreserved = pool.indicators(indicatorTask(30_000, undefined, 4));
    await expect(pool.indicators(indicatorTask(30_000, undefined, 5)), 'the queue holds the two places').rejects.toBeInstanceOf(ServiceBusyError);
    const a = pool.indicators(indicatorTask(30_000, undefined, 2), { reservation: first });
    const b = pool.indicators(indicatorTask(30_000, undefined, 3), { reservation: second });
    expect(pool.load).toEqual({ running: 1, waiting: 2, reserved: 0 });
    first.release();
    await Promise.all([unreserved, a, b]);
    const third = pool.reserve(30_000)!;
    third.release();
    third.release();
    expect(pool.load).toEqual({ running: 0, waiting: 0, reserved: 0 });
  });

  it('when a task is smaller than the inline bound, then it runs on the calling thread: a full pool does not refuse it', async () => {
    pool = new PiscinaComputePool({ threads: 1, maxQueue: 0 });
    const running = pool.indicators(indicatorTask(30_000));
    const small = indicatorTask(100, 'sma:5,rsi:3');
    expect((await pool.indicators(small)).sent.body.toString('utf8')).toBe(indicatorsAnswer(indicatorTask(100, 'sma:5,rsi:3')));
    // Not transferred: it never left this thread.
    expect(small.candles.close.length + small.warmup.close.length).toBe(100);
    await running;
  });

  it('when the pool closes, then the task running finishes, the waiting ones are refused with ServiceBusyError, and later ones too', async () => {
    pool = new PiscinaComputePool({ threads: 1, maxQueue: 2 });
    const running = pool.indicators(indicatorTask(30_000));
    const waiting = pool.indicators(indicatorTask(30_000, undefined, 2));
    const closed = pool.close();
    await expect(waiting).rejects.toBeInstanceOf(ServiceBusyError);
    expect((await running).sent.body.toString('utf8')).toMatch(/^\{"success":true/);
    await closed;
    await expect(pool.indicators(indicatorTask(30_000))).rejects.toBeInstanceOf(ServiceBusyError);
  });
});
