/**
 * The SQLite store's reader thread (`src/infra/db/sqlite-reader.ts`): a large window read there is the
 * bars the event loop's connection reads, a write is visible to it as soon as it resolved, and when the
 * thread cannot open the file the store still answers, from its own connection.
 */
import { existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { candlesOf } from '../../src/domain/candle-columns.js';
import type { StoredCandle } from '../../src/domain/ports/history-store.js';
import { SqliteReader } from '../../src/infra/db/sqlite-reader.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';

const T0 = Date.UTC(2024, 0, 2);
const MINUTE_MS = 60_000;
const SOURCE = { provider: 'yahoo', fetchedAtMs: Date.UTC(2024, 5, 1) };

function bars(n: number, from = 0): StoredCandle[] {
  return Array.from({ length: n }, (_, k) => {
    const i = k + from;
    return { timeMs: T0 + i * MINUTE_MS, open: 100 + i / 7, high: 101 + i / 7, low: 99 + i / 7, close: 100.5 + i / 7, adjClose: i % 4 === 0 ? null : 100.25 + i / 7, volume: i % 6 === 0 ? null : i };
  });
}

describe('SQLite reader thread', () => {
  let dir: string;
  let file: string;
  let db: OpenedUserStore;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-reader-'));
    file = join(dir, 'mds.sqlite');
    db = await openUserStore(`sqlite:${file}`, { runMigrations: true });
  });

  afterEach(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('read: when a window of 30,000 bars is read on the thread, then it is the bars the store reads on its own connection, null as NaN, within the limit', async () => {
    await db.candles.putCandles('BTC-USD', '1m', bars(30_000), SOURCE);
    const reader = new SqliteReader(file, 0);
    try {
      const span = { startMs: T0 + MINUTE_MS, endMs: T0 + 29_999 * MINUTE_MS };
      const columns = await reader.read(1, span, undefined);
      expect(columns.timeMs.length).toBe(29_998);
      expect(candlesOf(columns)).toEqual(await db.candles.getCandles('BTC-USD', '1m', span));
      expect(Number.isNaN(columns.adjClose[3]!)).toBe(true);
      expect(Number.isNaN(columns.volume[5]!)).toBe(true);
      expect(Array.from((await reader.read(1, span, 10)).timeMs)).toEqual(bars(10, 1).map((b) => b.timeMs));

      // A write that resolved is there for the thread's next read (WAL: its own connection, the last commit).
      await db.candles.putCandles('BTC-USD', '1m', bars(5, 30_000), SOURCE);
      const later = await reader.read(1, { startMs: T0, endMs: T0 + 40_000 * MINUTE_MS }, undefined);
      expect(later.timeMs.length).toBe(30_005);
      expect(later.close[30_004]).toBe(bars(1, 30_004)[0]!.close);
    } finally {
      await reader.close();
    }
  });

  it('read: when the thread cannot open the file, then the read fails with the reason, and nothing is left waiting', async () => {
    const reader = new SqliteReader(join(dir, 'absent.sqlite'), 0);
    try {
      await expect(reader.read(1, { startMs: 0, endMs: 1 }, undefined)).rejects.toThrow(/absent\.sqlite|unable to open|does not exist/i);
      await expect(reader.read(1, { startMs: 0, endMs: 1 }, undefined)).rejects.toThrow();
    } finally {
      await reader.close();
    }
  });

  it('getCandleColumns: when a window can hold more than 10,000 bars, then the store answers it through the reader thread with the bars it holds', async () => {
    const stored = bars(15_000);
    await db.candles.putCandles('BTC-USD', '1m', stored, SOURCE);
    const columns = await db.candles.getCandleColumns('BTC-USD', '1m', { startMs: T0, endMs: T0 + 20_000 * MINUTE_MS });
    expect(candlesOf(columns)).toEqual(stored);
    expect(candlesOf(await db.candles.getCandleColumns('BTC-USD', '1m', { startMs: T0, endMs: T0 + 20_000 * MINUTE_MS }, 11_000))).toEqual(stored.slice(0, 11_000));
  });

  it('getCandleColumns: when the reader thread cannot open the file (moved after the store opened it), then the store answers the same bars from its own connection', async () => {
    const stored = bars(12_000);
    await db.candles.putCandles('BTC-USD', '1m', stored, SOURCE);
    // The store's connection keeps its open file; the thread, started by the first large read, finds no file at the path.
    renameSync(file, join(dir, 'moved.sqlite'));
    expect(existsSync(file)).toBe(false);
    const columns = await db.candles.getCandleColumns('BTC-USD', '1m', { startMs: T0, endMs: T0 + 12_000 * MINUTE_MS });
    expect(candlesOf(columns)).toEqual(stored);
  });
});
