/** One UsageStore contract, run on a real SQLite file and the real PostgreSQL (a schema per test). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { UsageRow, UsageStore } from '../../src/domain/ports/usage.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { createTestSchema, findPostgres, shouldRunPostgres } from '../helpers/postgres.js';

const row = (day: string, caller: string, requests: number, rateLimited = 0, callerKind: UsageRow['callerKind'] = 'api-key'): UsageRow => ({ day, callerKind, caller, requests, rateLimited });

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

    it('deleteBefore: when old days are pruned, then only the rows of those days go', async () => {
      await store.raiseTotals([row('2026-08-01', 'k1', 1), row('2026-08-27', 'k1', 2), row('2026-08-28', 'k1', 3)]);
      expect(await store.deleteBefore('2026-08-28')).toBe(2);
      expect(await store.list('2000-01-01')).toEqual([row('2026-08-28', 'k1', 3)]);
      expect(await store.deleteBefore('2026-08-28')).toBe(0);
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
