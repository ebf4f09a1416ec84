/**
 * One DataIssueStore contract, run on a real SQLite file and the real PostgreSQL (a schema per test):
 * a `divergent` record keeps both sides' closes, and a record written before the `closes` column reads
 * without them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DataIssue, DataIssueStore } from '../../src/domain/quality/data-issues.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { createTestSchema, findPostgres, shouldRunPostgres } from '../helpers/postgres.js';

const T = Date.parse('2023-01-05T14:30:00.000Z');
const bar = (close: number) => ({ open: close, high: close, low: close, close, adjClose: close, volume: 1000 });
const divergent: DataIssue = {
  symbol: 'AAPL',
  interval: '1d',
  timeMs: T,
  rule: 'divergent',
  action: 'suspect',
  before: bar(125.02),
  after: bar(125.02),
  flag: 'divergent',
  providers: ['polygon', 'yahoo'],
  closes: { stored: { provider: 'polygon', close: 125.02 }, others: [{ provider: 'yahoo', close: 127.52 }] },
  recordedAtMs: 1_000,
};
const repaired: DataIssue = { symbol: 'AAPL', interval: '1d', timeMs: T + 86_400_000, rule: 'unit_100x', action: 'repaired', before: bar(12_962), after: bar(129.62), flag: 'repaired_unit', providers: ['yahoo'], recordedAtMs: 2_000 };

function contract(name: string, make: () => Promise<{ url: string; schema?: string; dispose(): Promise<void> }>): void {
  describe(`DataIssueStore contract: ${name}`, () => {
    let target: Awaited<ReturnType<typeof make>>;
    let db: OpenedUserStore;
    let store: DataIssueStore;
    const open = async () => {
      db = await openUserStore(target.url, { runMigrations: true, ...(target.schema ? { schema: target.schema } : {}) });
      store = db.dataIssues;
    };

    beforeEach(async () => {
      target = await make();
      await open();
    });

    afterEach(async () => {
      await db.close();
      await target.dispose();
    });

    it('record: when a divergent record and another are written, then both read back as written, closes only on the divergent one', async () => {
      expect(await store.record([divergent, repaired])).toBe(2);
      expect(await store.list({ limit: 10 })).toEqual([repaired, divergent]);
      expect(await store.forBars('AAPL', '1d', T, T + 1)).toEqual([divergent]);
    });

    it('migrations: when a record was written before the closes column, then it reads without closes and new records keep theirs', async () => {
      await db.dataSource.undoLastMigration({ transaction: 'each' });
      // The previous release's statement: it names no closes column.
      const table = target.schema ? `"${target.schema}"."data_issues"` : '"data_issues"';
      const p = (n: number) => (target.schema ? `$${n}` : '?');
      const { closes: _closes, ...old } = divergent;
      await db.dataSource.query(
        `INSERT INTO ${table} (symbol, bar_interval, t, rule, action, flag, before_bar, after_bar, providers, recorded_at) VALUES (${[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(p).join(', ')})`,
        [old.symbol, old.interval, old.timeMs, old.rule, old.action, old.flag, JSON.stringify(old.before), JSON.stringify(old.after), old.providers.join(','), old.recordedAtMs],
      );
      await db.close();
      await open();

      expect(await db.hasPendingMigrations()).toBe(false);
      expect(await store.list({ limit: 10 })).toEqual([old]);
      await store.record([{ ...divergent, recordedAtMs: 3_000 }]);
      expect((await store.list({ limit: 1 }))[0]!.closes).toEqual(divergent.closes);
    });
  });
}

contract('SQLite file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mds-data-issues-'));
  return { url: `sqlite:${join(dir, 'mds.sqlite')}`, dispose: async () => rmSync(dir, { recursive: true, force: true }) };
});

const postgresUrl = await findPostgres();
if (shouldRunPostgres(postgresUrl, 'DataIssueStore contract on PostgreSQL')) {
  contract('PostgreSQL', async () => {
    const schema = await createTestSchema(postgresUrl!);
    return { url: postgresUrl!, schema: schema.name, dispose: () => schema.drop() };
  });
}
