/**
 * PostgreSQL's candle table partitioned by month (DESIGN 27), on the real server (a schema per test):
 * the migration's layout on a new and on a filled database, months made for the bars written, the
 * retention dropping a month of expired bars as a table while other intervals' bars in it stay, and
 * the previous release's statements working on the partitioned table (a rolling upgrade).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import type { StoredCandle } from '../../src/domain/ports/history-store.js';
import { createLogger } from '../../src/infra/logger.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { DataSource } from '../../src/infra/db/typeorm.js';
import { CreateUsers1763726400000 } from '../../src/infra/db/migrations/1763726400000-create-users.js';
import { CreateApiKeys1763900000000 } from '../../src/infra/db/migrations/1763900000000-create-api-keys.js';
import { CreateCandles1764000000000 } from '../../src/infra/db/migrations/1764000000000-create-candles.js';
import { addMonths, monthStart, monthTable, MONTHS_AHEAD, NEW_DATABASE_MONTHS_BACK } from '../../src/infra/db/candle-partitions.js';
import { pruneHistory } from '../../src/services/history-retention.js';
import { createTestSchema, findPostgres, shouldRunPostgres, type TestSchema } from '../helpers/postgres.js';

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
const TWO_YEARS_MS = 730 * DAY_MS;
const SOURCE = { provider: 'yahoo', fetchedAtMs: 1 };

function bars(fromMs: number, count: number, stepMs: number): StoredCandle[] {
  return Array.from({ length: count }, (_, i) => ({ timeMs: fromMs + i * stepMs, open: 10 + i, high: 11 + i, low: 9 + i, close: 10.5 + i, adjClose: null, volume: i }));
}

const url = await findPostgres();
const run = shouldRunPostgres(url, 'candle partitions on PostgreSQL');

describe.runIf(run)('candles partitioned by month on PostgreSQL', () => {
  let schema: TestSchema;
  let db: OpenedUserStore;
  let sql: pg.Client;

  /** The table's partitions, by name, with their oids (a dropped and remade month gets a new one). */
  async function partitions(): Promise<Map<string, number>> {
    const { rows } = await sql.query<{ name: string; oid: number }>(
      `SELECT c.relname AS name, c.oid::int AS oid FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = '"${schema.name}"."candles"'::regclass`,
    );
    return new Map(rows.map((r) => [r.name, r.oid]));
  }

  async function count(table: string, interval: string): Promise<number> {
    const { rows } = await sql.query<{ n: string }>(
      `SELECT count(*) AS n FROM "${schema.name}"."${table}" WHERE series_id IN (SELECT id FROM "${schema.name}".candle_series WHERE bar_interval = $1)`,
      [interval],
    );
    return Number(rows[0]!.n);
  }

  beforeAll(async () => {
    sql = new pg.Client({ connectionString: url! });
    await sql.connect();
  });

  afterAll(async () => {
    await sql?.end();
  });

  beforeEach(async () => {
    schema = await createTestSchema(url!);
  });

  afterEach(async () => {
    await db?.close();
    await schema.drop();
  });

  it('when a new database is migrated, then candles is partitioned: everything older than 25 months in one table, then a table per month up to two months ahead', async () => {
    db = await openUserStore(url!, { runMigrations: true, schema: schema.name });
    const { rows } = await sql.query(`SELECT 1 FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'candles' AND n.nspname = $1`, [schema.name]);
    expect(rows).toHaveLength(1);
    const first = addMonths(monthStart(Date.now()), -NEW_DATABASE_MONTHS_BACK);
    const expected = ['candles_before_partitions'];
    for (let m = first; m <= addMonths(monthStart(Date.now()), MONTHS_AHEAD); m = addMonths(m, 1)) expected.push(monthTable(m));
    expect([...(await partitions()).keys()].sort()).toEqual(expected.sort());
  });

  it('when bars are written for months with no table (ahead, or long ago), then those before partitioning go to the old table and a month ahead gets its table', async () => {
    db = await openUserStore(url!, { runMigrations: true, schema: schema.name });
    const ahead = addMonths(monthStart(Date.now()), 5);
    await db.candles.putCandles('AAPL', '1d', [...bars(Date.UTC(1999, 0, 4), 3, DAY_MS), ...bars(ahead, 2, DAY_MS)], SOURCE);
    expect((await partitions()).has(monthTable(ahead))).toBe(true);
    expect(await count(monthTable(ahead), '1d')).toBe(2);
    expect(await count('candles_before_partitions', '1d')).toBe(3);
    expect(await db.candles.countCandles('AAPL', '1d', { startMs: 0, endMs: ahead + 10 * DAY_MS })).toBe(5);
    expect((await db.candles.footprint()).bytes).toBeGreaterThan(0);
  });

  it('when two stores write bars of the same new month at once, then both succeed and the month is made once', async () => {
    db = await openUserStore(url!, { runMigrations: true, schema: schema.name });
    const other = await openUserStore(url!, { runMigrations: false, schema: schema.name });
    try {
      const ahead = addMonths(monthStart(Date.now()), 7);
      await Promise.all([db.candles.putCandles('AAPL', '1h', bars(ahead, 24, HOUR_MS), SOURCE), other.candles.putCandles('MSFT', '1h', bars(ahead, 24, HOUR_MS), SOURCE)]);
      expect(await count(monthTable(ahead), '1h')).toBe(48);
    } finally {
      await other.close();
    }
  });

  it('when one-minute bars of a whole month are older than their keep, then the month is dropped as a table, the daily and hourly bars in it stay, and the covered span is clipped', async () => {
    db = await openUserStore(url!, { runMigrations: true, schema: schema.name });
    const now = Date.now();
    const cutoff = now - TWO_YEARS_MS;
    const old = addMonths(monthStart(now), -NEW_DATABASE_MONTHS_BACK); // ends before the cutoff
    const straddling = monthStart(cutoff);
    await db.candles.putCandles('BTC-USD', '1m', bars(old, 3000, MINUTE_MS), SOURCE);
    await db.candles.putCandles('BTC-USD', '1m', bars(cutoff - 20 * MINUTE_MS, 40, MINUTE_MS), SOURCE);
    await db.candles.markCovered('BTC-USD', '1m', { startMs: old, endMs: cutoff + 20 * MINUTE_MS }, SOURCE);
    await db.candles.putCandles('BTC-USD', '1d', bars(old, 20, DAY_MS), SOURCE);
    await db.candles.putCandles('BTC-USD', '1h', bars(old, 100, HOUR_MS), SOURCE);
    const before = await partitions();

    const results = await pruneHistory({ store: db.candles, keepMs: { '1m': TWO_YEARS_MS, '1d': null, '1h': null }, logger: createLogger({ level: 'silent' }), now: () => now });

    const after = await partitions();
    expect(after.get(monthTable(old))).toBeDefined();
    expect(after.get(monthTable(old))).not.toBe(before.get(monthTable(old)));
    expect(await count(monthTable(old), '1m')).toBe(0);
    expect(await count(monthTable(old), '1d')).toBe(20);
    expect(await count(monthTable(old), '1h')).toBe(100);
    // The month the cutoff falls in keeps its table: its expired bars went row by row.
    if (straddling !== old) expect(after.get(monthTable(straddling))).toBe(before.get(monthTable(straddling)));
    expect(results).toEqual([{ interval: '1m', beforeMs: cutoff, candles: 3020 }]);
    expect(await db.candles.countCandles('BTC-USD', '1m', { startMs: 0, endMs: now })).toBe(20);
    expect(await db.candles.coverage('BTC-USD', '1m', { startMs: 0, endMs: now })).toEqual([{ startMs: cutoff, endMs: cutoff + 20 * MINUTE_MS }]);
  });

  it('when a month holds more bars to keep than to remove, then it keeps its table and its expired bars go row by row', async () => {
    db = await openUserStore(url!, { runMigrations: true, schema: schema.name });
    const now = Date.now();
    const old = addMonths(monthStart(now), -NEW_DATABASE_MONTHS_BACK);
    await db.candles.putCandles('ETH-USD', '1m', bars(old, 10, MINUTE_MS), SOURCE);
    await db.candles.putCandles('ETH-USD', '1h', bars(old, 200, HOUR_MS), SOURCE);
    const before = await partitions();
    const results = await pruneHistory({ store: db.candles, keepMs: { '1m': TWO_YEARS_MS }, logger: createLogger({ level: 'silent' }), now: () => now });
    expect(results).toEqual([{ interval: '1m', beforeMs: now - TWO_YEARS_MS, candles: 10 }]);
    expect((await partitions()).get(monthTable(old))).toBe(before.get(monthTable(old)));
    expect(await count(monthTable(old), '1m')).toBe(0);
    expect(await count(monthTable(old), '1h')).toBe(200);
  });

  it('when a filled database of the previous release is migrated, then its bars stay where they were, months begin after the newest one, and the previous release\'s statements still work', async () => {
    const previous = new DataSource({
      type: 'postgres',
      url: url!,
      schema: schema.name,
      migrations: [CreateUsers1763726400000, CreateApiKeys1763900000000, CreateCandles1764000000000],
    });
    await previous.initialize();
    await previous.runMigrations();
    const t = (table: string) => `"${schema.name}"."${table}"`;
    const recent = monthStart(Date.now()) - 3 * DAY_MS; // last month
    await previous.query(`INSERT INTO ${t('candle_series')} (symbol, bar_interval) VALUES ('AAPL', '1m')`);
    await previous.query(
      `INSERT INTO ${t('candles')} (series_id, t, open, high, low, close, adj_close, volume, provider, fetched_at) SELECT 1, $1::bigint + g * 60000, 1, 2, 0.5, 1.5, NULL, g, 'yahoo', 1 FROM generate_series(0, 999) g`,
      [recent],
    );
    await previous.destroy();

    db = await openUserStore(url!, { runMigrations: true, schema: schema.name });
    const names = [...(await partitions()).keys()];
    expect(names).toContain('candles_before_partitions');
    expect(names).not.toContain(monthTable(recent));
    expect(names).toContain(monthTable(addMonths(monthStart(recent), 1)));
    expect(await count('candles_before_partitions', '1m')).toBe(1000);
    expect(await db.candles.countCandles('AAPL', '1m', { startMs: 0, endMs: Date.now() })).toBe(1000);

    // The previous release's own statements (typeorm-candle-store before partitions), run as it runs them: a write of today's bar, a read, a delete.
    const today = Date.now() - (Date.now() % MINUTE_MS);
    await sql.query(
      `INSERT INTO ${t('candles')} (series_id, t, open, high, low, close, adj_close, volume, provider, fetched_at) ` +
        'SELECT $1::integer, *, $8::varchar, $9::bigint FROM unnest($2::bigint[], $3::float8[], $4::float8[], $5::float8[], $6::float8[], $7::float8[], $10::float8[]) ' +
        'ON CONFLICT (series_id, t) DO UPDATE SET open = excluded.open, high = excluded.high, low = excluded.low, close = excluded.close, ' +
        'adj_close = excluded.adj_close, volume = excluded.volume, provider = excluded.provider, fetched_at = excluded.fetched_at',
      [1, [today, today + MINUTE_MS], [1, 1], [2, 2], [0.5, 0.5], [1.5, 1.5], [null, null], 'yahoo', 2, [7, 8]],
    );
    const read = await sql.query(`SELECT t, volume FROM ${t('candles')} WHERE series_id = $1 AND t >= $2 AND t < $3 ORDER BY t`, [1, today, today + 2 * MINUTE_MS]);
    expect(read.rows.map((r: { volume: number }) => r.volume)).toEqual([7, 8]);
    expect(await count(monthTable(monthStart(today)), '1m')).toBe(2);
    const [, removed] = [null, (await sql.query(`DELETE FROM ${t('candles')} WHERE series_id = $1 AND provider = $2`, [1, 'yahoo'])).rowCount];
    expect(removed).toBe(1002);
  });
});
