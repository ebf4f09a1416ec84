/**
 * `mds history prune` as a process over a real SQLite file: it removes the bars older than each
 * interval's HISTORY_KEEP_<INTERVAL> with their covered spans, says what it did per interval, and
 * refuses a bad keep with one line naming the variable.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { cliEnv } from '../helpers/cli-env.js';
import { MDS_BIN } from '../helpers/serve-process.js';

const DAY_MS = 86_400_000;
const SOURCE = { provider: 'yahoo', fetchedAtMs: Date.now() };

let dir: string;
let env: NodeJS.ProcessEnv;

function mds(args: string[], extra: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [MDS_BIN, ...args], { cwd: dir, env: { ...env, ...extra }, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'mds-prune-cli-'));
  env = cliEnv(dir, 'prune-cli-test-secret-0123456789abcdef');
  expect(mds(['init']).code).toBe(0);
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('mds history prune', () => {
  it('when 1h bars are older than HISTORY_KEEP_1H, then they and their covered span go; daily bars (forever) stay; each interval is reported', async () => {
    const nowMs = Date.now();
    const db = await openUserStore(env.DATABASE_URL!, { runMigrations: true });
    try {
      // Ten hourly bars 100 days ago and ten an hour apart ending now; ten daily bars 10 years ago.
      const hourly = (fromMs: number) => Array.from({ length: 10 }, (_, i) => ({ timeMs: fromMs + i * 3_600_000, open: 1, high: 2, low: 0.5, close: 1.5, adjClose: null, volume: 1 }));
      await db.candles.putCandles('AAPL', '1h', [...hourly(nowMs - 100 * DAY_MS), ...hourly(nowMs - 10 * 3_600_000)], SOURCE);
      await db.candles.markCovered('AAPL', '1h', { startMs: nowMs - 100 * DAY_MS, endMs: nowMs }, SOURCE);
      await db.candles.putCandles('AAPL', '1d', hourly(nowMs - 3650 * DAY_MS).map((c, i) => ({ ...c, timeMs: nowMs - 3650 * DAY_MS + i * DAY_MS })), SOURCE);
    } finally {
      await db.close();
    }

    const pruned = mds(['history', 'prune'], { HISTORY_KEEP_1H: '30d' });
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stderr).toBe('');
    const lines = pruned.stdout.trim().split('\n');
    expect(lines).toHaveLength(8);
    expect(lines).toContainEqual(expect.stringMatching(/^1h: 10 bars before \d{4}-\d\d-\d\dT[\d:.]+Z removed \(HISTORY_KEEP_1H=30 days\)$/));
    expect(lines).toContainEqual(expect.stringMatching(/^1m: 0 bars before .* removed \(HISTORY_KEEP_1M=730 days\)$/));
    expect(lines).toContain('1d: kept forever (HISTORY_KEEP_1D=forever)');

    const after = await openUserStore(env.DATABASE_URL!, { runMigrations: false });
    try {
      expect(await after.candles.countCandles('AAPL', '1h', { startMs: 0, endMs: nowMs + DAY_MS })).toBe(10);
      const [span] = await after.candles.coverage('AAPL', '1h', { startMs: 0, endMs: nowMs + DAY_MS });
      expect(span!.startMs).toBeGreaterThanOrEqual(nowMs - 30 * DAY_MS);
      expect(await after.candles.countCandles('AAPL', '1d', { startMs: 0, endMs: nowMs })).toBe(10);
    } finally {
      await after.close();
    }
    // Run again: nothing is left to remove.
    expect(mds(['history', 'prune'], { HISTORY_KEEP_1H: '30d' }).stdout).toMatch(/^1h: 0 bars before .* removed \(HISTORY_KEEP_1H=30 days\)$/m);
  }, 120_000);

  it('when a keep is not a duration, then one line names the variable and the command exits 2', () => {
    const bad = mds(['history', 'prune'], { HISTORY_KEEP_1M: 'two years' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^Error: .*HISTORY_KEEP_1M="two years": must be a whole number of days, weeks or years \(90d, 12w, 2y\) or forever\n$/);
    expect(bad.stdout).toBe('');
  });
});
