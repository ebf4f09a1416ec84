/**
 * PostgreSQL only: `candles` becomes a table partitioned by month of `t` (DESIGN 27), so retention
 * drops old months instead of deleting rows. The table as it was becomes the partition
 * `candles_before_partitions`, holding everything before the first partitioned month (the month
 * after its newest bar; on an empty table, 25 months back), and a table per month is made from there
 * to two months ahead. Columns, primary key and foreign key are unchanged, so the previous release's
 * statements work on the new table during a rolling upgrade (it only adds months it never writes
 * past: a release that writes makes the months ahead). SQLite is left as it is.
 *
 * Attaching the old table checks each of its rows against the partition's range once: on a large
 * table the migration takes that long (a read of the table), holding its lock.
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';

// Kept local rather than imported from the store: a migration must keep meaning what it meant the day it shipped.
const MONTHS_AHEAD = 2;
const MONTHS_BACK_WHEN_EMPTY = 25;
const BEFORE = 'candles_before_partitions';

function name(queryRunner: QueryRunner, table: string): string {
  const schema = (queryRunner.connection.options as { schema?: string }).schema;
  return schema ? `"${schema}"."${table}"` : `"${table}"`;
}

function month(ms: number, add = 0): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + add, 1);
}

function monthTable(start: number): string {
  const d = new Date(start);
  return `candles_p${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

export class PartitionCandles1764700000000 implements MigrationInterface {
  readonly name = 'PartitionCandles1764700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    const t = (table: string) => name(queryRunner, table);
    const [newest] = (await queryRunner.query(`SELECT max(t) AS t FROM ${t('candles')}`)) as Array<{ t: string | null }>;
    const now = Date.now();
    const back = month(now, -MONTHS_BACK_WHEN_EMPTY);
    const first = newest?.t == null ? back : Math.max(back, month(Number(newest.t), 1));
    // The old table keeps its rows and its own constraints; its names move aside for the new table's.
    await queryRunner.query(`ALTER TABLE ${t('candles')} RENAME CONSTRAINT "PK_candles" TO "PK_${BEFORE}"`);
    await queryRunner.query(`ALTER TABLE ${t('candles')} RENAME TO "${BEFORE}"`);
    await queryRunner.query(
      `CREATE TABLE ${t('candles')} (series_id integer NOT NULL REFERENCES ${t('candle_series')} (id) ON DELETE CASCADE, t bigint NOT NULL, ` +
        'open double precision NOT NULL, high double precision NOT NULL, low double precision NOT NULL, close double precision NOT NULL, ' +
        'adj_close double precision, volume double precision, provider varchar(32) NOT NULL, fetched_at bigint NOT NULL, CONSTRAINT "PK_candles" PRIMARY KEY (series_id, t)) ' +
        'PARTITION BY RANGE (t)',
    );
    await queryRunner.query(`ALTER TABLE ${t('candles')} ATTACH PARTITION ${t(BEFORE)} FOR VALUES FROM (MINVALUE) TO (${first})`);
    for (let start = first; start <= month(now, MONTHS_AHEAD); start = month(start, 1)) {
      await queryRunner.query(`CREATE TABLE ${t(monthTable(start))} PARTITION OF ${t('candles')} FOR VALUES FROM (${start}) TO (${month(start, 1)})`);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (queryRunner.connection.options.type !== 'postgres') return;
    const t = (table: string) => name(queryRunner, table);
    await queryRunner.query(`ALTER TABLE ${t('candles')} DETACH PARTITION ${t(BEFORE)}`);
    await queryRunner.query(`INSERT INTO ${t(BEFORE)} SELECT * FROM ${t('candles')}`);
    await queryRunner.query(`DROP TABLE ${t('candles')}`);
    await queryRunner.query(`ALTER TABLE ${t(BEFORE)} RENAME TO "candles"`);
    await queryRunner.query(`ALTER TABLE ${t('candles')} RENAME CONSTRAINT "PK_${BEFORE}" TO "PK_candles"`);
  }
}
