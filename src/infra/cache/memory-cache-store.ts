/**
 * In-process `CacheStore` on quick-lru: the fallback when Redis is absent or down, and the store of a
 * single instance. Bounded by entry count; each entry expires on its own TTL.
 */
import { randomUUID } from 'node:crypto';
import QuickLRU from 'quick-lru';
import type { CacheEntry, CacheStore } from '../../domain/ports/cache.js';

export interface MemoryCacheStoreOptions {
  /**
   * Target maximum number of entries (CACHE_MEMORY_MAX_ENTRIES). quick-lru keeps two generations,
   * so up to about twice this many may be held before the older generation is dropped.
   */
  maxEntries: number;
}

interface Lock {
  token: string;
  expiresAt: number;
}

/** A `CacheStore` in this process's memory. It never throws `CacheUnavailableError`. */
export class MemoryCacheStore implements CacheStore {
  /** Bytes as given (outside the JavaScript heap), decoded when read. */
  readonly #entries: QuickLRU<string, string | Uint8Array>;
  // Locks live outside the LRU so that cache pressure can never evict a held lock.
  readonly #locks = new Map<string, Lock>();

  constructor(options: MemoryCacheStoreOptions) {
    if (!Number.isInteger(options.maxEntries) || options.maxEntries < 1) {
      throw new RangeError(`maxEntries must be a positive integer, got ${options.maxEntries}`);
    }
    this.#entries = new QuickLRU({ maxSize: options.maxEntries });
  }

  /** The entry under `key` with its remaining TTL in ms, or `undefined` on a miss or an expired entry. */
  async get(key: string): Promise<CacheEntry | undefined> {
    const value = this.#entries.get(key);
    if (value === undefined) return undefined;
    const ttlMs = this.#entries.expiresIn(key) ?? 0;
    // quick-lru compares expiry with `<=` on its own clock read; a read landing on the same ms is a miss.
    if (ttlMs <= 0) {
      this.#entries.delete(key);
      return undefined;
    }
    if (typeof value === 'string') return { value, ttlMs };
    // Stored as bytes: decoded once, and the string kept in their place for the next read.
    const text = Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8');
    this.#entries.set(key, text, { maxAge: ttlMs });
    return { value: text, ttlMs };
  }

  /** Stores `value` under `key` for `ttlMs` milliseconds (at least 1), replacing any previous entry. */
  async set(key: string, value: string | Uint8Array, ttlMs: number): Promise<void> {
    this.#entries.set(key, value, { maxAge: positiveMs(ttlMs) });
  }

  /** Removes `key`; true when a live entry was removed. */
  async delete(key: string): Promise<boolean> {
    const live = this.#entries.has(key);
    this.#entries.delete(key);
    return live;
  }

  /** Removes every live entry whose key starts with `prefix`; resolves to how many were removed. */
  async deleteByPrefix(prefix: string): Promise<number> {
    // Iterating skips (and drops) expired entries, so only live ones are counted.
    const doomed: string[] = [];
    for (const key of this.#entries.keys()) if (key.startsWith(prefix)) doomed.push(key);
    for (const key of doomed) this.#entries.delete(key);
    return doomed.length;
  }

  /** Takes the in-process lock `key` for `ttlMs` ms; a token, or `undefined` while someone else holds it. */
  async acquireLock(key: string, ttlMs: number): Promise<string | undefined> {
    const now = Date.now();
    const held = this.#locks.get(key);
    if (held && held.expiresAt > now) return undefined;
    const token = randomUUID();
    this.#locks.set(key, { token, expiresAt: now + positiveMs(ttlMs) });
    if (this.#locks.size > 1024) this.#dropExpiredLocks(now);
    return token;
  }

  /** Releases the lock `key` if `token` still owns it; otherwise does nothing. */
  async releaseLock(key: string, token: string): Promise<void> {
    if (this.#locks.get(key)?.token === token) this.#locks.delete(key);
  }

  /** Extends the lock `key` to `ttlMs` from now if `token` still owns it and it has not expired. */
  async extendLock(key: string, token: string, ttlMs: number): Promise<boolean> {
    const held = this.#locks.get(key);
    const now = Date.now();
    if (held?.token !== token || held.expiresAt <= now) return false;
    held.expiresAt = now + positiveMs(ttlMs);
    return true;
  }

  /** Drops every entry and lock (used on close). */
  clear(): void {
    this.#entries.clear();
    this.#locks.clear();
  }

  #dropExpiredLocks(now: number): void {
    for (const [key, lock] of this.#locks) if (lock.expiresAt <= now) this.#locks.delete(key);
  }
}

function positiveMs(ttlMs: number): number {
  if (!Number.isFinite(ttlMs)) throw new RangeError(`ttlMs must be a finite number of milliseconds, got ${ttlMs}`);
  return Math.max(1, Math.ceil(ttlMs));
}
