/** One UsageStore contract, run on a real SQLite file and the real PostgreSQL (a schema per test). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { UsageOperationRow, UsageRow, UsageStore } from '../../src/domain/ports/usage.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { createTestSchema, findPostgres, shouldRunPostgres } from '../helpers/postgres.js';

const row = (day: string, caller: string, requests: number, rateLimited = 0, callerKind: UsageRow['callerKind'] = 'api-key', points = requests): UsageRow => ({ day, callerKind, caller, requests, points, rateLimited });
const op = (day: string, caller: string, door: UsageOperationRow['door'], operation: string, requests: number, points: number, rateLimited = 0): UsageOperationRow => ({
  day,
  callerKind: 'api-key',
  caller,
  door,
  operation,
  requests,
  points,
  rateLimited,
});

function contract(name: string, make: () => Promise<{ url: string; schema?: string; dispose(): Promise<void> }>): void {
  describe(`UsageStore contract: ${name}`, () => {
    let target: Awaited<ReturnType<typeof make>>;
    let db: OpenedUserStore;
    let store: UsageStore;

    beforeEach(async () => {
      target = await make();
      db = await openUserStore(target.url, { runMigrations: true, ...(target.schema ? { schema: target.schema } : {}) });
      store = db.usage;
    });

    afterEach(async () => {
      await db.close();
      await target.dispose();
    });

    it('raiseTotals: when totals are written twice, then each count keeps the larger, and list gives newest day first', async () => {
      await store.raiseTotals([row('2026-11-24', 'k1', 10, 1), row('2026-11-25', 'k1', 5), row('2026-11-25', 'alice', 7, 0, 'user')]);
      // An instance that read an older total must not lower what another wrote.
      await store.raiseTotals([row('2026-11-25', 'k1', 3, 2), row('2026-11-24', 'k1', 12, 0)]);

      expect(await store.list('2026-11-01')).toEqual([row('2026-11-25', 'k1', 5, 2), row('2026-11-25', 'alice', 7, 0, 'user'), row('2026-11-24', 'k1', 12, 1)]);
      expect(await store.list('2026-11-25')).toHaveLength(2);
    });

    it('raiseTotals: when more rows come than one statement takes, then all are written', async () => {
      const many = Array.from({ length: 1203 }, (_, i) => row('2026-11-25', `key-${i}`, i + 1));
      await store.raiseTotals(many);
      const listed = await store.list('2026-11-25');
      expect(listed).toHaveLength(1203);
      expect(listed.reduce((sum, r) => sum + r.requests, 0)).toBe((1203 * 1204) / 2);
    });

    it('raiseTotals: when points are written twice, then the caller keeps the larger, apart from its requests', async () => {
      await store.raiseTotals([row('2026-11-25', 'k1', 4, 0, 'api-key', 30)]);
      await store.raiseTotals([row('2026-11-25', 'k1', 6, 0, 'api-key', 12)]);
      expect(await store.list('2026-11-25')).toEqual([row('2026-11-25', 'k1', 6, 0, 'api-key', 30)]);
    });

    it('raiseTotals: when totals by door and operation are written twice, then each count keeps the larger, and listOperations gives newest day first, then caller, door, operation', async () => {
      await store.raiseTotals(
        [row('2026-11-24', 'k1', 1), row('2026-11-25', 'k1', 6, 1), row('2026-11-25', 'k2', 1)],
        [op('2026-11-24', 'k1', 'rest', 'getQuote', 1, 1), op('2026-11-25', 'k1', 'rest', 'getQuotes', 2, 6, 1), op('2026-11-25', 'k1', 'ws', 'ws:subscribe', 4, 4), op('2026-11-25', 'k2', 'mcp', 'getQuote', 1, 1)],
      );
      // Another instance read older totals for one of them: nothing goes down, the rest go up.
      await store.raiseTotals([row('2026-11-25', 'k1', 7, 0)], [op('2026-11-25', 'k1', 'rest', 'getQuotes', 1, 9, 0), op('2026-11-25', 'k1', 'ws', 'ws:subscribe', 5, 5, 1)]);

      expect(await store.listOperations('2026-11-01')).toEqual([
        op('2026-11-25', 'k1', 'rest', 'getQuotes', 2, 9, 1),
        op('2026-11-25', 'k1', 'ws', 'ws:subscribe', 5, 5, 1),
        op('2026-11-25', 'k2', 'mcp', 'getQuote', 1, 1),
        op('2026-11-24', 'k1', 'rest', 'getQuote', 1, 1),
      ]);
      expect(await store.listOperations('2026-11-25')).toHaveLength(3);
      // One operation through two doors is two rows.
      await store.raiseTotals([], [op('2026-11-25', 'k2', 'rest', 'getQuote', 3, 3)]);
      expect((await store.listOperations('2026-11-25')).filter((r) => r.caller === 'k2').map((r) => [r.door, r.requests])).toEqual([
        ['mcp', 1],
        ['rest', 3],
      ]);
    });

    it('raiseTotals: when more operation rows come than one statement takes, then all are written', async () => {
      const many = Array.from({ length: 1203 }, (_, i) => op('2026-11-25', `key-${i % 7}`, 'rest', `operation${i}`, i + 1, 2 * (i + 1)));
      await store.raiseTotals([], many);
      const listed = await store.listOperations('2026-11-25');
      expect(listed).toHaveLength(1203);
      expect(listed.reduce((sum, r) => sum + r.points, 0)).toBe(1203 * 1204);
    });

    it('deleteBefore: when old days are pruned, then only the rows of those days go, their operation rows with them', async () => {
      await store.raiseTotals(
        [row('2026-08-01', 'k1', 1), row('2026-08-27', 'k1', 2), row('2026-08-28', 'k1', 3)],
        [op('2026-08-27', 'k1', 'rest', 'getQuote', 2, 2), op('2026-08-28', 'k1', 'rest', 'getQuote', 3, 3)],
      );
      expect(await store.deleteBefore('2026-08-28')).toBe(2);
      expect(await store.list('2000-01-01')).toEqual([row('2026-08-28', 'k1', 3)]);
      expect(await store.listOperations('2000-01-01')).toEqual([op('2026-08-28', 'k1', 'rest', 'getQuote', 3, 3)]);
      expect(await store.deleteBefore('2026-08-28')).toBe(0);
    });

    it('migrations: when the release before usage by operation wrote its rows, then they read with 0 points and its upserts still work', async () => {
      // The previous release's statement, word for word: it names no points column.
      const table = target.schema ? `"${target.schema}"."usage_daily"` : '"usage_daily"';
      const p = (n: number) => (target.schema ? `$${n}` : '?');
      const larger = target.schema ? 'GREATEST' : 'max';
      const previous =
        `INSERT INTO ${table} (day, caller_kind, caller, requests, rate_limited) VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}) ` +
        `ON CONFLICT (day, caller_kind, caller) DO UPDATE SET requests = ${larger}(${table}.requests, excluded.requests), rate_limited = ${larger}(${table}.rate_limited, excluded.rate_limited)`;
      await db.dataSource.query(previous, ['2026-11-25', 'api-key', 'old', 4, 1]);
      expect(await store.list('2026-11-25')).toEqual([row('2026-11-25', 'old', 4, 1, 'api-key', 0)]);
      await store.raiseTotals([row('2026-11-25', 'old', 5, 1, 'api-key', 5)]);
      await db.dataSource.query(previous, ['2026-11-25', 'api-key', 'old', 6, 1]);
      expect(await store.list('2026-11-25')).toEqual([row('2026-11-25', 'old', 6, 1, 'api-key', 5)]);
    });
  });
}

contract('SQLite file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mds-usage-'));
  return { url: `sqlite:${join(dir, 'mds.sqlite')}`, dispose: async () => rmSync(dir, { recursive: true, force: true }) };
});

const postgresUrl = await findPostgres();
if (shouldRunPostgres(postgresUrl, 'UsageStore contract on PostgreSQL')) {
  contract('PostgreSQL', async () => {
    const schema = await createTestSchema(postgresUrl!);
    return { url: postgresUrl!, schema: schema.name, dispose: () => schema.drop() };
  });
}
