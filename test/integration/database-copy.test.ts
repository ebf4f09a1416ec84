/**
 * `copyDatabase` in process, on real SQLite files and the real PostgreSQL (a schema per test): the copy
 * knows every table the migrations create, carries every value across exactly (SQLite -> PostgreSQL ->
 * SQLite gives back the same rows, byte for byte as SQLite holds them), resumes an interrupted copy
 * without copying a row twice, and refuses a target with rows of its own unless told to replace them.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { StoredCandle } from '../../src/domain/ports/history-store.js';
import { COPY_TABLES } from '../../src/infra/db/copy-tables.js';
import { copyDatabase, CopyRefusedError, schemaDrift } from '../../src/infra/db/database-copy.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { createTestSchema, findPostgres, schemaUrl, shouldRunPostgres, type TestSchema } from '../helpers/postgres.js';

const T0 = Date.UTC(2024, 0, 2, 14, 30);
const YAHOO = { provider: 'yahoo', fetchedAtMs: Date.UTC(2024, 5, 1, 12, 0, 0, 123) };
const CANDLES = 12_345;

/** Bars whose doubles need every bit (0.1 + 0.2, the largest and smallest doubles), with nulls among them. */
function candles(count: number): StoredCandle[] {
  return Array.from({ length: count }, (_, i) => ({
    timeMs: T0 + i * 60_000,
    open: 0.1 + 0.2 + i,
    high: i === 0 ? Number.MAX_VALUE : 1 / 3 + i,
    low: i === 1 ? Number.MIN_VALUE : Math.PI,
    close: 100 + i / 7,
    adjClose: i % 3 === 0 ? null : 99.99 + i / 11,
    volume: i % 5 === 0 ? null : 2 ** 52 + i,
  }));
}

/** Fills a fresh database through its stores, as the service and the CLI write it. */
async function fill(url: string): Promise<void> {
  const db = await openUserStore(url, { runMigrations: true });
  try {
    await db.store.create({ username: 'admin', passwordHash: '$2b$04$abcdefghijklmnopqrstuu1234567890abcdefghijklmnopqrstu', isAdmin: true });
    await db.store.create({ username: 'gone', passwordHash: 'x', isAdmin: false });
    await db.store.create({ username: 'Zoë "quoted" \'株\'', passwordHash: 'y', isAdmin: false });
    // A hole in the ids, as a deleted user leaves.
    await db.store.delete('gone');
    const at = new Date(Date.UTC(2024, 4, 6, 7, 8, 9, 987));
    await db.apiKeys.create({ id: randomUUID(), name: 'dashboard', role: 'read', digest: 'a'.repeat(64), rateLimitPerMinute: null, expiresAt: null, createdAt: at, lastUsedAt: null, createdBy: 'cli' });
    await db.apiKeys.create({ id: randomUUID(), name: 'bot\nline', role: 'admin', digest: 'b'.repeat(64), rateLimitPerMinute: 600, expiresAt: new Date(Date.UTC(2030, 0, 1)), createdAt: at, lastUsedAt: new Date(at.getTime() + 1), createdBy: 'user:admin' });
    await db.historyJobs.create({
      id: randomUUID(), kind: 'backfill', symbols: ['AAPL', '^GSPC'], interval: '1d', sinceMs: Date.UTC(2000, 0, 1), state: 'done', doneSymbols: 2, candles: 42,
      currentSymbol: null, failures: [{ symbol: '^GSPC', error: 'unknown symbol' }], createdBy: 'admin', createdAt: at, updatedAt: new Date(at.getTime() + 5),
    } as never);
    await db.candles.putCandles('AAPL', '1m', candles(CANDLES), YAHOO);
    await db.candles.putCandles('^GSPC', '1d', candles(40), { provider: 'polygon', fetchedAtMs: 1 });
    await db.candles.markCovered('AAPL', '1m', { startMs: T0, endMs: T0 + CANDLES * 60_000 }, YAHOO);
    await db.candles.putActions('AAPL', [{ kind: 'dividend', timeMs: Date.UTC(2023, 4, 12), amount: 0.24 }, { kind: 'split', timeMs: Date.UTC(2020, 7, 31), numerator: 4, denominator: 1 }], YAHOO);
    await db.candles.putInstrument('AAPL', { currency: 'USD', timezone: 'America/New_York' }, YAHOO);
    const bar = (close: number) => ({ open: close, high: close, low: close, close, adjClose: null, volume: 1000 });
    await db.dataIssues.record([
      { symbol: 'AAPL', interval: '1d', timeMs: T0, rule: 'unit_100x', action: 'repaired', before: bar(12_962), after: bar(129.62), flag: 'repaired_unit', providers: ['yahoo'], recordedAtMs: 2_000 },
      { symbol: 'AAPL', interval: '1d', timeMs: T0, rule: 'divergent', action: 'suspect', before: bar(1.5), after: bar(1.5), flag: 'divergent', providers: ['polygon', 'yahoo'], closes: { stored: { provider: 'polygon', close: 1.5 }, others: [{ provider: 'yahoo', close: 1.52 }] }, recordedAtMs: 3_000 },
    ] as never);
    await db.usage.raiseTotals(
      [{ day: '2024-06-01', callerKind: 'api-key', caller: 'k1', requests: 9_007_199_254_740_000, points: 12, rateLimited: 1 }],
      [{ day: '2024-06-01', callerKind: 'api-key', caller: 'k1', door: 'rest', operation: 'getHistory', requests: 7, points: 12, rateLimited: 1 }],
    );
    await db.fxRates.write('ecb', [{ date: '2024-06-26', rates: new Map([['USD', 1.0689], ['JPY', 171.42]]) }]);
  } finally {
    await db.close();
  }
}

