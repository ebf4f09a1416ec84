/**
 * `CandleStore` on the users' database: SQLite through better-sqlite3's own prepared statements (one
 * transaction per batch: TypeORM's per-row inserts are two orders of magnitude slower) and PostgreSQL
 * through one `INSERT ... SELECT FROM unnest(...)` per batch (a column array per parameter, so a batch
 * is not bounded by the protocol's 65,535 parameters). Every operation runs through `storeOperations`,
 * so driver errors stop here and SQLite's single connection sees each operation whole.
 */
import type { Database, Statement } from 'better-sqlite3';
import type { Pool } from 'pg';
import type { DataSource } from 'typeorm';
import type { CandleColumns, CandleStore, CorporateAction, InstrumentInfo, Provenance, StoredCandle, TimeSpan } from '../../domain/ports/history-store.js';
import { concatColumns } from '../../domain/candle-columns.js';
import type { HistoryInterval } from '../../domain/ports/market-data.js';
import { mergeSpans } from '../../domain/time-spans.js';
import { storeOperations } from './serial-queue.js';
import { SqliteReader } from './sqlite-reader.js';
import { barsAtMost } from '../../domain/bar-intervals.js';
import { retryingWhileBusy } from './sqlite-busy.js';
import { postgresPruneBefore, sqlitePruneBefore } from './candle-retention.js';
import { CandlePartitions } from './candle-partitions.js';
import { CANDLE_ROW_COLUMNS, rowsToColumns, SQLITE_SELECT_CANDLES, type ArrayRow } from './candle-rows.js';

/**
 * Rows of one SQLite read on the event loop between two of its turns (a window of 33,000 one-minute
 * bars, read at once, held it for 60 to 140 ms). Larger windows go to the reader thread; this
 * chunking is for the reads it cannot take (an in-memory database, a thread that failed).
 */
const SQLITE_READ_CHUNK_ROWS = 2000;

/**
 * A SQLite read of a window that may hold more bars than this goes to the reader thread
 * (`sqlite-reader.ts`): the large reads an indicators warm-up or a long intraday window make (tens of
 * thousands of bars, 25 ms and more of reading), which like the compute pool's tasks run at a lower
 * priority. A smaller one, such as ten years of daily bars, is read here in a few milliseconds: sent
 * to the thread it would wait behind the large ones, at the thread's priority, on an ordinary request.
 * A read whose bars go to the compute pool anyway (`offLoop`) goes to the thread whatever its size.
 */
const READER_ABOVE_BARS = 10_000;

/** Rows per PostgreSQL statement: large enough to amortize a round trip, small enough to keep memory flat. */
const PG_BATCH_ROWS = 5000;

/** `ArrayRow` as pg's typings want it: a row is any array. */
type PgRow = ArrayRow & unknown[];

function arrayToCandle(row: ArrayRow): StoredCandle {
  return { timeMs: Number(row[0]), open: row[1], high: row[2], low: row[3], close: row[4], adjClose: row[5], volume: row[6] };
}

type ActionRow = { kind: string; t: number | string; amount: number | null; numerator: number | null; denominator: number | null };

function toAction(row: ActionRow): CorporateAction {
  const timeMs = Number(row.t);
  return row.kind === 'split'
    ? { kind: 'split', timeMs, numerator: row.numerator ?? 1, denominator: row.denominator ?? 1 }
    : { kind: 'dividend', timeMs, amount: row.amount ?? 0 };
}

