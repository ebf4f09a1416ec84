/**
 * PostgreSQL's candle table is partitioned by month of the bar's start (DESIGN 27), so retention
 * drops a month of old intraday bars as a table instead of deleting millions of rows one by one.
 *
 * Layout (migration `PartitionCandles1764700000000`): `candles` is partitioned by range of `t`;
 * `candles_before_partitions` holds every bar before the first partitioned month (the whole table as
 * it was when the migration ran, and on a new database everything older than 25 months), and
 * `candles_pYYYYMM` one calendar month (UTC) each. The primary key stays (series_id, t), so every
 * statement of the previous release still works on it unchanged.
 *
 * Months are created ahead: the migration makes them up to `MONTHS_AHEAD` past its own month, and each
 * write makes the months of its bars and the `MONTHS_AHEAD` after today when missing. A release that
 * writes without creating months (the previous one, during a rolling upgrade) therefore always finds
 * the month of a current bar. A month with old bars of one interval and kept bars of others (daily bars
 * are kept forever) is emptied of the expired interval by moving the kept rows aside, dropping the
 * month and making it again.
 *
 * SQLite has no partitions: there the purge deletes rows in batches (`candle-retention.ts`).
 */
import type { EntityManager } from 'typeorm';
import type { DataSource } from './typeorm.js';

/** Months made ahead of the current one, so no bar of today ever lacks its partition. */
export const MONTHS_AHEAD = 2;
/** How far back a new (empty) database partitions: the default keep of one-minute bars plus a month. */
export const NEW_DATABASE_MONTHS_BACK = 25;
/** The table that holds the bars older than the first partitioned month. */
export const BEFORE_PARTITIONS = 'candles_before_partitions';
/** Serializes making and dropping months across the fleet (a `pg_advisory_xact_lock` key). */
const PARTITIONS_LOCK = 0x6d64_7370; // "mdsp"

/** The start (epoch ms, UTC) of the month holding `ms`. */
export function monthStart(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** The start of the month `n` months after the one starting at `start`. */
export function addMonths(start: number, n: number): number {
  const d = new Date(start);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + n, 1);
}

