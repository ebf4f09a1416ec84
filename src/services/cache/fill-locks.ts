/**
 * One fill per key: in this process (concurrent misses share one promise) and in the fleet (a short
 * lock per key in the store). A miss that finds the lock held waits for the holder's fill for
 * `lockWaitMs` at most, and no longer once the store changes mode (Redis lost or back): a lock left by
 * a dead instance, or stranded by a failover, never holds a read for seconds.
 */
import { keys } from '../../domain/key-space.js';
import type { FallbackCacheStore } from '../../domain/ports/cache.js';

const POLL_FIRST_MS = 20;
const POLL_MAX_MS = 100;
/** The default bound of a miss waiting on another instance's fill; the read fills itself after it. */
export const LOCK_WAIT_MS = 500;

export interface FillLocksOptions {
  store: FallbackCacheStore;
  /** Lifetime of a lock; longer than an upstream call may take. */
  lockTtlMs: number;
  /** How long a miss waits for another holder's fill before filling itself. */
  lockWaitMs: number;
}

export class FillLocks<T> {
  readonly #store: FallbackCacheStore;
  readonly #lockTtlMs: number;
  readonly #lockWaitMs: number;
  readonly #inflight = new Map<string, Promise<T>>();

  constructor(options: FillLocksOptions) {
    this.#store = options.store;
    this.#lockTtlMs = options.lockTtlMs;
    this.#lockWaitMs = options.lockWaitMs;
  }

  /** The fill of `key` in progress in this process, or `fill()` started now and shared until it settles. */
  once(key: string, fill: () => Promise<T>): Promise<T> {
    let inflight = this.#inflight.get(key);
    if (inflight === undefined) {
      inflight = fill().finally(() => this.#inflight.delete(key));
      this.#inflight.set(key, inflight);
    }
    return inflight;
  }

  /** Whether this process is filling `key` now. */
  filling(key: string): boolean {
    return this.#inflight.has(key);
  }

  /**
   * A token for the fill lock of `key`, or `undefined` while someone else holds it. In a cluster the
   * lock may live on another node than the value (no command names both); a lock stranded there by a
   * failover holds a read for `lockWaitMs` at most.
   */
  tryLock(key: string): Promise<string | undefined> {
    return this.#store.acquireLock(keys.fillLock(key), this.#lockTtlMs);
  }

  /** Lets go of the lock of `key` if `token` still holds it (else it expires on its own TTL). */
  unlock(key: string, token: string): Promise<void> {
    return this.#store.releaseLock(keys.fillLock(key), token);
  }

  /**
   * Polls until the lock holder has filled the cache (`filled`: what `read` found) or has let go of
   * the lock without filling it (`token`: the lock is now ours, fill it); `undefined` after
   * `lockWaitMs`, or at once when the store stops being the one the wait began on (it fell back to
   * memory, or Redis came back): a holder on another instance can then neither be seen filling nor
   * be relied on to.
   */
  async waitForFill<E>(key: string, read: () => Promise<E | undefined>): Promise<{ filled: E } | { token: string } | undefined> {
    const deadline = Date.now() + this.#lockWaitMs;
    const mode = this.#mode();
    let delay = POLL_FIRST_MS;
    while (Date.now() < deadline && this.#mode() === mode) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(delay, Math.max(1, deadline - Date.now()))));
      const filled = await read();
      if (filled !== undefined) return { filled };
      if (this.#mode() !== mode || Date.now() >= deadline) break;
      // A holder whose upstream call failed releases the lock without filling: waiting out lockWaitMs
      // would only delay this caller's answer.
      const token = await this.tryLock(key);
      if (token !== undefined) return { token };
      delay = Math.min(delay * 2, POLL_MAX_MS);
    }
    return undefined;
  }

  /** Which store answers now (Redis or memory); `redis` for a store that does not say. */
  #mode(): 'redis' | 'memory' {
    return this.#store.status?.().mode ?? 'redis';
  }
}