/** The SQL each dialect needs; everything else is shared. */
interface Dialect {
  /** The series id of (symbol, interval), created when `create` and missing. */
  seriesId(symbol: string, interval: HistoryInterval, create: boolean): Promise<number | undefined>;
  insertCandles(seriesId: number, candles: readonly StoredCandle[], source: Provenance): Promise<void>;
  selectCandles(seriesId: number, span: TimeSpan, limit: number | undefined): Promise<StoredCandle[]>;
  selectColumns(seriesId: number, span: TimeSpan, limit: number | undefined): Promise<CandleColumns>;
  countCandles(seriesId: number, span: TimeSpan): Promise<number>;
  /** Stored bars in `span` by the provider that gave them. */
  providerCounts(seriesId: number, span: TimeSpan): Promise<Record<string, number>>;
  /** Start times of the stored bars in `span` that `provider` gave, ascending. */
  providerTimes(seriesId: number, span: TimeSpan, provider: string): Promise<number[]>;
  deleteSeries(symbol: string, interval: HistoryInterval | undefined): Promise<number>;
  /** Replaces the coverage rows touching `span` by their union with it, atomically. */
  cover(seriesId: number, span: TimeSpan, source: Provenance): Promise<void>;
  selectCoverage(seriesId: number, span: TimeSpan): Promise<TimeSpan[]>;
  insertActions(symbol: string, actions: readonly CorporateAction[], source: Provenance): Promise<void>;
  selectActions(symbol: string, span: TimeSpan): Promise<ActionRow[]>;
  rescale(symbol: string, bars: { barsBeforeMs: number; fetchedBeforeMs: number }, priceFactor: number): Promise<number>;
  putInstrument(symbol: string, info: InstrumentInfo, source: Provenance): Promise<void>;
  getInstrument(symbol: string): Promise<InstrumentInfo | undefined>;
  footprint(): Promise<{ candles: number; bytes: number }>;
  coverageProviders(seriesId: number): Promise<string[]>;
  /** Candles and coverage rows of `provider`, in the series `seriesId` or (undefined) every series. */
  purgeProvider(provider: string, seriesId: number | undefined): Promise<number>;
  pruneBefore(interval: HistoryInterval, beforeMs: number, maxCandles: number): Promise<number>;
}

