/**
 * `mds history verify` as the CLI runs it (`openHistory` of the CLI's composition), over a real SQLite
 * file and Yahoo replayed from its recorded AAPL daily chart: a store holding one wrong bar is reported,
 * and with repair the store holds the right one after, with the raw bar in the data-issue record.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openHistory } from '../../src/cli/open-history.js';
import { loadConfig } from '../../src/config.js';
import { openUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { captureLogger, testEnv } from '../helpers/service.js';

const SEPT = { startMs: Date.UTC(2020, 8, 1), endMs: Date.UTC(2020, 9, 1) };
/** 2020-09-15's bar (AAPL closed at 115.54 that day). */
const WRONG_AT = Date.parse('2020-09-15T13:30:00.000Z');

describe('history verify, Yahoo replayed', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mds-verify-'));
  let upstream: FakeUpstream;

  beforeAll(async () => {
    upstream = await startFakeUpstream({ fixturesDir: resolve(import.meta.dirname, '..', 'fixtures', 'yahoo') });
  });
  afterAll(async () => {
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('when the store holds one wrong close, then verify reports it; with repair the store holds the provider\'s bar and the record keeps the raw one', async () => {
    const config = loadConfig(testEnv(dir, { MARKET_DATA_PROVIDER: 'yahoo', MARKET_DATA_BASE_URL: upstream.baseUrl }), { readFile: false });
    const { logger } = captureLogger();
    let opened = await openHistory(config, logger);
    const filled = await opened.backfill.fill({ symbols: ['AAPL'], interval: '1d', sinceMs: SEPT.startMs });
    expect(filled.failures).toEqual([]);
    await opened.close();

    const db = await openUserStore(config.database.url, { runMigrations: true });
    const [right] = await db.candles.getCandles('AAPL', '1d', { startMs: WRONG_AT, endMs: WRONG_AT + 1 });
    expect(right!.close).toBeCloseTo(115.54, 2);
    await db.candles.putCandles('AAPL', '1d', [{ ...right!, close: right!.close * 1.1, high: right!.high * 1.1 }], { provider: 'yahoo', fetchedAtMs: Date.now() });
    await db.close();

    opened = await openHistory(config, logger);
    try {
      const report = await opened.verify.verify('AAPL', '1d', SEPT, false);
      expect(report.providers).toEqual(['yahoo']);
      expect(report.checked).toBe(21);
      expect(report.divergences).toEqual([{ timeMs: WRONG_AT, stored: right!.close * 1.1, fetched: { yahoo: right!.close }, repaired: false }]);
      // Reported again, recorded once.
      expect((await opened.verify.verify('AAPL', '1d', SEPT, false)).divergences).toHaveLength(1);

      const repaired = await opened.verify.verify('AAPL', '1d', SEPT, true);
      expect(repaired.divergences.map((d) => d.repaired)).toEqual([true]);
      expect((await opened.verify.verify('AAPL', '1d', SEPT, false)).divergences).toEqual([]);
    } finally {
      await opened.close();
    }

    const after = await openUserStore(config.database.url, { runMigrations: true });
    try {
      const [fixed] = await after.candles.getCandles('AAPL', '1d', { startMs: WRONG_AT, endMs: WRONG_AT + 1 });
      expect(fixed).toEqual(right);
      const issues = await after.dataIssues.list({ symbol: 'AAPL', limit: 10 });
      const suspect = issues.filter((i) => i.action === 'suspect');
      expect(suspect).toHaveLength(1);
      // Yahoo gave the stored bar and disagrees with it now: named once, with both closes.
      const closes = { stored: { provider: 'yahoo', close: expect.closeTo(right!.close * 1.1, 6) }, others: [{ provider: 'yahoo', close: right!.close }] };
      expect(suspect[0]).toMatchObject({ rule: 'divergent', timeMs: WRONG_AT, providers: ['yahoo'], closes });
      const repairedIssue = issues.find((i) => i.action === 'repaired');
      expect(repairedIssue).toMatchObject({ rule: 'divergent', timeMs: WRONG_AT, providers: ['yahoo'], closes });
      expect(repairedIssue!.before!.close).toBeCloseTo(right!.close * 1.1, 6);
      expect(repairedIssue!.after!.close).toBe(right!.close);
    } finally {
      await after.close();
    }
  });
});
