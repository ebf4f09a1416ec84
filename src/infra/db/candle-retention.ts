/**
 * The SQL of `CandleStore.pruneBefore` for each database: one transaction clips the covered spans of
 * the interval to the cutoff, then deletes a bounded batch of the older bars (by their primary key,
 * series then time, so each series' bars are a range of the key). Clipping first and in the same
 * transaction means that after any batch no covered span reaches a dropped bar, even when a request
 * stored and covered older bars again between two batches.
 */
import type { Database } from 'better-sqlite3';
import type { DataSource, EntityManager } from 'typeorm';
import type { CandlePartitions } from './candle-partitions.js';
import type { HistoryInterval } from '../../domain/ports/market-data.js';

/** `pruneBefore` over better-sqlite3's connection (the store's serial queue keeps it to itself). */
export function sqlitePruneBefore(db: Database): (interval: HistoryInterval, beforeMs: number, maxCandles: number) => number {
  // Prepared on first use: the store is made before the migrations have created its tables.
  let step: ((interval: HistoryInterval, before: number, limit: number) => number) | undefined;
  const prepared = () => {
    const series = 'SELECT id FROM candle_series WHERE bar_interval = @interval';
    const dropSpans = db.prepare(`DELETE FROM candle_coverage WHERE series_id IN (${series}) AND end_ms <= @before`);
    const clipSpans = db.prepare(`UPDATE candle_coverage SET start_ms = @before WHERE series_id IN (${series}) AND start_ms < @before`);
    const dropBars = db.prepare(
      `DELETE FROM candles WHERE (series_id, t) IN (SELECT series_id, t FROM candles WHERE series_id IN (${series}) AND t < @before ORDER BY series_id, t LIMIT @limit)`,
    );
    const transaction = db.transaction((interval: HistoryInterval, before: number, limit: number) => {
      dropSpans.run({ interval, before });
      clipSpans.run({ interval, before });
      return dropBars.run({ interval, before, limit }).changes;
    });
    return (interval: HistoryInterval, before: number, limit: number) => transaction.immediate(interval, before, limit);
  };
  return (interval, beforeMs, maxCandles) => (step ??= prepared())(interval, beforeMs, maxCandles);
}

/**
 * Clips the covered spans of `interval`'s series to `beforeMs` inside `manager`'s transaction, each
 * series under the lock a coverage merge takes (`cover`), so an instance merging spans of it meanwhile
 * cannot bring a clipped one back.
 */
async function clipCoverage(manager: EntityManager, t: (table: string) => string, interval: HistoryInterval, beforeMs: number): Promise<void> {
  const clipped = (await manager.query(
    `SELECT DISTINCT series_id FROM ${t('candle_coverage')} WHERE series_id IN (SELECT id FROM ${t('candle_series')} WHERE bar_interval = $1) AND start_ms < $2 ORDER BY series_id`,
    [interval, beforeMs],
  )) as Array<{ series_id: number }>;
  for (const { series_id: id } of clipped) {
    await manager.query('SELECT pg_advisory_xact_lock($1)', [id]);
    await manager.query(`DELETE FROM ${t('candle_coverage')} WHERE series_id = $1 AND end_ms <= $2`, [id, beforeMs]);
    await manager.query(`UPDATE ${t('candle_coverage')} SET start_ms = $2 WHERE series_id = $1 AND start_ms < $2`, [id, beforeMs]);
  }
}

/**
 * `pruneBefore` on PostgreSQL; `t` names a table in the store's schema. Whole months older than the
 * cutoff go first, as tables (`CandlePartitions.dropExpired`); then one bounded batch of the rows left
 * (the month the cutoff falls in, the bars from before partitioning, months mostly kept for other
 * intervals) is deleted.
 */
export function postgresPruneBefore(
  dataSource: DataSource,
  t: (table: string) => string,
  partitions: Pick<CandlePartitions, 'dropExpired'>,
): (interval: HistoryInterval, beforeMs: number, maxCandles: number) => Promise<number> {
  return async (interval, beforeMs, maxCandles) => {
    const dropped = await partitions.dropExpired(interval, beforeMs, (manager) => clipCoverage(manager, t, interval, beforeMs));
    const deleted = await dataSource.transaction(async (manager) => {
      await clipCoverage(manager, t, interval, beforeMs);
      const [, removed] = (await manager.query(
        `DELETE FROM ${t('candles')} WHERE (series_id, t) IN (SELECT series_id, t FROM ${t('candles')} WHERE series_id IN (SELECT id FROM ${t('candle_series')} WHERE bar_interval = $1) AND t < $2 ORDER BY series_id, t LIMIT $3)`,
        [interval, beforeMs, maxCandles],
      )) as [unknown, number];
      return Number(removed ?? 0);
    });
    return dropped + deleted;
  };
}