/** Every row of every table of a SQLite file as better-sqlite3 reads it (no TypeORM, no canonical form). */
function sqliteRows(file: string): Record<string, unknown[]> {
  const db = new Database(file, { readonly: true });
  try {
    return Object.fromEntries(COPY_TABLES.map((t) => [t.name, db.prepare(`SELECT * FROM "${t.name}" ORDER BY ${t.key.map((k) => `"${k}"`).join(', ')}`).all()]));
  } finally {
    db.close();
  }
}

let pgBase: string | undefined;
beforeAll(async () => {
  pgBase = await findPostgres();
});

describe('mds db copy: the tables it knows', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mds-copy-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('when a SQLite database is migrated, then its tables and columns are exactly those the copy copies (a new table fails this test until the copy knows it)', async () => {
    expect(await schemaDrift(`sqlite:${join(dir, 'a.sqlite')}`)).toEqual([]);
  });

  it('when a PostgreSQL schema is migrated, then its tables and columns are exactly those the copy copies', async (ctx) => {
    if (!shouldRunPostgres(pgBase, 'copy tables on PostgreSQL')) return ctx.skip();
    const schema = await createTestSchema(pgBase!);
    try {
      expect(await schemaDrift(schemaUrl(pgBase!, schema.name))).toEqual([]);
    } finally {
      await schema.drop();
    }
  });

  it('when the source holds a table the copy does not know, then the copy stops naming it, before writing anything', async () => {
    const source = join(dir, 'a.sqlite');
    await fill(`sqlite:${source}`);
    const db = new Database(source);
    db.exec('CREATE TABLE later_feature (id INTEGER PRIMARY KEY)');
    db.close();
    await expect(copyDatabase({ sourceUrl: `sqlite:${source}`, targetUrl: `sqlite:${join(dir, 'b.sqlite')}` })).rejects.toThrow(/table later_feature is not one mds db copy knows/);
    expect(sqliteRows(join(dir, 'b.sqlite')).users).toEqual([]);
  });

  it('when the target also holds a table of another application, then the copy goes ahead and leaves it alone', async () => {
    const source = join(dir, 'a.sqlite');
    const target = join(dir, 'b.sqlite');
    await fill(`sqlite:${source}`);
    const other = new Database(target);
    other.exec("CREATE TABLE other_app (name TEXT); INSERT INTO other_app VALUES ('kept')");
    other.close();

    const reports = await copyDatabase({ sourceUrl: `sqlite:${source}`, targetUrl: `sqlite:${target}` });

    expect(reports.every((r) => r.matches)).toBe(true);
    expect(sqliteRows(target)).toEqual(sqliteRows(source));
    const after = new Database(target, { readonly: true });
    expect(after.prepare('SELECT name FROM other_app').pluck().all()).toEqual(['kept']);
    after.close();
  });

  it('when the target is the source, then the copy is refused', async () => {
    const url = `sqlite:${join(dir, 'a.sqlite')}`;
    await expect(copyDatabase({ sourceUrl: url, targetUrl: `sqlite:${join(dir, '.', 'a.sqlite')}` })).rejects.toBeInstanceOf(CopyRefusedError);
  });
});

