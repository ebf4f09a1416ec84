/**
 * Creates the history store: `candle_series` names each (symbol, interval) once with a small integer,
 * `candles` holds the bars keyed by (series, bar start), `candle_coverage` the spans asked of an upstream
 * and answered, `corporate_actions` dividends and splits, and `instruments` the currency and time zone answers carry. On SQLite the keyed tables are
 * WITHOUT ROWID (the primary key is the table), which keeps a bar to a few dozen bytes.
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';

// Kept local rather than shared with the store: a migration must keep meaning what it meant the day it shipped.
function tableName(queryRunner: QueryRunner, table: string): string {
  const schema = (queryRunner.connection.options as { schema?: string }).schema;
  return schema ? `"${schema}"."${table}"` : `"${table}"`;
}

export class CreateCandles1764000000000 implements MigrationInterface {
  readonly name = 'CreateCandles1764000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const postgres = queryRunner.connection.options.type === 'postgres';
    const t = (name: string) => tableName(queryRunner, name);
    if (postgres) {
      await queryRunner.query(
        `CREATE TABLE ${t('candle_series')} (id serial PRIMARY KEY, symbol varchar(32) NOT NULL, bar_interval varchar(4) NOT NULL, CONSTRAINT "UQ_candle_series" UNIQUE (symbol, bar_interval))`,
      );
      await queryRunner.query(
        `CREATE TABLE ${t('candles')} (series_id integer NOT NULL REFERENCES ${t('candle_series')} (id) ON DELETE CASCADE, t bigint NOT NULL, ` +
          'open double precision NOT NULL, high double precision NOT NULL, low double precision NOT NULL, close double precision NOT NULL, ' +
          'adj_close double precision, volume double precision, provider varchar(32) NOT NULL, fetched_at bigint NOT NULL, CONSTRAINT "PK_candles" PRIMARY KEY (series_id, t))',
      );
      await queryRunner.query(
        `CREATE TABLE ${t('candle_coverage')} (series_id integer NOT NULL REFERENCES ${t('candle_series')} (id) ON DELETE CASCADE, start_ms bigint NOT NULL, end_ms bigint NOT NULL, ` +
          'provider varchar(32) NOT NULL, fetched_at bigint NOT NULL, CONSTRAINT "PK_candle_coverage" PRIMARY KEY (series_id, start_ms))',
      );
      await queryRunner.query(
        `CREATE TABLE ${t('corporate_actions')} (symbol varchar(32) NOT NULL, kind varchar(8) NOT NULL, t bigint NOT NULL, amount double precision, ` +
          'numerator double precision, denominator double precision, provider varchar(32) NOT NULL, fetched_at bigint NOT NULL, CONSTRAINT "PK_corporate_actions" PRIMARY KEY (symbol, kind, t))',
      );
      await queryRunner.query(
        `CREATE TABLE ${t('instruments')} (symbol varchar(32) PRIMARY KEY, currency varchar(8) NOT NULL, timezone varchar(64) NOT NULL, provider varchar(32) NOT NULL, fetched_at bigint NOT NULL)`,
      );
      return;
    }
    await queryRunner.query(
      'CREATE TABLE "candle_series" (id INTEGER PRIMARY KEY, symbol TEXT NOT NULL, bar_interval TEXT NOT NULL, CONSTRAINT "UQ_candle_series" UNIQUE (symbol, bar_interval))',
    );
    await queryRunner.query(
      'CREATE TABLE "candles" (series_id INTEGER NOT NULL REFERENCES "candle_series" (id) ON DELETE CASCADE, t INTEGER NOT NULL, ' +
        'open REAL NOT NULL, high REAL NOT NULL, low REAL NOT NULL, close REAL NOT NULL, adj_close REAL, volume REAL, provider TEXT NOT NULL, fetched_at INTEGER NOT NULL, ' +
        'PRIMARY KEY (series_id, t)) WITHOUT ROWID',
    );
    await queryRunner.query(
      'CREATE TABLE "candle_coverage" (series_id INTEGER NOT NULL REFERENCES "candle_series" (id) ON DELETE CASCADE, start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, ' +
        'provider TEXT NOT NULL, fetched_at INTEGER NOT NULL, PRIMARY KEY (series_id, start_ms)) WITHOUT ROWID',
    );
    await queryRunner.query(
      'CREATE TABLE "corporate_actions" (symbol TEXT NOT NULL, kind TEXT NOT NULL, t INTEGER NOT NULL, amount REAL, numerator REAL, denominator REAL, ' +
        'provider TEXT NOT NULL, fetched_at INTEGER NOT NULL, PRIMARY KEY (symbol, kind, t)) WITHOUT ROWID',
    );
    await queryRunner.query(
      'CREATE TABLE "instruments" (symbol TEXT PRIMARY KEY, currency TEXT NOT NULL, timezone TEXT NOT NULL, provider TEXT NOT NULL, fetched_at INTEGER NOT NULL) WITHOUT ROWID',
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of ['instruments', 'corporate_actions', 'candle_coverage', 'candles', 'candle_series']) await queryRunner.query(`DROP TABLE ${tableName(queryRunner, table)}`);
  }
}