/** The table of the month starting at `start`: `candles_p202612`. */
export function monthTable(start: number): string {
  const d = new Date(start);
  return `candles_p${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
}

type Query = (sql: string, params?: unknown[]) => Promise<unknown>;

/** Makes the month starting at `start` unless it exists; run under `PARTITIONS_LOCK` (or in the migration). */
async function createMonth(query: Query, t: (table: string) => string, start: number): Promise<void> {
  await query(`CREATE TABLE IF NOT EXISTS ${t(monthTable(start))} PARTITION OF ${t('candles')} FOR VALUES FROM (${start}) TO (${addMonths(start, 1)})`);
}

/** The months of a PostgreSQL candle store: made when a write needs them, dropped by retention. */
export class CandlePartitions {
  readonly #dataSource: DataSource;
  readonly #t: (table: string) => string;
  readonly #now: () => number;
  /** Month starts known to exist, and where they begin; loaded on first use. */
  #known: Promise<{ first: number; months: Set<number> }> | undefined;
  /** `interval:month` pairs found mostly kept for other intervals: left to the batched delete, not counted again. */
  readonly #leftToRows = new Set<string>();

  constructor(dataSource: DataSource, t: (table: string) => string, now: () => number = Date.now) {
    this.#dataSource = dataSource;
    this.#t = t;
    this.#now = now;
  }

  /** Makes the months of bars starting at `times` (and the months ahead of today) that do not exist yet. */
  async ensure(times: readonly number[]): Promise<void> {
    const known = await this.#load();
    const wanted = new Set<number>();
    const today = monthStart(this.#now());
    for (let i = 0; i <= MONTHS_AHEAD; i++) wanted.add(addMonths(today, i));
    let low = Number.POSITIVE_INFINITY;
    let high = Number.NEGATIVE_INFINITY;
    for (const ms of times) {
      if (ms < low) low = ms;
      if (ms > high) high = ms;
    }
    if (high >= known.first) for (let m = monthStart(Math.max(low, known.first)); m <= high; m = addMonths(m, 1)) wanted.add(m);
    const missing = [...wanted].filter((m) => m >= known.first && !known.months.has(m)).sort((a, b) => a - b);
    if (missing.length === 0) return;
    await this.#dataSource.transaction(async (manager) => {
      await manager.query('SELECT pg_advisory_xact_lock($1)', [PARTITIONS_LOCK]);
      for (const m of missing) await createMonth((sql, params) => manager.query(sql, params), this.#t, m);
    });
    for (const m of missing) known.months.add(m);
  }

  /**
   * Empties every month that ends at or before `beforeMs` of the bars of `interval`'s series, by
   * dropping the month: the rows of other intervals in it are put back in the same transaction. A
   * month where the rows kept would outnumber those removed is left to the batched delete. `clip`
   * clips the covered spans first, in the same transaction, so no span ever claims a dropped bar.
   * Resolves to the bars removed.
   */
  async dropExpired(interval: string, beforeMs: number, clip: (manager: EntityManager) => Promise<void>): Promise<number> {
    const known = await this.#load();
    const t = this.#t;
    let removed = 0;
    const months = [...known.months].filter((m) => addMonths(m, 1) <= beforeMs && !this.#leftToRows.has(`${interval}:${m}`)).sort((a, b) => a - b);
    for (const start of months) {
      removed += await this.#dataSource.transaction(async (manager) => {
        await manager.query('SELECT pg_advisory_xact_lock($1)', [PARTITIONS_LOCK]);
        const table = t(monthTable(start));
        const series = `SELECT id FROM ${t('candle_series')} WHERE bar_interval = $1`;
        // The primary key answers this at once; counting reads the month, so only a month with such bars is counted.
        const [any] = (await manager.query(`SELECT EXISTS (SELECT 1 FROM ${table} WHERE series_id IN (${series})) AS found`, [interval])) as Array<{ found: boolean }>;
        if (any?.found !== true) return 0;
        const [counts] = (await manager.query(`SELECT count(*) AS total, count(*) FILTER (WHERE series_id IN (${series})) AS expired FROM ${table}`, [interval])) as Array<{ total: string; expired: string }>;
        const expired = Number(counts?.expired ?? 0);
        const kept = Number(counts?.total ?? 0) - expired;
        if (kept > expired) {
          this.#leftToRows.add(`${interval}:${start}`);
          return 0;
        }
        await clip(manager);
        if (kept > 0) await manager.query(`CREATE TEMPORARY TABLE kept_candles ON COMMIT DROP AS SELECT * FROM ${table} WHERE series_id NOT IN (${series})`, [interval]);
        await manager.query(`DROP TABLE ${table}`);
        await createMonth((sql, params) => manager.query(sql, params), t, start);
        if (kept > 0) await manager.query(`INSERT INTO ${t('candles')} SELECT * FROM kept_candles`);
        return expired;
      });
    }
    return removed;
  }

  /** The months that exist and where partitioning begins, read from the catalog once. */
  #load(): Promise<{ first: number; months: Set<number> }> {
    this.#known ??= (async () => {
      const rows = (await this.#dataSource.query(
        'SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass',
        [this.#t('candles')],
      )) as Array<{ name: string; bound: string }>;
      let first: number | undefined;
      const months = new Set<number>();
      for (const { name, bound } of rows) {
        const [, from, to] = /FROM \((.+)\) TO \((.+)\)/.exec(bound) ?? [];
        const number = (text: string | undefined) => Number(text?.replace(/'/g, ''));
        if (name === BEFORE_PARTITIONS) first = number(to);
        else if (from !== undefined) months.add(number(from));
      }
      if (first === undefined || !Number.isFinite(first)) throw new Error(`the candle table has no ${BEFORE_PARTITIONS} partition: the migrations have not run`);
      return { first, months };
    })().catch((error: unknown) => {
      this.#known = undefined;
      throw error;
    });
    return this.#known;
  }
}
