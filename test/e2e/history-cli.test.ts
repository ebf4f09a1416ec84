/** `mds history backfill` as a process, on a fresh SQLite file and the embedded simulated provider. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MDS_BIN } from '../helpers/serve-process.js';

let dir: string;
let env: NodeJS.ProcessEnv;

function mds(args: string[]) {
  const r = spawnSync(process.execPath, [MDS_BIN, ...args], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function storedBars(symbol: string): number {
  const db = new Database(join(dir, 'mds.sqlite'), { readonly: true });
  try {
    const row = db.prepare('SELECT count(*) AS n FROM candles JOIN candle_series ON candle_series.id = candles.series_id WHERE symbol = ?').get(symbol) as { n: number };
    return row.n;
  } finally {
    db.close();
  }
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mds-history-cli-'));
  env = { PATH: process.env.PATH, HOME: dir, DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`, MARKET_DATA_PROVIDER: 'simulated', METRICS_PORT: '0' };
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('mds history backfill', () => {
  it('when symbols are backfilled without a terminal, then a line per symbol, a summary, and exit 1 for the unknown one; a rerun stores nothing twice', () => {
    const first = mds(['history', 'backfill', 'AAPL', 'nosuch', '--since', '2024-01-01']);

    expect(first.code).toBe(1);
    const lines = first.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^AAPL: \d+ bars stored$/);
    expect(lines[1]).toBe('NOSUCH: failed: unknown symbol');
    expect(lines[2]).toMatch(/^backfill done: \d+ bars stored for 1 of 2 symbols \(1d since 2024-01-01\)$/);
    const stored = Number(/^AAPL: (\d+)/.exec(lines[0]!)![1]);
    expect(stored).toBeGreaterThan(400);
    expect(storedBars('AAPL')).toBe(stored);

    const again = mds(['history', 'backfill', 'AAPL', '--since', '2024-01-01']);
    expect(again.code).toBe(0);
    const rerun = Number(/^AAPL: (\d+) bars stored$/m.exec(again.stdout)![1]);
    // Only a bar that may still be forming is asked for again.
    expect(rerun).toBeLessThanOrEqual(1);
    expect(storedBars('AAPL')).toBe(stored);
  });

  it('when the input is bad, then one line on stderr and exit 2', () => {
    const none = mds(['history', 'backfill', '--since', '2024-01-01']);
    expect(none.code).toBe(2);
    expect(none.stderr.trim().split('\n')).toHaveLength(1);

    const interval = mds(['history', 'backfill', 'AAPL', '--interval', '2d', '--since', '2024-01-01']);
    expect(interval.code).toBe(2);
    expect(interval.stderr).toContain('--interval');

    const future = mds(['history', 'backfill', 'AAPL', '--since', '2999-01-01']);
    expect(future.code).toBe(2);
    expect(future.stderr.trim()).toBe('Error: --since must not be in the future (see --help)');

    const many = mds(['history', 'backfill', ...Array.from({ length: 101 }, (_, i) => `S${i}`), '--since', '2024-01-01']);
    expect(many.code).toBe(2);
    expect(many.stderr).toContain('must list 1 to 100 symbols');
  });
});
