/**
 * Two processes on one SQLite file (issue 38): another process holding the write lock past the
 * driver's busy timeout must delay a write, never fail it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StoredCandle } from '../../src/domain/ports/history-store.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';

const SOURCE = { provider: 'simulated', fetchedAtMs: Date.UTC(2024, 5, 27) };
const T0 = Date.UTC(2023, 0, 3, 14, 30);
const bar = (i: number): StoredCandle => ({ timeMs: T0 + i * 86_400_000, open: 10, high: 11, low: 9, close: 10.5, adjClose: 10.5, volume: 100 });

let dir: string;
let opened: OpenedUserStore;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mds-sqlite-shared-'));
  opened = await openUserStore(`sqlite:${join(dir, 'mds.sqlite')}`, { runMigrations: true });
});
afterEach(async () => {
  await opened.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Another process that takes the write lock (BEGIN IMMEDIATE), says so, holds it `holdMs`, then commits. */
function holdWriteLock(file: string, holdMs: number): Promise<{ done: Promise<number | null> }> {
  const script = `
    const Database = require('better-sqlite3');
    const db = new Database(${JSON.stringify(file)});
    db.exec('BEGIN IMMEDIATE');
    db.exec("INSERT INTO instruments (symbol, currency, timezone, provider, fetched_at) VALUES ('LOCK', 'USD', 'UTC', 'test', 0)");
    process.stdout.write('locked\\n');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${holdMs});
    db.exec('COMMIT');
    db.close();
  `;
  const child = spawn(process.execPath, ['-e', script], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] });
  const done = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      if (c.toString().includes('locked')) resolve({ done });
    });
    child.once('exit', (code) => reject(new Error(`the lock holder exited ${code} before locking`)));
  });
}

describe('SQLite shared by two processes', () => {
  it('when another process holds the write lock longer than the busy timeout, then a candle write waits for it and succeeds', async () => {
    const holder = await holdWriteLock(join(dir, 'mds.sqlite'), 6_000);

    const written = await opened.candles.putCandles('AAPL', '1d', [bar(0), bar(1), bar(2)], SOURCE);
    await opened.candles.markCovered('AAPL', '1d', { startMs: T0, endMs: T0 + 3 * 86_400_000 }, SOURCE);

    expect(await holder.done).toBe(0);
    expect(written).toBe(3);
    expect(await opened.candles.getCandles('AAPL', '1d', { startMs: T0, endMs: T0 + 3 * 86_400_000 })).toHaveLength(3);
    expect(await opened.candles.coverage('AAPL', '1d', { startMs: T0, endMs: T0 + 3 * 86_400_000 })).toEqual([{ startMs: T0, endMs: T0 + 3 * 86_400_000 }]);
  }, 30_000);
});
