/**
 * The one cache engine every market-data read goes through: a keyed cache of ready-to-send
 * representations. A read (`read()`) follows one path top to bottom: this process's copy → a caller's
 * remembered answer → the store → one fill per key (fill-locks.ts) → the loader → one SET of the entry
 * → the fill listeners (fill-bus.ts). A failed upstream is answered by the same entry read past its
 * fresh end (stale-if-error: its grace is a field of the entry, cache-entry.ts), or passes on.
 *
 * A loader's outcome is typed (cache-types.ts): a body found, a symbol the upstream does not know
 * (never stored here: the caller remembers those in a bounded structure of its own), a refusal of
 * what the upstream answered (stored), or a rejection for a failed upstream. The store never throws
 * (`FallbackCacheStore`): Redis failures fall back to memory below this file.
 */
import { DataSourceError } from '../../domain/errors.js';
import { keys } from '../../domain/key-space.js';
import type { Logger } from '../../domain/ports/logger.js';
import type { Metrics } from '../../domain/ports/metrics.js';
import type { Broadcast, FallbackCacheStore } from '../../domain/ports/cache.js';
import { sentBodyOf, type SentBody } from '../../domain/sent-json.js';
import { LocalMemory, type MemoryEntry } from '../local-memory.js';
import { decodeEntry, encodeEntry, encodeFoundEntryBytes, type BodyParts, type CacheEntry, type EntryValue } from './cache-entry.js';
import type { CachedRepresentation, CacheKind, CacheRead, CacheStats, CacheStatusHeader, FillListener, ReadOutcome } from './cache-types.js';
import { FillBus, flushRepresentations, INVALIDATE_CHANNEL } from './fill-bus.js';
import { FillLocks, LOCK_WAIT_MS } from './fill-locks.js';
import { ReadCounts } from './read-counts.js';

export interface RepresentationCacheOptions {
  /** The store; when it has `status()` (ResilientCache), `stats()` reports it. */
  cache: FallbackCacheStore;
  /** Names the provider in every key, so switching providers never serves the other's data. */
  namespace: string;
  /** How long past its lifetime an entry may answer for a failed upstream (its grace); 0 turns it off. */
  staleIfErrorMs: number;
  /** Lifetime of the fill/refresh lock; longer than an upstream call may take. Default 10000. */
  lockTtlMs?: number;
  /**
   * How long a miss waits for another holder of the lock to fill the cache before fetching itself.
   * Default `LOCK_WAIT_MS` (500). The wait also ends at once when the cache changes mode.
   */
  lockWaitMs?: number;
  logger: Logger;
  /**
   * How long a hit may be answered from this process's copy without asking the cache store again.
   * Default 1000; 0 asks the store on every read.
   */
  localMaxAgeMs?: number;
  /** How many keys keep an in-process copy (least recently used go first). Default 10000. */
  localMaxEntries?: number;
  /**
   * Tells the other instances that share the store to drop their copies on `flush()`. While it is not
   * live (a flush elsewhere may be missed), a copy is served only briefly before the store is asked again.
   */
  broadcast?: Broadcast;
  /** Counts every read by kind and result (hit, miss, stale). */
  metrics?: Pick<Metrics, 'cacheRequest'> | undefined;
  /** Clock in epoch milliseconds; `Date.now` by default. */
  now?: () => number;
}

/** The last body seen for a key, ready to send: bytes and ETag are computed once per value. */
interface LocalCopy {
  kind: CacheKind;
  /** The value as a string when it came as one (from the store, from a loader on this thread); bytes alone otherwise. */
  text: string | undefined;
  body: Buffer;
  etag: string;
  parts: BodyParts | undefined;
}

/** A representation's value as a string: its bytes decoded (a small body costs next to nothing; a large one is decoded once per caller that asks). */
export function textOf(rep: { body: Buffer }): string {
  return rep.body.toString('utf8');
}

/** Whether `copy` holds `value` (a string, or bytes with their ETag). */
function sameValue(copy: LocalCopy, value: string | SentBody): boolean {
  if (typeof value !== 'string') return copy.etag === value.etag;
  if (copy.text !== undefined) return copy.text === value;
  // A copy kept as bytes, and the same value read back from the store as a string: compared without encoding it.
  return copy.body.length === Buffer.byteLength(value) && copy.body.toString('utf8') === value;
}

