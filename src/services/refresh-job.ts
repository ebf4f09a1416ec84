/**
 * The body of the scheduler's refresh job: the configured indices are loaded again ahead of expiry,
 * and the same run keeps the stored daily history of the indices and the streamed symbols current
 * once their market closes. It runs as background work (DESIGN 19).
 */
import { inBackground } from '../domain/background-work.js';
import type { HistoryStore } from './history-store.js';
import type { MarketDataService } from './market-data.js';

export interface RefreshJobOptions {
  market: Pick<MarketDataService, 'refreshIndices'>;
  history: Pick<HistoryStore, 'keepCurrent'>;
  /** Entries expiring within this many ms are loaded again (twice the job's interval). */
  horizonMs: number;
  /** The symbols whose stored history is kept current: the indices and what is streamed now. */
  symbols: () => string[];
  /** Clock in epoch milliseconds; `Date.now` by default. */
  now?: () => number;
}

/** The job: resolves to what the indices' refresh resolved to ('skipped' when another instance holds its lock). */
export function refreshJob(options: RefreshJobOptions): () => Promise<'ok' | 'skipped'> {
  const now = options.now ?? Date.now;
  let historyCheckedAt = now();
  // Background work: its upstream calls count against BACKGROUND_BUDGET_SHARE and never hold a caller back.
  return () =>
    inBackground(async () => {
      const result = await options.market.refreshIndices(options.horizonMs);
      const since = historyCheckedAt;
      historyCheckedAt = now();
      await options.history.keepCurrent(options.symbols(), since);
      return result;
    });
}
