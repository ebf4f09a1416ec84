/**
 * The cache ports: the shared key-value store with time to live, and the broadcast between instances.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
/** A cached value with the time it has left to live. */
export interface CacheEntry {
  /** The stored string, unchanged. */
  value: string;
  /** Milliseconds left before the entry expires (0 when it expires now). */
  ttlMs: number;
}

/**
 * A key-value store for strings with per-entry time to live.
 * Every method throws `CacheUnavailableError` when the store cannot answer; a miss is never an error.
 */
export interface CacheStore {
  /** The entry under `key` with its remaining TTL, or `undefined` on a miss or an expired entry. */
  get(key: string): Promise<CacheEntry | undefined>;
  /**
   * Stores `value` under `key` for `ttlMs` milliseconds, replacing any previous entry. Bytes are the
   * string's UTF-8 (what `get` answers): a large value made as bytes is stored without being decoded
   * and encoded again on the event loop.
   */
  set(key: string, value: string | Uint8Array, ttlMs: number): Promise<void>;
  /** Removes `key`; resolves to true when something was removed. */
  delete(key: string): Promise<boolean>;
  /** Removes every key that starts with `prefix` (never anything else); resolves to how many were removed. */
  deleteByPrefix(prefix: string): Promise<number>;
  /**
   * Takes a lock named `key` for `ttlMs` milliseconds if nobody holds it.
   * Resolves to a token to pass to `releaseLock`, or `undefined` when the lock is held elsewhere.
   */
  acquireLock(key: string, ttlMs: number): Promise<string | undefined>;
  /** Releases a lock taken with `acquireLock`, only if `token` still owns it. */
  releaseLock(key: string, token: string): Promise<void>;
}

/**
 * A `CacheStore` that answers every call and never throws `CacheUnavailableError`: it falls back to
 * process memory on its own when the shared store fails (infra/cache's `ResilientCache`, or memory
 * alone). Its callers need no error handling of the store.
 */
export interface FallbackCacheStore extends CacheStore {
  /** Which store answers now and whether the shared one is connected; absent for a store with one mode. */
  status?(): { mode: 'redis' | 'memory'; connected: boolean };
}

/**
 * Best-effort messages to every instance sharing the cache store (this one included). A message
 * may be lost while the store is away; subscribers must treat it as a hint, never as the only truth.
 */
export interface Broadcast {
  /** Delivers `message` to every subscriber of `channel`, here at once and elsewhere through the store. */
  publish(channel: string, message: string): Promise<void>;
  /** Calls `listener` for each message on `channel`; returns a function that stops it. */
  subscribe(channel: string, listener: (message: string) => void): () => void;
  /**
   * True while messages other instances publish reach this one (or no other instance can exist: no
   * shared store is configured). While false, anything kept because "another instance would tell us
   * when it changes" must not be trusted.
   */
  live(): boolean;
  /**
   * Calls `listener` each time delivery becomes live again after a gap, when messages may have been
   * missed: whatever was kept on the strength of those messages must be dropped. Returns a function that stops it.
   */
  onResync(listener: () => void): () => void;
}
