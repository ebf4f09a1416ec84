/** One HistoryJobStore contract, run on a real SQLite file and the real PostgreSQL (a schema per test). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HistoryJob, HistoryJobStore } from '../../src/domain/ports/history-store.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { createTestSchema, findPostgres, shouldRunPostgres } from '../helpers/postgres.js';

const AT = new Date(Date.UTC(2026, 10, 25, 12, 0, 0));
const later = (ms: number) => new Date(AT.getTime() + ms);

function job(id: string, overrides: Partial<HistoryJob> = {}): HistoryJob {
  return {
    id,
    kind: 'backfill',
    symbols: ['AAPL', '^GSPC'],
    interval: '1d',
    sinceMs: Date.UTC(2000, 0, 1),
    state: 'queued',
    doneSymbols: 0,
    candles: 0,
    currentSymbol: null,
    failures: [],
    createdBy: 'admin',
    createdAt: AT,
    updatedAt: AT,
    ...overrides,
  };
}

function contract(name: string, make: () => Promise<{ url: string; schema?: string; dispose(): Promise<void> }>): void {
  describe(`HistoryJobStore contract: ${name}`, () => {
    let target: Awaited<ReturnType<typeof make>>;
    let db: OpenedUserStore;
    let store: HistoryJobStore;

    beforeEach(async () => {
      target = await make();
      db = await openUserStore(target.url, { runMigrations: true, ...(target.schema ? { schema: target.schema } : {}) });
      store = db.historyJobs;
    });

    afterEach(async () => {
      await db.close();
      await target.dispose();
    });

    it('create: when a job is created, then get returns it as given; an unknown id is undefined', async () => {
      await store.create(job('11111111-1111-4111-8111-111111111111'));

      expect(await store.get('11111111-1111-4111-8111-111111111111')).toEqual(job('11111111-1111-4111-8111-111111111111'));
      expect(await store.get('22222222-2222-4222-8222-222222222222')).toBeUndefined();
    });

    it('claim: when two owners claim a queued job, then only the first gets it; after its heartbeat goes stale, another takes it over', async () => {
      const id = '33333333-3333-4333-8333-333333333333';
      await store.create(job(id));

      expect(await store.claim(id, 'instance-a', AT, later(-30_000))).toBe(true);
      expect(await store.claim(id, 'instance-b', later(1000), later(-29_000))).toBe(false);
      expect((await store.get(id))?.state).toBe('running');

      expect(await store.claim(id, 'instance-b', later(60_000), later(30_000))).toBe(true);
    });

    it('update: when progress is saved, then get shows it and the heartbeat keeps others from claiming the job', async () => {
      const id = '44444444-4444-4444-8444-444444444444';
      await store.create(job(id));
      await store.claim(id, 'instance-a', AT, later(-30_000));

      await store.update(id, { state: 'running', doneSymbols: 1, candles: 6543, currentSymbol: '^GSPC', failures: [{ symbol: 'AAPL', error: 'upstream refused' }] }, later(50_000));

      expect(await store.get(id)).toMatchObject({ doneSymbols: 1, candles: 6543, currentSymbol: '^GSPC', failures: [{ symbol: 'AAPL', error: 'upstream refused' }], updatedAt: later(50_000) });
      expect(await store.claim(id, 'instance-b', later(60_000), later(30_000))).toBe(false);
      expect(await store.unfinished(later(30_000))).toEqual([]);
      expect(await store.unfinished(later(60_000))).toEqual([id]);
    });

    it('unfinished: when jobs are queued, running, stale or done, then it lists the queued and the stale ones, oldest first', async () => {
      await store.create(job('55555555-5555-4555-8555-555555555555', { createdAt: later(2000) }));
      await store.create(job('66666666-6666-4666-8666-666666666666', { createdAt: later(1000) }));
      await store.create(job('77777777-7777-4777-8777-777777777777', { state: 'done', createdAt: later(0) }));

      expect(await store.unfinished(AT)).toEqual(['66666666-6666-4666-8666-666666666666', '55555555-5555-4555-8555-555555555555']);
    });
  });
}

contract('SQLite file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mds-jobs-'));
  return { url: `sqlite:${join(dir, 'mds.sqlite')}`, dispose: async () => rmSync(dir, { recursive: true, force: true }) };
});

const postgresUrl = await findPostgres();
if (shouldRunPostgres(postgresUrl, 'HistoryJobStore contract on PostgreSQL')) {
  contract('PostgreSQL', async () => {
    const schema = await createTestSchema(postgresUrl!);
    return { url: postgresUrl!, schema: schema.name, dispose: () => schema.drop() };
  });
}
