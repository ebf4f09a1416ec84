/**
 * One FxRateStore contract, run on a real SQLite file and the real PostgreSQL (a schema per test):
 * the ECB's recorded historical slice written and read back rate for rate, and a day written again
 * replaced rather than doubled.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FxRateStore } from '../../src/domain/ports/fx-rates.js';
import { parseEurofxrefCsv } from '../../src/infra/market/ecb-reference-rates.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { ECB_HISTORY_CSV } from '../helpers/ecb-upstream.js';
import { createTestSchema, findPostgres, shouldRunPostgres } from '../helpers/postgres.js';
import { fixture } from '../helpers/replay-upstream.js';

const DAYS = parseEurofxrefCsv(fixture(ECB_HISTORY_CSV).toString('utf8'))!;

function contract(name: string, make: () => Promise<{ url: string; schema?: string; dispose(): Promise<void> }>): void {
  describe(`FxRateStore contract: ${name}`, () => {
    let target: Awaited<ReturnType<typeof make>>;
    let db: OpenedUserStore;
    let store: FxRateStore;

    beforeEach(async () => {
      target = await make();
      db = await openUserStore(target.url, { runMigrations: true, ...(target.schema ? { schema: target.schema } : {}) });
      store = db.fxRates;
    });
    afterEach(async () => {
      await db.close();
      await target.dispose();
    });

    it('when nothing is stored, then a read is empty', async () => {
      expect(await store.read('ecb')).toEqual([]);
    });

    it('when the recorded slice is written, then it reads back day for day and rate for rate, oldest first', async () => {
      await store.write('ecb', DAYS);
      const read = await store.read('ecb');
      expect(read.map((d) => d.date)).toEqual(DAYS.map((d) => d.date));
      read.forEach((d, i) => expect(new Map([...d.rates].sort())).toEqual(new Map([...DAYS[i]!.rates].sort())));
      expect(read.find((d) => d.date === '2024-06-26')?.rates.get('USD')).toBe(1.0689);
    });

    it('when a day is written again, then its rates are replaced, not doubled', async () => {
      await store.write('ecb', [{ date: '2024-06-26', rates: new Map([['USD', 1.07]]) }]);
      await store.write('ecb', [{ date: '2024-06-26', rates: new Map([['USD', 1.0689], ['JPY', 171.42]]) }]);
      expect(await store.read('ecb')).toEqual([{ date: '2024-06-26', rates: new Map([['USD', 1.0689], ['JPY', 171.42]]) }]);
      expect(await store.read('other')).toEqual([]);
    });
  });
}

contract('SQLite file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mds-fx-rates-'));
  return { url: `sqlite:${join(dir, 'mds.sqlite')}`, dispose: async () => rmSync(dir, { recursive: true, force: true }) };
});

const postgresUrl = await findPostgres();
if (shouldRunPostgres(postgresUrl, 'FxRateStore contract on PostgreSQL')) {
  contract('PostgreSQL', async () => {
    const schema = await createTestSchema(postgresUrl!);
    return { url: postgresUrl!, schema: schema.name, dispose: () => schema.drop() };
  });
}
