/**
 * The history store and its backfill over the configured database and upstream, for the `history`
 * commands: the providers and the history services load only for them.
 */
import type { Config } from '../config.js';
import { openUserStore } from '../infra/db/typeorm-user-store.js';
import { createProviderChain } from '../infra/market/index.js';
import type { Logger } from '../infra/logger.js';
import { chainHistory } from '../services/chain-history.js';
import { HistoryBackfill } from '../services/history-backfill.js';
import { HistoryVerify } from '../services/history-verify.js';
import { ProviderRouter } from '../services/provider-router.js';
import { pruneHistory, type PruneResult } from '../services/history-retention.js';
import { ShutdownList } from '../services/shutdown-list.js';

/**
 * The history store and its backfill over the configured database and upstream, for the CLI:
 * migrations run first; the upstream budget is this process's own (no shared counters).
 */
export async function openHistory(config: Config, logger: Logger): Promise<{ backfill: HistoryBackfill; verify: HistoryVerify; description: string; close(): Promise<void> }> {
  const shutdown = new ShutdownList(logger);
  try {
    const db = await openUserStore(config.database.url, { runMigrations: true });
    shutdown.add('database', () => db.close());
    const links = createProviderChain(config.market, logger);
    const provider = new ProviderRouter({ links, logger });
    shutdown.add('market data provider', () => provider.close());
    const { quality, history } = chainHistory({
      candles: db.candles,
      issues: db.dataIssues,
      router: provider,
      chain: links.map((link) => link.name),
      divergenceBps: config.quality.divergenceBps,
      logger,
    });
    const backfill = new HistoryBackfill({ history, jobs: db.historyJobs, logger });
    shutdown.add('history backfill', () => backfill.close());
    const verify = new HistoryVerify({
      store: db.candles,
      quality,
      providers: links.map((link) => link.name),
      fetchFrom: (name, query) => provider.getHistoryFrom(query, name),
      divergenceBps: config.quality.divergenceBps,
    });
    return { backfill, verify, description: db.description, close: () => shutdown.close() };
  } catch (err) {
    await shutdown.close().catch(() => undefined);
    throw err;
  }
}

/** Drops every stored bar and covered span `provider` gave (`mds history purge`); resolves to how many bars went. */
export async function purgeProviderBars(config: Config, provider: string): Promise<{ removed: number; description: string }> {
  const db = await openUserStore(config.database.url, { runMigrations: true });
  try {
    return { removed: await db.candles.purgeProvider(provider), description: db.description };
  } finally {
    await db.close();
  }
}

/** Removes the stored candles older than their HISTORY_KEEP_<INTERVAL> now (`mds history prune`), as the hourly job does. */
export async function pruneStoredHistory(config: Config, logger: Logger): Promise<{ results: PruneResult[]; description: string }> {
  const db = await openUserStore(config.database.url, { runMigrations: true });
  try {
    return { results: await pruneHistory({ store: db.candles, keepMs: config.retention, logger }), description: db.description };
  } finally {
    await db.close();
  }
}
