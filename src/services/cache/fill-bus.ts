/**
 * What the representation cache tells others: this process's fill listeners hear every body stored
 * here (the stream hub versions and announces it), and a flush empties the store and every
 * instance's in-process copies (through the invalidate channel, which `LocalMemory` listens to).
 */
import { channels, keys } from '../../domain/key-space.js';
import type { Logger } from '../../domain/ports/logger.js';
import type { Broadcast, FallbackCacheStore } from '../../domain/ports/cache.js';
import { CACHE_KINDS, type FillListener } from './cache-types.js';

/** The channel on which a flush tells every instance to drop its in-process copies. */
export const INVALIDATE_CHANNEL = channels.invalidate;

export class FillBus {
  readonly #listeners = new Set<FillListener>();
  readonly #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Calls `listener` after every body this instance loads and stores; returns a function that stops it. */
  onFill(listener: FillListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Tells every listener of one fill; a listener that throws is logged and never fails the read. */
  announce(fill: Parameters<FillListener>[0], key: string): void {
    for (const listener of this.#listeners) {
      try {
        listener(fill);
      } catch (err) {
        this.#logger.error({ err, key }, 'a cache fill listener failed');
      }
    }
  }
}

/**
 * Removes every cached representation of every kind (never the whole database, never throttling
 * counters or locks) and tells every instance to drop its copies; resolves to how many keys went.
 */
export async function flushRepresentations(store: FallbackCacheStore, broadcast: Broadcast | undefined): Promise<number> {
  let removed = 0;
  for (const kind of CACHE_KINDS) {
    for (const prefix of keys.flushOf(kind)) removed += await store.deleteByPrefix(prefix);
  }
  await broadcast?.publish(INVALIDATE_CHANNEL, 'flush');
  return removed;
}
