/**
 * Retention of stored history (HISTORY_KEEP_<INTERVAL>, DESIGN 27): candles older than their
 * interval's keep go, with the covered spans they made, in bounded batches. Each batch is one short
 * transaction through the store's queue, and the loop yields between batches, so a purge of millions of
 * rows never holds the event loop, the SQLite connection or a PostgreSQL lock for long: requests are
 * answered between batches. The scheduler runs it once an hour (once per fleet, under the job's lock);
 * `mds history prune` runs it at once.
 */
import type { CandleStore } from '../domain/ports/history-store.js';
import type { Logger } from '../domain/ports/logger.js';
import type { HistoryInterval } from '../domain/ports/market-data.js';

/** Candles per batch: a few milliseconds of SQLite's time, a short PostgreSQL transaction. */
export const PRUNE_BATCH_CANDLES = 5000;

/** What one interval's purge removed. */
export interface PruneResult {
  interval: HistoryInterval;
  /** Candles starting before this instant (epoch ms) were removed. */
  beforeMs: number;
  candles: number;
}

export interface RetentionOptions {
  store: Pick<CandleStore, 'pruneBefore'>;
  /** The keep of each interval in ms; null or absent keeps it forever. */
  keepMs: Partial<Record<HistoryInterval, number | null>>;
  logger: Logger;
  /** Candles per batch; default `PRUNE_BATCH_CANDLES`. */
  batchCandles?: number;
  /** Clock in epoch milliseconds; `Date.now` by default. */
  now?: () => number;
}

/** Removes the candles older than their keep; resolves to what went, per interval with a finite keep. */
export async function pruneHistory(options: RetentionOptions, onBatch?: (interval: HistoryInterval, removed: number) => void): Promise<PruneResult[]> {
  const batch = options.batchCandles ?? PRUNE_BATCH_CANDLES;
  const now = (options.now ?? Date.now)();
  const results: PruneResult[] = [];
  for (const [interval, keepMs] of Object.entries(options.keepMs) as Array<[HistoryInterval, number | null | undefined]>) {
    if (keepMs === null || keepMs === undefined) continue;
    const beforeMs = now - keepMs;
    let candles = 0;
    for (;;) {
      const removed = await options.store.pruneBefore(interval, beforeMs, batch);
      candles += removed;
      onBatch?.(interval, removed);
      if (removed < batch) break;
      // Whatever waits (requests, the store's queue) goes before the next batch.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (candles > 0) options.logger.info({ interval, before: new Date(beforeMs).toISOString(), candles }, 'history retention: old candles removed');
    results.push({ interval, beforeMs, candles });
  }
  return results;
}

/** The scheduler's job: `pruneHistory` with the configured keeps. */
export function retentionJob(options: RetentionOptions): () => Promise<'ok'> {
  return async () => {
    await pruneHistory(options);
    return 'ok';
  };
}
