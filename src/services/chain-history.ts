/**
 * The history store over a provider chain, with its data-quality checks: one way to build them, for the
 * service (`main.ts`) and the history commands of the CLI (`cli/open-history.ts`).
 */
import type { CandleStore } from '../domain/ports/history-store.js';
import type { Logger } from '../domain/ports/logger.js';
import { DataQuality, type DataQualityOptions } from './data-quality.js';
import { chainReach } from './history-reach.js';
import { HistoryStore } from './history-store.js';
import type { ProviderRouter } from './provider-router.js';
import { LiveBarStore } from './live-bar-store.js';
import { StreamHistory } from './stream-history.js';

export interface ChainHistoryParts {
  candles: CandleStore;
  issues: DataQualityOptions['store'];
  router: ProviderRouter;
  /** The chain's provider names, in order. */
  chain: readonly string[];
  divergenceBps: number;
  logger: Logger;
  count?: DataQualityOptions['count'];
  now?: (() => number) | undefined;
}

/**
 * The quality checks (second opinions and cross-checks from the chain's other providers), the store
 * reading through the chain, and where the live bar builder stores final bars (DESIGN 26).
 */
export function chainHistory(parts: ChainHistoryParts): { quality: DataQuality; history: HistoryStore; liveBars: LiveBarStore } {
  const { router } = parts;
  const now = parts.now ? { now: parts.now } : {};
  const quality = new DataQuality({
    store: parts.issues,
    reference: (query, except) => router.getHistoryElsewhere(query, except),
    others: (query, except) => router.getHistoryFromOthers(query, except),
    divergenceBps: parts.divergenceBps,
    count: parts.count,
    logger: parts.logger,
    ...now,
  });
  const stream = new StreamHistory({ store: parts.candles, quality, divergenceBps: parts.divergenceBps, ...now });
  const history = new HistoryStore({
    store: parts.candles,
    fetch: (query) => router.getHistory(query),
    provider: (answer) => router.sourceOf(answer) ?? router.name,
    // How far back the chain reaches (the provider plans), with Yahoo's window sizes per call.
    reach: (interval, symbol) => chainReach(router.reachDays(symbol, interval), interval),
    beyondReach: (symbol, interval) => router.beyondReach(symbol, interval),
    quality,
    chain: [...parts.chain],
    stream,
    ...now,
  });
  return { quality, history, liveBars: new LiveBarStore({ store: parts.candles, stream, ...now }) };
}
