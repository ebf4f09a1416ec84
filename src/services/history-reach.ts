/**
 * The history store's view of how far back the provider chain reaches (DESIGN 19): the furthest reach
 * of the providers that serve an interval of a symbol (their plans), in the window sizes of one call
 * that the reference upstream (Yahoo) takes.
 */
import type { HistoryInterval } from '../domain/ports/market-data.js';
import { defaultReach, type UpstreamReach } from './history-store.js';
import { DAY_MS } from '../domain/durations.js';

/**
 * `reachDays` as the chain's router gives it (`null`: unbounded; `undefined`: no provider serves the
 * interval, and the store asks anyway so that the router can say so) as the store's reach.
 */
export function chainReach(reachDays: number | null | undefined, interval: HistoryInterval): UpstreamReach {
  const { maxWindowMs } = defaultReach(interval);
  return { retentionMs: typeof reachDays === 'number' ? reachDays * DAY_MS : Infinity, maxWindowMs };
}