/** The keyed representation cache. One instance serves every kind of market data. */
export class RepresentationCache {
  readonly #cache: FallbackCacheStore;
  readonly #namespace: string;
  readonly #staleIfErrorMs: number;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #broadcast: Broadcast | undefined;
  /** This process's copies, each confirmed by the store within `localMaxAgeMs` (less while flushes may be missed). */
  readonly #local: LocalMemory<string, LocalCopy>;
  /** Keys whose copy a background read of the store is confirming. */
  readonly #confirming = new Set<string>();
  readonly #locks: FillLocks<ReadOutcome>;
  readonly #fills: FillBus;
  readonly #counts: ReadCounts;

  constructor(options: RepresentationCacheOptions) {
    this.#cache = options.cache;
    this.#namespace = options.namespace;
    this.#staleIfErrorMs = Math.max(0, options.staleIfErrorMs);
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#broadcast = options.broadcast;
    this.#local = new LocalMemory({
      maxEntries: options.localMaxEntries ?? 10_000,
      maxAgeMs: options.localMaxAgeMs ?? 1000,
      invalidation: options.broadcast && { broadcast: options.broadcast, channel: INVALIDATE_CHANNEL },
      now: this.#now,
    });
    this.#locks = new FillLocks({ store: options.cache, lockTtlMs: options.lockTtlMs ?? 10_000, lockWaitMs: options.lockWaitMs ?? LOCK_WAIT_MS });
    this.#fills = new FillBus(options.logger);
    this.#counts = new ReadCounts(options.metrics);
  }

  /** The store key of a read: `mds:v<N>:<kind>:<namespace>:<params>`. */
  keyOf(kind: CacheKind, params: string): string {
    return keys.representation(kind, this.#namespace, params);
  }

  /**
   * The answer to `read`: from the cache when it holds a fresh one (HIT), else loaded once for all
   * concurrent callers of this key and stored (MISS). A representation, or why there is none (unknown,
   * refused). Throws `DataSourceError` when the loader fails and no entry in its grace can answer
   * (with stale-if-error, one answers as STALE).
   */
  async read(read: CacheRead): Promise<ReadOutcome> {
    const key = this.keyOf(read.kind, read.params);
    const fresh = this.fresh(key);
    if (fresh !== undefined) {
      this.#counts.count(read.kind, 'hits');
      return fresh;
    }
    if (read.remembered?.() !== undefined) {
      this.#counts.count(read.kind, 'hits');
      return { outcome: 'unknown', cacheStatus: 'HIT' };
    }
    const stored = await this.#getFresh(key);
    if (stored !== undefined) {
      this.#counts.count(read.kind, 'hits');
      return this.#answer(read.kind, key, stored, 'HIT');
    }
    const started = this.#now();
    const rep = await this.#locks.once(key, () =>
      this.#fill(read, key).finally(() => this.#logger.debug({ key, fillMs: this.#now() - started }, 'cache fill finished')),
    );
    this.#counts.count(read.kind, rep.cacheStatus === 'STALE' ? 'stale' : rep.cacheStatus === 'HIT' ? 'hits' : 'misses');
    return rep;
  }

  /**
   * This process's copy of `key` when the store confirmed it within `localMaxAgeMs` and it has not
   * expired; never asks the store. The fast path answers from it.
   */
  fresh(key: string): CachedRepresentation | undefined {
    const now = this.#now();
    const local = this.#local.entry(key, now);
    return local === undefined ? undefined : this.#hit(key, local, now);
  }

  /**
   * `fresh(key)` for a caller that answers with the copy (the fast path): counts it as a hit of the
   * key's kind. Once the copy is half its allowed age, one background read of the store confirms it
   * (or drops it), so under steady traffic the copy never ages out and no burst of requests has to
   * wait on the store together.
   */
  serveFresh(key: string): CachedRepresentation | undefined {
    const now = this.#now();
    const local = this.#local.entry(key, now);
    if (local === undefined) return undefined;
    if (now - local.storedAt >= this.#local.maxAgeMs(local) / 2 && !this.#confirming.has(key)) this.#confirm(key, local.value);
    this.#counts.count(local.value.kind, 'hits');
    return this.#hit(key, local, now);
  }

  /**
   * Loads upstream and overwrites the cached entry (the scheduler and the stream refresh ahead of
   * expiry). Resolves to 'skipped' when another instance (or an in-flight fill) holds the key's lock.
   * Throws `DataSourceError` when the loader fails.
   */
  async refresh(read: CacheRead): Promise<'ok' | 'skipped'> {
    const key = this.keyOf(read.kind, read.params);
    if (this.#locks.filling(key)) return 'skipped';
    const token = await this.#locks.tryLock(key);
    if (token === undefined) return 'skipped';
    try {
      await this.#loadAndStore(read, key);
      return 'ok';
    } finally {
      await this.#locks.unlock(key, token);
    }
  }

  /**
   * Stores a body that arrived without a read (a pushed price merged into the cached quote), as a
   * fill would: the entry and this process's copy are replaced, and the fill listeners hear of it
   * (the stream hub then versions and announces it).
   */
  async store(kind: CacheKind, params: string, value: string, ttlMs: number, parts?: BodyParts): Promise<void> {
    const key = this.keyOf(kind, params);
    const lifetime = Math.max(1000, Math.round(ttlMs));
    await this.#set(key, encodeEntry({ outcome: 'found', body: value, parts }, this.#staleIfErrorMs), lifetime);
    this.#represent(kind, key, value, parts, 'HIT', lifetime);
    this.#fills.announce({ kind, params, text: () => value, parts }, key);
  }

  /**
   * Removes every cached representation of every kind, here and in every instance's in-process
   * copies; resolves to how many keys went.
   */
  async flush(): Promise<number> {
    this.#local.clear();
    return flushRepresentations(this.#cache, this.#broadcast);
  }

  /** Calls `listener` after every body this instance loads and stores; returns a function that stops it. */
  onFill(listener: FillListener): () => void {
    return this.#fills.onFill(listener);
  }

  /** The cache's mode and connection, with this process's read counts in total and per kind. */
  stats(): CacheStats {
    return this.#counts.stats(this.#cache.status?.() ?? { mode: 'memory', connected: false });
  }

  /** A HIT answered from this process's copy. */
  #hit(key: string, local: MemoryEntry<LocalCopy>, now: number): CachedRepresentation {
    const ttlMs = local.expiresAt - now;
    const copy = local.value;
    return { outcome: 'found', kind: copy.kind, key, body: copy.body, etag: copy.etag, cacheStatus: 'HIT', ttlMs, maxAgeSeconds: Math.floor(ttlMs / 1000), parts: copy.parts };
  }

  /** Reads `key` from the store in the background: a fresh entry renews the copy, anything else drops it. */
  #confirm(key: string, copy: LocalCopy): void {
    this.#confirming.add(key);
    const version = this.#local.version;
    this.#getFresh(key).then(
      (stored) => {
        this.#confirming.delete(key);
        if (version !== this.#local.version || this.#local.peek(key)?.value !== copy) return;
        if (stored === undefined || stored.value.outcome !== 'found') this.#local.delete(key);
        else this.#answer(copy.kind, key, stored, 'HIT');
      },
      () => this.#confirming.delete(key),
    );
  }

  async #fill(read: CacheRead, key: string): Promise<ReadOutcome> {
    let token = await this.#locks.tryLock(key);
    if (token === undefined) {
      const waited = await this.#locks.waitForFill(key, () => this.#getFresh(key));
      // The holder is slow, gone, or out of reach; answering from the upstream beats waiting on it.
      if (waited === undefined) return this.#loadOrStale(read, key);
      if ('filled' in waited) return this.#answer(read.kind, key, waited.filled, 'HIT');
      token = waited.token;
    }
    try {
      // A fill that finished between our miss and the lock (here or on another instance) already did the work.
      const stored = await this.#getFresh(key);
      if (stored !== undefined) return this.#answer(read.kind, key, stored, 'HIT');
      return await this.#loadOrStale(read, key);
    } finally {
      await this.#locks.unlock(key, token);
    }
  }

  async #loadOrStale(read: CacheRead, key: string): Promise<ReadOutcome> {
    try {
      return await this.#loadAndStore(read, key);
    } catch (err) {
      if (!(err instanceof DataSourceError) || this.#staleIfErrorMs === 0) throw err;
      const entry = await this.#get(key);
      if (entry === undefined) throw err;
      // Another instance may have filled it meanwhile; otherwise the entry is in its grace.
      if (entry.freshUntilMs > this.#now()) return this.#answer(read.kind, key, entry, 'HIT');
      this.#logger.warn({ key, err: err.message }, 'upstream failed: serving the stale copy');
      return this.#answer(read.kind, key, entry, 'STALE');
    }
  }

  async #loadAndStore(read: CacheRead, key: string): Promise<ReadOutcome> {
    const loaded = await read.load();
    if (loaded.outcome === 'unknown') return { outcome: 'unknown', cacheStatus: loaded.fetched === false ? 'HIT' : 'MISS' };
    if (loaded.outcome === 'found' && loaded.stale === true) {
      // The last good copy of this very key says the same with the bytes and ETag clients already have.
      const own = this.#staleIfErrorMs > 0 ? await this.#get(key) : undefined;
      if (own?.value.outcome === 'found') return this.#represent(read.kind, key, own.value.body, own.value.parts, 'STALE', 0);
      return this.#represent(read.kind, key, loaded.sent ?? loaded.value, loaded.parts, 'STALE', 0);
    }
    // A body made on a compute thread arrives as bytes: stored as they are, never decoded here.
    const grace = this.#staleIfErrorMs;
    const value =
      loaded.outcome === 'refused'
        ? encodeEntry({ outcome: 'refused', refusal: loaded.refusal }, grace)
        : loaded.sent !== undefined
          ? encodeFoundEntryBytes(loaded.parts, loaded.sent.body, grace)
          : encodeEntry({ outcome: 'found', body: loaded.value, parts: loaded.parts }, grace);
    const ttlMs = Math.max(1000, Math.round(loaded.ttlMs));
    await this.#set(key, value, ttlMs);
    const cacheStatus = loaded.fetched === false ? 'HIT' : 'MISS';
    if (loaded.outcome === 'refused') return { outcome: 'refused', refusal: loaded.refusal, cacheStatus };
    const text = loaded.sent === undefined ? () => loaded.value : () => textOf(loaded.sent);
    this.#fills.announce({ kind: read.kind, params: read.params, text, parts: loaded.parts }, key);
    return this.#represent(read.kind, key, loaded.sent ?? loaded.value, loaded.parts, cacheStatus, ttlMs);
  }

  /** What a stored entry answers: a body to send, or why there is none. A HIT has what is left of its fresh time. */
  #answer(kind: CacheKind, key: string, entry: CacheEntry, cacheStatus: CacheStatusHeader): ReadOutcome {
    const value: EntryValue = entry.value;
    if (value.outcome === 'refused') return { outcome: 'refused', refusal: value.refusal, cacheStatus };
    const ttlMs = cacheStatus === 'STALE' ? 0 : Math.max(0, entry.freshUntilMs - this.#now());
    return this.#represent(kind, key, value.body, value.parts, cacheStatus, ttlMs);
  }

  /**
   * The value as sent: bytes and ETag are reused while the cached value is unchanged, so hits do no
   * hashing; `value` is the string, or the bytes and ETag a loader made (the compute pool does, off the
   * event loop). `ttlMs` is the fresh time the entry has left; a STALE answer is never kept as the
   * local copy.
   */
  #represent(kind: CacheKind, key: string, value: string | SentBody, parts: BodyParts | undefined, cacheStatus: CacheStatusHeader, ttlMs: number): CachedRepresentation {
    let copy = this.#local.peek(key)?.value;
    if (copy === undefined || !sameValue(copy, value)) copy = typeof value === 'string' ? { kind, text: value, ...sentBodyOf(value), parts } : { kind, text: undefined, ...value, parts };
    if (cacheStatus !== 'STALE') this.#local.set(key, copy, ttlMs);
    const left = cacheStatus === 'STALE' ? 0 : ttlMs;
    return { outcome: 'found', kind, key, body: copy.body, etag: copy.etag, cacheStatus, ttlMs: left, maxAgeSeconds: Math.max(0, Math.floor(left / 1000)), parts: copy.parts };
  }

  /** The entry under `key`, fresh or in its grace; `undefined` on a miss or a string this release cannot read. */
  async #get(key: string): Promise<CacheEntry | undefined> {
    const raw = await this.#cache.get(key);
    return raw === undefined ? undefined : decodeEntry(raw.value, raw.ttlMs, this.#now());
  }

  /** The entry under `key` while it is fresh: past its fresh end it is a miss (kept only for a failed upstream). */
  async #getFresh(key: string): Promise<CacheEntry | undefined> {
    const entry = await this.#get(key);
    return entry !== undefined && entry.freshUntilMs > this.#now() ? entry : undefined;
  }

  /** One SET: the entry lives `ttlMs` fresh, then its grace (`staleIfErrorMs`) in the store. */
  #set(key: string, value: string | Uint8Array, ttlMs: number): Promise<void> {
    return this.#cache.set(key, value, ttlMs + this.#staleIfErrorMs);
  }
}