function sqliteDialect(db: Database): Dialect {
  const statements = new Map<string, Statement>();
  /** A statement prepared once; `raw` ones return each row as an array of its columns. */
  const prepare = (sql: string, raw = false): Statement => {
    const key = raw ? `raw:${sql}` : sql;
    let statement = statements.get(key);
    if (statement === undefined) {
      statement = db.prepare(sql);
      if (raw) statement.raw(true);
      statements.set(key, statement);
    }
    return statement;
  };
  const insertCandle = () =>
    prepare(
      'INSERT INTO candles (series_id, t, open, high, low, close, adj_close, volume, provider, fetched_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ' +
        'ON CONFLICT (series_id, t) DO UPDATE SET open = excluded.open, high = excluded.high, low = excluded.low, close = excluded.close, ' +
        'adj_close = excluded.adj_close, volume = excluded.volume, provider = excluded.provider, fetched_at = excluded.fetched_at',
    );
  const writeCandles = db.transaction((seriesId: number, candles: readonly StoredCandle[], source: Provenance) => {
    const statement = insertCandle();
    for (const c of candles) statement.run(seriesId, c.timeMs, c.open, c.high, c.low, c.close, c.adjClose, c.volume, source.provider, source.fetchedAtMs);
  });
  const writeCoverage = db.transaction((seriesId: number, span: TimeSpan, source: Provenance) => {
    const touching = prepare('SELECT start_ms AS startMs, end_ms AS endMs FROM candle_coverage WHERE series_id = ? AND start_ms <= ? AND end_ms >= ?').all(seriesId, span.endMs, span.startMs) as TimeSpan[];
    const [merged] = mergeSpans([...touching, span]);
    prepare('DELETE FROM candle_coverage WHERE series_id = ? AND start_ms <= ? AND end_ms >= ?').run(seriesId, span.endMs, span.startMs);
    prepare('INSERT INTO candle_coverage (series_id, start_ms, end_ms, provider, fetched_at) VALUES (?, ?, ?, ?, ?)').run(seriesId, merged!.startMs, merged!.endMs, source.provider, source.fetchedAtMs);
  });
  const writeActions = db.transaction((symbol: string, actions: readonly CorporateAction[], source: Provenance) => {
    const statement = prepare(
      'INSERT INTO corporate_actions (symbol, kind, t, amount, numerator, denominator, provider, fetched_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ' +
        'ON CONFLICT (symbol, kind, t) DO UPDATE SET amount = excluded.amount, numerator = excluded.numerator, denominator = excluded.denominator, provider = excluded.provider, fetched_at = excluded.fetched_at',
    );
    for (const a of actions) {
      if (a.kind === 'dividend') statement.run(symbol, 'dividend', a.timeMs, a.amount, null, null, source.provider, source.fetchedAtMs);
      else statement.run(symbol, 'split', a.timeMs, null, a.numerator, a.denominator, source.provider, source.fetchedAtMs);
    }
  });
  const deleteSeries = db.transaction((symbol: string, interval: HistoryInterval | undefined) => {
    const ids = (
      interval === undefined
        ? prepare('SELECT id FROM candle_series WHERE symbol = ?').all(symbol)
        : prepare('SELECT id FROM candle_series WHERE symbol = ? AND bar_interval = ?').all(symbol, interval)
    ) as Array<{ id: number }>;
    let removed = 0;
    for (const { id } of ids) {
      removed += prepare('DELETE FROM candles WHERE series_id = ?').run(id).changes;
      prepare('DELETE FROM candle_coverage WHERE series_id = ?').run(id);
    }
    return removed;
  });
  const purge = db.transaction((provider: string, seriesId: number | undefined) => {
    if (seriesId === undefined) {
      prepare('DELETE FROM candle_coverage WHERE provider = ?').run(provider);
      return prepare('DELETE FROM candles WHERE provider = ?').run(provider).changes;
    }
    prepare('DELETE FROM candle_coverage WHERE series_id = ? AND provider = ?').run(seriesId, provider);
    return prepare('DELETE FROM candles WHERE series_id = ? AND provider = ?').run(seriesId, provider).changes;
  });
  const prune = sqlitePruneBefore(db);
  /**
   * The bars of `span` (at most `limit`), oldest first, handed to `take` a chunk at a time. Rows come as
   * arrays (raw mode): an object per row with named keys costs better-sqlite3 about as much again as
   * the read itself (10 years of daily bars: 1.8 ms raw, 3.0 ms as objects). better-sqlite3 reads on the
   * event loop: a long window is read a chunk at a time, and other requests are answered between
   * chunks. The operation keeps the connection (the serial queue) until its last chunk, so no write of
   * this process lands between two chunks.
   */
  const readChunks = async (seriesId: number, span: TimeSpan, limit: number | undefined, take: (rows: ArrayRow[]) => void): Promise<void> => {
    const statement = prepare(SQLITE_SELECT_CANDLES, true);
    const wanted = limit ?? Number.POSITIVE_INFINITY;
    let read = 0;
    let from = span.startMs;
    for (;;) {
      const size = Math.min(SQLITE_READ_CHUNK_ROWS, wanted - read);
      const rows = statement.all(seriesId, from, span.endMs, size) as ArrayRow[];
      take(rows);
      read += rows.length;
      if (rows.length < size || read >= wanted) return;
      from = Number(rows[rows.length - 1]![0]) + 1;
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  return {
    async seriesId(symbol, interval, create) {
      const find = () => prepare('SELECT id FROM candle_series WHERE symbol = ? AND bar_interval = ?').get(symbol, interval) as { id: number } | undefined;
      const found = find();
      if (found !== undefined || !create) return found?.id;
      prepare('INSERT OR IGNORE INTO candle_series (symbol, bar_interval) VALUES (?, ?)').run(symbol, interval);
      return find()?.id;
    },
    async insertCandles(seriesId, candles, source) {
      writeCandles.immediate(seriesId, candles, source);
    },
    async selectCandles(seriesId, span, limit) {
      const out: StoredCandle[] = [];
      await readChunks(seriesId, span, limit, (rows) => {
        for (const row of rows) out.push(arrayToCandle(row));
      });
      return out;
    },
    async selectColumns(seriesId, span, limit) {
      const parts: CandleColumns[] = [];
      await readChunks(seriesId, span, limit, (rows) => parts.push(rowsToColumns(rows)));
      return parts.length === 1 ? parts[0]! : concatColumns(parts);
    },
    async countCandles(seriesId, span) {
      return (prepare('SELECT count(*) AS n FROM candles WHERE series_id = ? AND t >= ? AND t < ?').get(seriesId, span.startMs, span.endMs) as { n: number }).n;
    },
    async providerCounts(seriesId, span) {
      const rows = prepare('SELECT provider, count(*) AS n FROM candles WHERE series_id = ? AND t >= ? AND t < ? GROUP BY provider').all(seriesId, span.startMs, span.endMs) as Array<{ provider: string; n: number }>;
      return Object.fromEntries(rows.map((r) => [r.provider, r.n]));
    },
    async providerTimes(seriesId, span, provider) {
      const rows = prepare('SELECT t FROM candles WHERE series_id = ? AND t >= ? AND t < ? AND provider = ? ORDER BY t', true).all(seriesId, span.startMs, span.endMs, provider) as Array<[number]>;
      return rows.map((r) => Number(r[0]));
    },
    async deleteSeries(symbol, interval) {
      return deleteSeries.immediate(symbol, interval);
    },
    async cover(seriesId, span, source) {
      writeCoverage.immediate(seriesId, span, source);
    },
    async selectCoverage(seriesId, span) {
      return prepare('SELECT start_ms AS startMs, end_ms AS endMs FROM candle_coverage WHERE series_id = ? AND start_ms < ? AND end_ms > ? ORDER BY start_ms').all(seriesId, span.endMs, span.startMs) as TimeSpan[];
    },
    async insertActions(symbol, actions, source) {
      writeActions.immediate(symbol, actions, source);
    },
    async selectActions(symbol, span) {
      return prepare('SELECT kind, t, amount, numerator, denominator FROM corporate_actions WHERE symbol = ? AND t >= ? AND t < ? ORDER BY t, kind').all(symbol, span.startMs, span.endMs) as ActionRow[];
    },
    async rescale(symbol, bars, priceFactor) {
      return prepare(
        'UPDATE candles SET open = open * @f, high = high * @f, low = low * @f, close = close * @f, adj_close = adj_close * @f, volume = volume / @f ' +
          'WHERE series_id IN (SELECT id FROM candle_series WHERE symbol = @symbol) AND t < @before AND fetched_at < @fetched',
      ).run({ f: priceFactor, symbol, before: bars.barsBeforeMs, fetched: bars.fetchedBeforeMs }).changes;
    },
    async putInstrument(symbol, info, source) {
      prepare(
        'INSERT INTO instruments (symbol, currency, timezone, provider, fetched_at) VALUES (?, ?, ?, ?, ?) ' +
          'ON CONFLICT (symbol) DO UPDATE SET currency = excluded.currency, timezone = excluded.timezone, provider = excluded.provider, fetched_at = excluded.fetched_at',
      ).run(symbol, info.currency, info.timezone, source.provider, source.fetchedAtMs);
    },
    async getInstrument(symbol) {
      return prepare('SELECT currency, timezone FROM instruments WHERE symbol = ?').get(symbol) as InstrumentInfo | undefined;
    },
    async footprint() {
      const { candles } = prepare('SELECT count(*) AS candles FROM candles').get() as { candles: number };
      // dbstat is compiled into better-sqlite3's SQLite; it gives the pages of each table and index.
      const row = prepare("SELECT coalesce(sum(pgsize), 0) AS bytes FROM dbstat WHERE name IN ('candles', 'candle_series', 'candle_coverage')").get() as { bytes: number };
      return { candles, bytes: row.bytes };
    },
    async coverageProviders(seriesId) {
      return (prepare('SELECT DISTINCT provider FROM candle_coverage WHERE series_id = ?').all(seriesId) as Array<{ provider: string }>).map((r) => r.provider);
    },
    async purgeProvider(provider, seriesId) {
      return purge(provider, seriesId);
    },
    async pruneBefore(interval, beforeMs, maxCandles) {
      return prune(interval, beforeMs, maxCandles);
    },
  };
}

function postgresDialect(dataSource: DataSource): Dialect {
  const schema = (dataSource.options as { schema?: string }).schema;
  const t = (table: string) => (schema ? `"${schema}"."${table}"` : `"${table}"`);
  const query = <R>(sql: string, params: unknown[] = []) => dataSource.query(sql, params) as Promise<R>;
  // The read of a range goes to TypeORM's pool itself, rows as arrays: TypeORM's query() takes a
  // query runner per call and names every column of every row, which doubled the p99 of a 10-year read.
  const pool = (dataSource.driver as unknown as { master: Pool }).master;
  const selectRows = async (seriesId: number, span: TimeSpan, limit: number | undefined): Promise<PgRow[]> => {
    const sql = `SELECT ${CANDLE_ROW_COLUMNS} FROM ${t('candles')} WHERE series_id = $1 AND t >= $2 AND t < $3 ORDER BY t`;
    const { rows } = await pool.query<PgRow>({
      text: limit === undefined ? sql : `${sql} LIMIT $4`,
      values: limit === undefined ? [seriesId, span.startMs, span.endMs] : [seriesId, span.startMs, span.endMs, limit],
      rowMode: 'array',
    });
    return rows;
  };
  const partitions = new CandlePartitions(dataSource, t);
  return {
    async seriesId(symbol, interval, create) {
      const found = await query<Array<{ id: number }>>(`SELECT id FROM ${t('candle_series')} WHERE symbol = $1 AND bar_interval = $2`, [symbol, interval]);
      if (found[0] !== undefined || !create) return found[0]?.id;
      await query(`INSERT INTO ${t('candle_series')} (symbol, bar_interval) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [symbol, interval]);
      const made = await query<Array<{ id: number }>>(`SELECT id FROM ${t('candle_series')} WHERE symbol = $1 AND bar_interval = $2`, [symbol, interval]);
      return made[0]?.id;
    },
    async insertCandles(seriesId, candles, source) {
      await partitions.ensure(candles.map((c) => c.timeMs));
      for (let at = 0; at < candles.length; at += PG_BATCH_ROWS) {
        const batch = candles.slice(at, at + PG_BATCH_ROWS);
        await query(
          `INSERT INTO ${t('candles')} (series_id, t, open, high, low, close, adj_close, volume, provider, fetched_at) ` +
            'SELECT $1::integer, *, $8::varchar, $9::bigint FROM unnest($2::bigint[], $3::float8[], $4::float8[], $5::float8[], $6::float8[], $7::float8[], $10::float8[]) ' +
            'ON CONFLICT (series_id, t) DO UPDATE SET open = excluded.open, high = excluded.high, low = excluded.low, close = excluded.close, ' +
            'adj_close = excluded.adj_close, volume = excluded.volume, provider = excluded.provider, fetched_at = excluded.fetched_at',
          [
            seriesId,
            batch.map((c) => c.timeMs),
            batch.map((c) => c.open),
            batch.map((c) => c.high),
            batch.map((c) => c.low),
            batch.map((c) => c.close),
            batch.map((c) => c.adjClose),
            source.provider,
            source.fetchedAtMs,
            batch.map((c) => c.volume),
          ],
        );
      }
    },
    async selectCandles(seriesId, span, limit) {
      return (await selectRows(seriesId, span, limit)).map(arrayToCandle);
    },
    async selectColumns(seriesId, span, limit) {
      return rowsToColumns(await selectRows(seriesId, span, limit));
    },
    async countCandles(seriesId, span) {
      const [row] = await query<Array<{ n: string }>>(`SELECT count(*) AS n FROM ${t('candles')} WHERE series_id = $1 AND t >= $2 AND t < $3`, [seriesId, span.startMs, span.endMs]);
      return Number(row?.n ?? 0);
    },
    async providerCounts(seriesId, span) {
      const rows = await query<Array<{ provider: string; n: string }>>(`SELECT provider, count(*) AS n FROM ${t('candles')} WHERE series_id = $1 AND t >= $2 AND t < $3 GROUP BY provider`, [seriesId, span.startMs, span.endMs]);
      return Object.fromEntries(rows.map((r) => [r.provider, Number(r.n)]));
    },
    async providerTimes(seriesId, span, provider) {
      const rows = await query<Array<{ t: string }>>(`SELECT t FROM ${t('candles')} WHERE series_id = $1 AND t >= $2 AND t < $3 AND provider = $4 ORDER BY t`, [seriesId, span.startMs, span.endMs, provider]);
      return rows.map((r) => Number(r.t));
    },
    async deleteSeries(symbol, interval) {
      return dataSource.transaction(async (manager) => {
        const ids = (await manager.query(
          interval === undefined ? `SELECT id FROM ${t('candle_series')} WHERE symbol = $1` : `SELECT id FROM ${t('candle_series')} WHERE symbol = $1 AND bar_interval = $2`,
          interval === undefined ? [symbol] : [symbol, interval],
        )) as Array<{ id: number }>;
        let removed = 0;
        for (const { id } of ids) {
          const [, count] = (await manager.query(`DELETE FROM ${t('candles')} WHERE series_id = $1`, [id])) as [unknown, number];
          removed += count;
          await manager.query(`DELETE FROM ${t('candle_coverage')} WHERE series_id = $1`, [id]);
        }
        return removed;
      });
    },
    async cover(seriesId, span, source) {
      await dataSource.transaction(async (manager) => {
        // One writer per series at a time, so two instances merging the same spans cannot lose one.
        await manager.query('SELECT pg_advisory_xact_lock($1)', [seriesId]);
        const touching = (await manager.query(`SELECT start_ms, end_ms FROM ${t('candle_coverage')} WHERE series_id = $1 AND start_ms <= $2 AND end_ms >= $3`, [
          seriesId,
          span.endMs,
          span.startMs,
        ])) as Array<{ start_ms: string; end_ms: string }>;
        const [merged] = mergeSpans([...touching.map((r) => ({ startMs: Number(r.start_ms), endMs: Number(r.end_ms) })), span]);
        await manager.query(`DELETE FROM ${t('candle_coverage')} WHERE series_id = $1 AND start_ms <= $2 AND end_ms >= $3`, [seriesId, span.endMs, span.startMs]);
        await manager.query(`INSERT INTO ${t('candle_coverage')} (series_id, start_ms, end_ms, provider, fetched_at) VALUES ($1, $2, $3, $4, $5)`, [
          seriesId,
          merged!.startMs,
          merged!.endMs,
          source.provider,
          source.fetchedAtMs,
        ]);
      });
    },
    async selectCoverage(seriesId, span) {
      const rows = await query<Array<{ start_ms: string; end_ms: string }>>(
        `SELECT start_ms, end_ms FROM ${t('candle_coverage')} WHERE series_id = $1 AND start_ms < $2 AND end_ms > $3 ORDER BY start_ms`,
        [seriesId, span.endMs, span.startMs],
      );
      return rows.map((r) => ({ startMs: Number(r.start_ms), endMs: Number(r.end_ms) }));
    },
    async insertActions(symbol, actions, source) {
      if (actions.length === 0) return;
      await query(
        `INSERT INTO ${t('corporate_actions')} (symbol, kind, t, amount, numerator, denominator, provider, fetched_at) ` +
          'SELECT $1::varchar, *, $7::varchar, $8::bigint FROM unnest($2::text[], $3::bigint[], $4::float8[], $5::float8[], $6::float8[]) ' +
          'ON CONFLICT (symbol, kind, t) DO UPDATE SET amount = excluded.amount, numerator = excluded.numerator, denominator = excluded.denominator, provider = excluded.provider, fetched_at = excluded.fetched_at',
        [
          symbol,
          actions.map((a) => a.kind),
          actions.map((a) => a.timeMs),
          actions.map((a) => (a.kind === 'dividend' ? a.amount : null)),
          actions.map((a) => (a.kind === 'split' ? a.numerator : null)),
          actions.map((a) => (a.kind === 'split' ? a.denominator : null)),
          source.provider,
          source.fetchedAtMs,
        ],
      );
    },
    async selectActions(symbol, span) {
      return query<ActionRow[]>(`SELECT kind, t, amount, numerator, denominator FROM ${t('corporate_actions')} WHERE symbol = $1 AND t >= $2 AND t < $3 ORDER BY t, kind`, [
        symbol,
        span.startMs,
        span.endMs,
      ]);
    },
    async rescale(symbol, bars, priceFactor) {
      const [, count] = await query<[unknown, number]>(
        `UPDATE ${t('candles')} SET open = open * $1, high = high * $1, low = low * $1, close = close * $1, adj_close = adj_close * $1, volume = volume / $1 ` +
          `WHERE series_id IN (SELECT id FROM ${t('candle_series')} WHERE symbol = $2) AND t < $3 AND fetched_at < $4`,
        [priceFactor, symbol, bars.barsBeforeMs, bars.fetchedBeforeMs],
      );
      return count;
    },
    async putInstrument(symbol, info, source) {
      await query(
        `INSERT INTO ${t('instruments')} (symbol, currency, timezone, provider, fetched_at) VALUES ($1, $2, $3, $4, $5) ` +
          'ON CONFLICT (symbol) DO UPDATE SET currency = excluded.currency, timezone = excluded.timezone, provider = excluded.provider, fetched_at = excluded.fetched_at',
        [symbol, info.currency, info.timezone, source.provider, source.fetchedAtMs],
      );
    },
    async getInstrument(symbol) {
      const [row] = await query<InstrumentInfo[]>(`SELECT currency, timezone FROM ${t('instruments')} WHERE symbol = $1`, [symbol]);
      return row;
    },
    async footprint() {
      const [row] = await query<Array<{ candles: string; bytes: string }>>(
        // A partitioned table has no storage of its own: its size is its months'.
        `SELECT (SELECT count(*) FROM ${t('candles')}) AS candles, ` +
          `(SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits WHERE inhparent = '${t('candles')}'::regclass) + ` +
          `pg_total_relation_size('${t('candle_series')}') + pg_total_relation_size('${t('candle_coverage')}') AS bytes`,
      );
      return { candles: Number(row?.candles ?? 0), bytes: Number(row?.bytes ?? 0) };
    },
    async coverageProviders(seriesId) {
      return (await query<Array<{ provider: string }>>(`SELECT DISTINCT provider FROM ${t('candle_coverage')} WHERE series_id = $1`, [seriesId])).map((r) => r.provider);
    },
    async purgeProvider(provider, seriesId) {
      return dataSource.transaction(async (manager) => {
        const where = seriesId === undefined ? 'provider = $1' : 'provider = $1 AND series_id = $2';
        const params = seriesId === undefined ? [provider] : [provider, seriesId];
        await manager.query(`DELETE FROM ${t('candle_coverage')} WHERE ${where}`, params);
        const [, removed] = (await manager.query(`DELETE FROM ${t('candles')} WHERE ${where}`, params)) as [unknown, number];
        return Number(removed ?? 0);
      });
    },
    pruneBefore: postgresPruneBefore(dataSource, t, partitions),
  };
}

/** Candles and corporate actions in a TypeORM DataSource that `runMigrations()` has brought up to date. */
export class TypeormCandleStore implements CandleStore {
  readonly #dialect: Dialect;
  readonly #op: <T>(job: () => Promise<T>) => Promise<T>;
  /** Series ids never change once made: remembered, so a read is one query. */
  readonly #ids = new Map<string, number>();

  /** Large SQLite reads, on a thread of their own; none for PostgreSQL (its reads wait on the network) or an in-memory database. */
  readonly #reader: SqliteReader | undefined;

  /**
   * `dataSource` must be initialized; the store never closes it (`close` stops only the reader thread).
   * `readerNiceIncrement`: how much lower the SQLite reader thread's CPU priority is (WORKER_POOL_NICE).
   */
  constructor(dataSource: DataSource, options: { readerNiceIncrement?: number } = {}) {
    this.#dialect =
      dataSource.options.type === 'postgres'
        ? postgresDialect(dataSource)
        : retryingWhileBusy(sqliteDialect((dataSource.driver as unknown as { databaseConnection: Database }).databaseConnection));
    this.#op = storeOperations(dataSource, { table: 'candles', store: 'Candle store' });
    const file = dataSource.options.type === 'better-sqlite3' ? dataSource.options.database : undefined;
    this.#reader = typeof file === 'string' && file !== ':memory:' && file !== '' ? new SqliteReader(file, options.readerNiceIncrement ?? 0) : undefined;
  }

  /** Stops the reader thread, if one started. */
  close(): Promise<void> {
    return this.#reader?.close() ?? Promise.resolve();
  }

  async #seriesId(symbol: string, interval: HistoryInterval, create: boolean): Promise<number | undefined> {
    const key = `${symbol}\u0000${interval}`;
    const known = this.#ids.get(key);
    if (known !== undefined) return known;
    const id = await this.#dialect.seriesId(symbol, interval, create);
    if (id !== undefined) this.#ids.set(key, id);
    return id;
  }

  putCandles(symbol: string, interval: HistoryInterval, candles: readonly StoredCandle[], source: Provenance): Promise<number> {
    if (candles.length === 0) return Promise.resolve(0);
    return this.#op(async () => {
      const id = await this.#seriesId(symbol, interval, true);
      await this.#dialect.insertCandles(id!, candles, source);
      return candles.length;
    });
  }

  getCandles(symbol: string, interval: HistoryInterval, span: TimeSpan, limit?: number): Promise<StoredCandle[]> {
    return this.#op(async () => {
      const id = await this.#seriesId(symbol, interval, false);
      if (id === undefined) return [];
      return this.#dialect.selectCandles(id, span, limit);
    });
  }

  async getCandleColumns(symbol: string, interval: HistoryInterval, span: TimeSpan, limit?: number, options: { offLoop?: boolean } = {}): Promise<CandleColumns> {
    if (this.#reader !== undefined && (options.offLoop === true || Math.min(limit ?? Infinity, barsAtMost(interval, span)) > READER_ABOVE_BARS)) {
      const id = await this.#op(() => this.#seriesId(symbol, interval, false));
      if (id === undefined) return rowsToColumns([]);
      try {
        return await this.#reader.read(id, span, limit);
      } catch {
        // The thread could not answer: the event loop's connection reads it (and reports what it finds wrong).
      }
    }
    return this.#op(async () => {
      const id = await this.#seriesId(symbol, interval, false);
      return id === undefined ? rowsToColumns([]) : this.#dialect.selectColumns(id, span, limit);
    });
  }

  countCandles(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<number> {
    return this.#op(async () => {
      const id = await this.#seriesId(symbol, interval, false);
      return id === undefined ? 0 : this.#dialect.countCandles(id, span);
    });
  }

  providerCounts(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<Record<string, number>> {
    return this.#op(async () => {
      const id = await this.#seriesId(symbol, interval, false);
      return id === undefined ? {} : this.#dialect.providerCounts(id, span);
    });
  }

  providerTimes(symbol: string, interval: HistoryInterval, span: TimeSpan, provider: string): Promise<number[]> {
    return this.#op(async () => {
      const id = await this.#seriesId(symbol, interval, false);
      return id === undefined ? [] : this.#dialect.providerTimes(id, span, provider);
    });
  }

  deleteCandles(symbol: string, interval?: HistoryInterval): Promise<number> {
    return this.#op(() => this.#dialect.deleteSeries(symbol, interval));
  }

  markCovered(symbol: string, interval: HistoryInterval, span: TimeSpan, source: Provenance): Promise<void> {
    if (span.endMs <= span.startMs) return Promise.resolve();
    return this.#op(async () => {
      const id = await this.#seriesId(symbol, interval, true);
      await this.#dialect.cover(id!, span, source);
    });
  }

  coverage(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<TimeSpan[]> {
    return this.#op(async () => {
      const id = await this.#seriesId(symbol, interval, false);
      if (id === undefined) return [];
      const spans = mergeSpans(await this.#dialect.selectCoverage(id, span));
      return spans.map((s) => ({ startMs: Math.max(s.startMs, span.startMs), endMs: Math.min(s.endMs, span.endMs) }));
    });
  }

  putActions(symbol: string, actions: readonly CorporateAction[], source: Provenance): Promise<number> {
    if (actions.length === 0) return Promise.resolve(0);
    return this.#op(async () => {
      await this.#dialect.insertActions(symbol, actions, source);
      return actions.length;
    });
  }

  getActions(symbol: string, span: TimeSpan): Promise<CorporateAction[]> {
    return this.#op(async () => (await this.#dialect.selectActions(symbol, span)).map(toAction));
  }

  rescale(symbol: string, bars: { barsBeforeMs: number; fetchedBeforeMs: number }, priceFactor: number): Promise<number> {
    return this.#op(() => this.#dialect.rescale(symbol, bars, priceFactor));
  }

  putInstrument(symbol: string, info: InstrumentInfo, source: Provenance): Promise<void> {
    return this.#op(() => this.#dialect.putInstrument(symbol, info, source));
  }

  getInstrument(symbol: string): Promise<InstrumentInfo | undefined> {
    return this.#op(() => this.#dialect.getInstrument(symbol));
  }

  footprint(): Promise<{ candles: number; bytes: number }> {
    return this.#op(() => this.#dialect.footprint());
  }

  coverageProviders(symbol: string, interval: HistoryInterval): Promise<string[]> {
    return this.#op(async () => {
      const id = await this.#seriesId(symbol, interval, false);
      return id === undefined ? [] : this.#dialect.coverageProviders(id);
    });
  }

  purgeProvider(provider: string, series?: { symbol: string; interval: HistoryInterval }): Promise<number> {
    return this.#op(async () => {
      if (series === undefined) return this.#dialect.purgeProvider(provider, undefined);
      const id = await this.#seriesId(series.symbol, series.interval, false);
      return id === undefined ? 0 : this.#dialect.purgeProvider(provider, id);
    });
  }

  pruneBefore(interval: HistoryInterval, beforeMs: number, maxCandles: number): Promise<number> {
    return this.#op(() => this.#dialect.pruneBefore(interval, beforeMs, maxCandles));
  }
}
