/**
 * The representation cache's read counts by kind and result (hit, miss, stale), in this process and
 * in the metrics: what the admin status reports as `cache`.
 */
import { NO_METRICS, type CacheResult, type Metrics } from '../../domain/ports/metrics.js';
import { CACHE_KINDS, type CacheKind, type CacheStats, type KindStats } from './cache-types.js';

/** The metrics result of each counter. */
const RESULT: Record<keyof KindStats, CacheResult> = { hits: 'hit', misses: 'miss', stale: 'stale' };

export class ReadCounts {
  readonly #byKind = new Map<CacheKind, KindStats>(CACHE_KINDS.map((kind) => [kind, { hits: 0, misses: 0, stale: 0 }]));
  readonly #metrics: Pick<Metrics, 'cacheRequest'>;

  constructor(metrics: Pick<Metrics, 'cacheRequest'> | undefined) {
    this.#metrics = metrics ?? NO_METRICS;
  }

  /** Counts one read of `kind` that ended as `result`. */
  count(kind: CacheKind, result: keyof KindStats): void {
    const s = this.#byKind.get(kind);
    if (s !== undefined) s[result] += 1;
    this.#metrics.cacheRequest(kind, RESULT[result]);
  }

  /** The counts in total and per kind, with the store's mode and connection. */
  stats(status: { mode: 'redis' | 'memory'; connected: boolean }): CacheStats {
    const kinds: Record<string, KindStats> = {};
    let hits = 0;
    let misses = 0;
    for (const [kind, s] of this.#byKind) {
      kinds[kind] = { ...s };
      hits += s.hits;
      misses += s.misses;
    }
    return { mode: status.mode, connected: status.connected, hits, misses, kinds };
  }
}
