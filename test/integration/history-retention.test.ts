/**
 * The retention job (HISTORY_KEEP_<INTERVAL>) over a real SQLite store: it removes the candles older
 * than each interval's keep in bounded batches, lets other store work through between batches, and
 * leaves intervals kept forever alone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StoredCandle } from '../../src/domain/ports/history-store.js';
import { createLogger } from '../../src/infra/logger.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { pruneHistory } from '../../src/services/history-retention.js';

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
const NOW = Date.UTC(2026, 10, 29, 12, 0);
const SOURCE = { provider: 'yahoo', fetchedAtMs: NOW };

function bars(fromMs: number, count: number, stepMs: number): StoredCandle[] {
  return Array.from({ length: count }, (_, i) => ({ timeMs: fromMs + i * stepMs, open: 10 + i, high: 11 + i, low: 9 + i, close: 10.5 + i, adjClose: null, volume: i }));
}

let dir: string;
let db: OpenedUserStore;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mds-retention-'));
  db = await openUserStore(`sqlite:${join(dir, 'mds.sqlite')}`, { runMigrations: true });
});

afterEach(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('history retention', () => {
  it('when 1m bars are older than a 30-day keep, then they go in batches with store work answered between them, newer bars and daily bars stay', async () => {
    const keepMs = 30 * DAY_MS;
    const cutoff = NOW - keepMs;
    // 12,000 one-minute bars before the cutoff and 100 after it; 50 daily bars reaching far back.
    await db.candles.putCandles('BTC-USD', '1m', bars(cutoff - 12_000 * MINUTE_MS, 12_100, MINUTE_MS), SOURCE);
    await db.candles.markCovered('BTC-USD', '1m', { startMs: cutoff - 12_000 * MINUTE_MS, endMs: cutoff + 100 * MINUTE_MS }, SOURCE);
    await db.candles.putCandles('BTC-USD', '1d', bars(NOW - 400 * DAY_MS, 50, DAY_MS), SOURCE);

    const events: string[] = [];
    const pruning = pruneHistory({ store: db.candles, keepMs: { '1m': keepMs, '1d': null }, logger: createLogger({ level: 'silent' }), batchCandles: 5000, now: () => NOW }, (interval, removed) =>
      events.push(`${interval}:${removed}`),
    );
    // Asked while the first batch runs: answered before the second one.
    const read = db.candles.countCandles('BTC-USD', '1m', { startMs: 0, endMs: NOW }).then((n) => events.push(`read:${n}`));
    const results = await pruning;
    await read;

    expect(events).toEqual(['1m:5000', 'read:7100', '1m:5000', '1m:2000']);
    expect(results).toEqual([{ interval: '1m', beforeMs: cutoff, candles: 12_000 }]);
    expect(await db.candles.countCandles('BTC-USD', '1m', { startMs: 0, endMs: NOW })).toBe(100);
    expect(await db.candles.coverage('BTC-USD', '1m', { startMs: 0, endMs: NOW })).toEqual([{ startMs: cutoff, endMs: cutoff + 100 * MINUTE_MS }]);
    expect(await db.candles.countCandles('BTC-USD', '1d', { startMs: 0, endMs: NOW })).toBe(50);
  });

  it('when every keep is forever, then nothing is removed', async () => {
    await db.candles.putCandles('AAPL', '1m', bars(0, 10, MINUTE_MS), SOURCE);
    expect(await pruneHistory({ store: db.candles, keepMs: { '1m': null, '1d': null }, logger: createLogger({ level: 'silent' }), now: () => NOW })).toEqual([]);
    expect(await db.candles.countCandles('AAPL', '1m', { startMs: 0, endMs: NOW })).toBe(10);
  });
});