describe('mds db copy: SQLite to PostgreSQL and back', () => {
  let dir: string;
  let schema: TestSchema;
  let pg: string;
  const opened: OpenedUserStore[] = [];

  beforeEach(async (ctx) => {
    if (!shouldRunPostgres(pgBase, 'copy between SQLite and PostgreSQL')) return ctx.skip();
    dir = mkdtempSync(join(tmpdir(), 'mds-copy-'));
    schema = await createTestSchema(pgBase!);
    pg = schemaUrl(pgBase!, schema.name);
  });
  afterEach(async () => {
    for (const db of opened.splice(0)) await db.close();
    await schema?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('when every table is copied to PostgreSQL and back to a new SQLite file, then the file holds the same rows as the original, and both stores answer alike', async () => {
    const source = join(dir, 'a.sqlite');
    const back = join(dir, 'back.sqlite');
    await fill(`sqlite:${source}`);

    const there = await copyDatabase({ sourceUrl: `sqlite:${source}`, targetUrl: pg, batchRows: 1000 });
    const home = await copyDatabase({ sourceUrl: pg, targetUrl: `sqlite:${back}`, batchRows: 777 });

    for (const reports of [there, home]) {
      expect(reports.map((r) => r.table)).toEqual(COPY_TABLES.map((t) => t.name));
      for (const r of reports) expect(r, r.table).toMatchObject({ matches: true, targetRows: r.sourceRows, copied: r.sourceRows });
    }
    expect(there.find((r) => r.table === 'candles')!.sourceRows).toBe(CANDLES + 40);
    // One serialization, one hash: the checksum of a table is the same in all three databases.
    expect(home.map((r) => r.sourceChecksum)).toEqual(there.map((r) => r.sourceChecksum));
    expect(sqliteRows(back)).toEqual(sqliteRows(source));

    const a = await openUserStore(`sqlite:${source}`, { runMigrations: true });
    const b = await openUserStore(pg, { runMigrations: true });
    opened.push(a, b);
    const span = { startMs: 0, endMs: Date.UTC(2100, 0, 1) };
    expect(await b.candles.getCandles('AAPL', '1m', span)).toEqual(await a.candles.getCandles('AAPL', '1m', span));
    expect(await b.candles.coverage('AAPL', '1m', span)).toEqual(await a.candles.coverage('AAPL', '1m', span));
    expect(await b.store.list()).toEqual(await a.store.list());
    expect(await b.apiKeys.list()).toEqual(await a.apiKeys.list());
    expect(await b.dataIssues.list({ limit: 10 })).toEqual(await a.dataIssues.list({ limit: 10 }));
    expect(await b.usage.listOperations('2024-01-01')).toEqual(await a.usage.listOperations('2024-01-01'));
    // The sequences moved past the copied ids: new rows on PostgreSQL take fresh ones.
    await b.store.create({ username: 'after-copy', passwordHash: 'z', isAdmin: false });
    await b.candles.putCandles('MSFT', '1d', candles(1), YAHOO);
    const ids = (await b.dataSource.query('SELECT id FROM users ORDER BY id')) as { id: number }[];
    expect(ids.map((r) => r.id)).toEqual([1, 3, 4]);
  });

  it('when a copy stops half-way and runs again, then it finishes from where it stopped and no row is copied twice', async () => {
    const source = join(dir, 'a.sqlite');
    await fill(`sqlite:${source}`);
    const stop = new Error('interrupted');
    await expect(
      copyDatabase({
        sourceUrl: `sqlite:${source}`,
        targetUrl: pg,
        batchRows: 1000,
        onProgress: (p) => {
          if (p.table === 'candles' && p.done >= 5000) throw stop;
        },
      }),
    ).rejects.toBe(stop);

    const again = await copyDatabase({ sourceUrl: `sqlite:${source}`, targetUrl: pg, batchRows: 1000 });

    const candles = again.find((r) => r.table === 'candles')!;
    expect(candles).toMatchObject({ matches: true, sourceRows: CANDLES + 40, targetRows: CANDLES + 40, copied: CANDLES + 40 - 5000 });
    expect(again.find((r) => r.table === 'users')).toMatchObject({ copied: 0, matches: true });
    for (const r of again) expect(r.matches, r.table).toBe(true);
    const once = await copyDatabase({ sourceUrl: `sqlite:${source}`, targetUrl: pg });
    expect(once.map((r) => r.copied)).toEqual(COPY_TABLES.map(() => 0));
  });

  it('when the target holds rows of its own, then the copy is refused and nothing is written; with replace, they are deleted and the copy matches', async () => {
    const source = join(dir, 'a.sqlite');
    await fill(`sqlite:${source}`);
    const other = await openUserStore(pg, { runMigrations: true });
    opened.push(other);
    await other.store.create({ username: 'someone-else', passwordHash: 'p', isAdmin: true });

    const refused = copyDatabase({ sourceUrl: `sqlite:${source}`, targetUrl: pg });
    await expect(refused).rejects.toBeInstanceOf(CopyRefusedError);
    await expect(refused).rejects.toThrow(/table users has 1 row\(s\) that are not the source's first 1.*--replace/);
    expect(await other.store.list()).toHaveLength(1);
    expect(await other.candles.footprint()).toMatchObject({ candles: 0 });

    const replaced = await copyDatabase({ sourceUrl: `sqlite:${source}`, targetUrl: pg, replace: true });
    for (const r of replaced) expect(r.matches, r.table).toBe(true);
    expect((await other.store.list()).map((u) => u.username)).toEqual(['Zoë "quoted" \'株\'', 'admin']);
  });
});
