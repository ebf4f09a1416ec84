/**
 * The one cache engine every market-data read goes through: a keyed cache of ready-to-send
 * representations. A read names a kind, its canonical parameters and a loader; the engine does
 * cache-aside with single-flight per key (one upstream call per process, and one per fleet through a
 * short lock per key), computes bytes and ETag once per cached value, keeps an in-process copy of
 * recent hits, answers an expired copy for a failed upstream when stale-if-error is on, and flushes
 * everything it stores on every instance.
 */
import { createHash } from 'node:crypto';
import QuickLRU from 'quick-lru';
import { CacheUnavailableError, DataSourceError } from '../domain/errors.js';
import { channels, keys } from '../domain/key-space.js';
import type { Logger } from '../domain/ports.js';
import { NO_METRICS, type Broadcast, type CacheEntry, type CacheResult, type CacheStore, type Metrics } from '../domain/ports.js';

/** The `X-Cache` value: from the cache, fetched upstream now, or an expired copy standing in for a failed upstream. */
export type CacheStatusHeader = 'HIT' | 'MISS' | 'STALE';

/** The kinds of cached data, each under its own key prefix. */
export const CACHE_KINDS = ['indices', 'quote', 'quotes', 'history', 'search'] as const;
export type CacheKind = (typeof CACHE_KINDS)[number];

/** The channel on which `flush()` tells every instance to drop its in-process copies. */
export const INVALIDATE_CHANNEL = channels.invalidate;

/** What a loader produced: the serialized value to cache and how long it lives. */
export interface Loaded {
  /** The exact string to store and send (a JSON body, or a marker the caller understands). */
  value: string;
  /** Lifetime in milliseconds (at least 1000). */
  ttlMs: number;
  /**
   * True when the value was assembled from expired copies standing in for a failed upstream (a
   * batch of stale quotes): it is answered as STALE and never stored.
   */
  stale?: boolean;
  /**
   * False when the value was assembled from entries already in the cache, without asking the
   * upstream (a batch of cached quotes): it is stored as any, and answered as a HIT.
   */
  fetched?: boolean;
}

/** One read: what it is, how to name it, and how to produce it on a miss. */
export interface CacheRead {
  kind: CacheKind;
  /** Canonical parameters (already normalised: upper-cased symbols, defaults filled in). */
  params: string;
  /** Fetches the value upstream. Throws `DataSourceError` when the upstream fails. */
  load: () => Promise<Loaded>;
}

/** A ready-to-send value: the exact cached bytes and their validators. */
export interface CachedRepresentation {
  /** The full cache key, e.g. `mds:v1:quote:yahoo:AAPL`. */
  key: string;
  /** The cached string, unchanged. */
  value: string;
  /** `value` as UTF-8, byte-identical for every answer from one cache fill. */
  body: Buffer;
  /** Strong, quoted ETag of `body`. */
  etag: string;
  cacheStatus: CacheStatusHeader;
  /** Milliseconds the entry has left (0 for STALE). */
  ttlMs: number;
  /** Whole seconds the entry has left (0 for STALE): the `Cache-Control` max-age. */
  maxAgeSeconds: number;
}

/** Reads of one kind since the process started. */
export interface KindStats {
  hits: number;
  misses: number;
  stale: number;
}

/** What the cache reports about itself (the `cache` object of the admin status). */
export interface CacheStats {
  mode: 'redis' | 'memory';
  connected: boolean;
  hits: number;
  misses: number;
  kinds: Record<string, KindStats>;
}

/** Called after a value was fetched upstream and stored (a miss or a refresh), on this instance. */
export type FillListener = (fill: { kind: CacheKind; params: string; value: string }) => void;

export interface RepresentationCacheOptions {
  /** The cache; when it also has `status()` (ResilientCache), `stats()` reports it. */
  cache: CacheStore & { status?: () => { mode: 'redis' | 'memory'; connected: boolean } };
  /** Names the provider in every key, so switching providers never serves the other's data. */
  namespace: string;
  /** How long past its lifetime an expired copy may answer for a failed upstream; 0 turns it off. */
  staleIfErrorMs: number;
  /** Lifetime of the fill/refresh lock; longer than an upstream call may take. Default 10000. */
  lockTtlMs?: number;
  /** How long a miss waits for another holder of the lock to fill the cache before fetching itself. Default 5000. */
  lockWaitMs?: number;
  logger: Logger;
  /**
   * How long a hit may be answered from this process's copy without asking the cache store again.
   * Default 1000; 0 asks the store on every read.
   */
  localMaxAgeMs?: number;
  /** How many keys keep an in-process copy (least recently used go first). Default 10000. */
  localMaxEntries?: number;
  /** Tells the other instances that share the store to drop their copies on `flush()`. */
  broadcast?: Broadcast;
  /** Counts every read by kind and result (hit, miss, stale). */
  metrics?: Pick<Metrics, 'cacheRequest'> | undefined;
  /** Clock in epoch milliseconds; `Date.now` by default. */
  now?: () => number;
}

/** The metrics result of each stats counter. */
const RESULT: Record<keyof KindStats, CacheResult> = { hits: 'hit', misses: 'miss', stale: 'stale' };

/** The last value seen for a key, ready to send: bytes and ETag are computed once per value. */
interface LocalCopy {
  value: string;
  body: Buffer;
  etag: string;
  /** When the store last confirmed this value (ms). */
  readAt: number;
  /** When the entry expires in the store (ms). */
  expiresAt: number;
  /** A background confirmation of this copy is under way. */
  confirming?: boolean;
}

const POLL_FIRST_MS = 20;
const POLL_MAX_MS = 100;

/** The keyed representation cache. One instance serves every kind of market data. */
export class RepresentationCache {
  readonly #cache: RepresentationCacheOptions['cache'];
  readonly #namespace: string;
  readonly #staleIfErrorMs: number;
  readonly #lockTtlMs: number;
  readonly #lockWaitMs: number;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #localMaxAgeMs: number;
  readonly #broadcast: Broadcast | undefined;
  readonly #local: QuickLRU<string, LocalCopy>;
  readonly #inflight = new Map<string, Promise<CachedRepresentation>>();
  readonly #stats = new Map<CacheKind, KindStats>(CACHE_KINDS.map((kind) => [kind, { hits: 0, misses: 0, stale: 0 }]));
  readonly #fillListeners = new Set<FillListener>();
  /** Bumped by every flush, so an in-flight confirmation from before it is ignored. */
  #generation = 0;
  readonly #metrics: Pick<Metrics, 'cacheRequest'>;

  constructor(options: RepresentationCacheOptions) {
    this.#cache = options.cache;
    this.#namespace = options.namespace;
    this.#staleIfErrorMs = Math.max(0, options.staleIfErrorMs);
    this.#lockTtlMs = options.lockTtlMs ?? 10_000;
    this.#lockWaitMs = options.lockWaitMs ?? 5_000;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#localMaxAgeMs = Math.max(0, options.localMaxAgeMs ?? 1000);
    this.#local = new QuickLRU({ maxSize: Math.max(1, options.localMaxEntries ?? 10_000) });
    this.#broadcast = options.broadcast;
    this.#metrics = options.metrics ?? NO_METRICS;
    this.#broadcast?.subscribe(INVALIDATE_CHANNEL, () => this.#dropCopies());
  }

  /** The store key of a read: `mds:v1:<kind>:<namespace>:<params>`. */
  keyOf(kind: CacheKind, params: string): string {
    return keys.representation(kind, this.#namespace, params);
  }

  /**
   * The representation of `read`: from the cache when it holds one (HIT), else loaded once for all
   * concurrent callers of this key and stored (MISS). Throws `DataSourceError` when the loader fails
   * and nothing cached can answer (with stale-if-error, an expired copy answers as STALE).
   */
  async read(read: CacheRead): Promise<CachedRepresentation> {
    const key = this.keyOf(read.kind, read.params);
    const fresh = this.fresh(key);
    if (fresh !== undefined) {
      this.#count(read.kind, 'hits');
      return fresh;
    }
    const entry = await this.#get(key);
    if (entry !== undefined) {
      this.#count(read.kind, 'hits');
      return this.#represent(key, entry.value, 'HIT', entry.ttlMs);
    }
    let inflight = this.#inflight.get(key);
    if (inflight === undefined) {
      const started = this.#now();
      inflight = this.#fill(read, key).finally(() => {
        this.#inflight.delete(key);
        this.#logger.debug({ key, fillMs: this.#now() - started }, 'cache fill finished');
      });
      this.#inflight.set(key, inflight);
    }
    const rep = await inflight;
    this.#count(read.kind, rep.cacheStatus === 'STALE' ? 'stale' : rep.cacheStatus === 'HIT' ? 'hits' : 'misses');
    return rep;
  }

  /**
   * This process's copy of `key` when the store confirmed it within `localMaxAgeMs` and it has not
   * expired; never asks the store. The fast path answers from it.
   */
  fresh(key: string): CachedRepresentation | undefined {
    const local = this.#local.get(key);
    if (local === undefined) return undefined;
    const now = this.#now();
    if (now - local.readAt >= this.#localMaxAgeMs || now >= local.expiresAt) return undefined;
    const ttlMs = local.expiresAt - now;
    return { key, value: local.value, body: local.body, etag: local.etag, cacheStatus: 'HIT', ttlMs, maxAgeSeconds: Math.floor(ttlMs / 1000) };
  }

  /**
   * `fresh(key)` for a caller that answers with the copy (the fast path): counts it as a hit of the
   * key's kind. Once the copy is half its allowed age, one background read of the store confirms it
   * (or drops it), so under steady traffic the copy never ages out and no burst of requests has to
   * wait on the store together.
   */
  serveFresh(key: string): CachedRepresentation | undefined {
    const rep = this.fresh(key);
    if (rep !== undefined) {
      const local = this.#local.peek(key);
      if (local !== undefined && !local.confirming && this.#now() - local.readAt >= this.#localMaxAgeMs / 2) this.#confirm(key, local);
      const kind = keys.kindOf(key) as CacheKind;
      this.#count(kind, 'hits');
    }
    return rep;
  }

  /**
   * Loads upstream and overwrites the cached entry (the scheduler and the stream refresh ahead of
   * expiry). Resolves to 'skipped' when another instance (or an in-flight fill) holds the key's lock.
   * Throws `DataSourceError` when the loader fails.
   */
  async refresh(read: CacheRead): Promise<'ok' | 'skipped'> {
    const key = this.keyOf(read.kind, read.params);
    if (this.#inflight.has(key)) return 'skipped';
    const token = await this.#tryLock(key);
    if (token === undefined) return 'skipped';
    try {
      await this.#loadAndStore(read, key);
      return 'ok';
    } finally {
      if (token !== null) await this.#unlock(key, token);
    }
  }

  /**
   * Removes every cached representation of every kind, fresh and stale (never the whole database,
   * never throttling counters or locks), here and in every instance's in-process copies; resolves
   * to how many keys went.
   */
  async flush(): Promise<number> {
    this.#dropCopies();
    let removed = 0;
    for (const kind of CACHE_KINDS) {
      removed += await this.#cache.deleteByPrefix(keys.representationsOf(kind));
      removed += await this.#cache.deleteByPrefix(keys.staleOf(kind));
    }
    await this.#broadcast?.publish(INVALIDATE_CHANNEL, 'flush');
    return removed;
  }

  /** Calls `listener` after every value this instance loads and stores; returns a function that stops it. */
  onFill(listener: FillListener): () => void {
    this.#fillListeners.add(listener);
    return () => this.#fillListeners.delete(listener);
  }

  /** The cache's mode and connection, with this process's read counts in total and per kind. */
  stats(): CacheStats {
    const status = this.#cache.status?.() ?? { mode: 'memory' as const, connected: false };
    const kinds: Record<string, KindStats> = {};
    let hits = 0;
    let misses = 0;
    for (const [kind, s] of this.#stats) {
      kinds[kind] = { ...s };
      hits += s.hits;
      misses += s.misses;
    }
    return { mode: status.mode, connected: status.connected, hits, misses, kinds };
  }

  /** Drops every in-process copy; a confirmation started before it cannot bring one back. */
  #dropCopies(): void {
    this.#local.clear();
    this.#generation += 1;
  }

  /** Reads `key` from the store in the background: a hit renews the copy, a miss drops it. */
  #confirm(key: string, local: LocalCopy): void {
    local.confirming = true;
    const generation = this.#generation;
    this.#get(key).then(
      (entry) => {
        local.confirming = false;
        if (generation !== this.#generation || this.#local.peek(key) !== local) return;
        if (entry === undefined) this.#local.delete(key);
        else this.#represent(key, entry.value, 'HIT', entry.ttlMs);
      },
      () => {
        local.confirming = false;
      },
    );
  }

  #count(kind: CacheKind, result: keyof KindStats): void {
    const s = this.#stats.get(kind);
    if (s !== undefined) s[result] += 1;
    this.#metrics.cacheRequest(kind, RESULT[result]);
  }

  async #fill(read: CacheRead, key: string): Promise<CachedRepresentation> {
    let token = await this.#tryLock(key);
    if (token === undefined) {
      const waited = await this.#waitForFill(key);
      // The holder is slow or gone; answering late beats failing.
      if (waited === undefined) return this.#loadOrStale(read, key);
      if ('entry' in waited) return this.#represent(key, waited.entry.value, 'HIT', waited.entry.ttlMs);
      token = waited.token;
    }
    try {
      // A fill that finished between our miss and the lock (here or on another instance) already did the work.
      const entry = await this.#get(key);
      if (entry !== undefined) return this.#represent(key, entry.value, 'HIT', entry.ttlMs);
      return await this.#loadOrStale(read, key);
    } finally {
      if (token !== null) await this.#unlock(key, token);
    }
  }

  async #loadOrStale(read: CacheRead, key: string): Promise<CachedRepresentation> {
    try {
      return await this.#loadAndStore(read, key);
    } catch (err) {
      if (!(err instanceof DataSourceError) || this.#staleIfErrorMs === 0) throw err;
      const stale = await this.#get(this.#staleKey(key));
      if (stale === undefined) throw err;
      this.#logger.warn({ key, err: err.message }, 'upstream failed: serving the stale copy');
      return this.#represent(key, stale.value, 'STALE', 0);
    }
  }

  async #loadAndStore(read: CacheRead, key: string): Promise<CachedRepresentation> {
    const { value, ttlMs: lifetime, stale, fetched } = await read.load();
    if (stale === true) {
      // The last good copy of this very key says the same with the bytes and ETag clients already have.
      const own = this.#staleIfErrorMs > 0 ? await this.#get(this.#staleKey(key)) : undefined;
      return this.#represent(key, own?.value ?? value, 'STALE', 0);
    }
    const ttlMs = Math.max(1000, Math.round(lifetime));
    const writes = [this.#set(key, value, ttlMs)];
    if (this.#staleIfErrorMs > 0) writes.push(this.#set(this.#staleKey(key), value, ttlMs + this.#staleIfErrorMs));
    await Promise.all(writes);
    for (const listener of this.#fillListeners) {
      try {
        listener({ kind: read.kind, params: read.params, value });
      } catch (err) {
        this.#logger.error({ err, key }, 'a cache fill listener failed');
      }
    }
    return this.#represent(key, value, fetched === false ? 'HIT' : 'MISS', ttlMs);
  }

  #staleKey(key: string): string {
    return keys.stale(key);
  }

  /**
   * The value as sent: bytes and ETag are reused while the cached string is unchanged, so hits do no
   * hashing. `ttlMs` is what the store says the entry has left; a STALE answer is never kept as the
   * local copy.
   */
  #represent(key: string, value: string, cacheStatus: CacheStatusHeader, ttlMs: number): CachedRepresentation {
    const now = this.#now();
    let local = this.#local.get(key);
    if (local === undefined || local.value !== value) {
      const body = Buffer.from(value, 'utf8');
      local = { value, body, etag: `"${createHash('sha1').update(body).digest('base64url')}"`, readAt: now, expiresAt: now + ttlMs };
    } else {
      local = { ...local, readAt: now, expiresAt: now + ttlMs, confirming: false };
    }
    if (cacheStatus !== 'STALE') this.#local.set(key, local);
    const left = cacheStatus === 'STALE' ? 0 : ttlMs;
    return { key, value, body: local.body, etag: local.etag, cacheStatus, ttlMs: left, maxAgeSeconds: Math.max(0, Math.floor(left / 1000)) };
  }

  /**
   * Polls until the lock holder has filled the cache (`entry`) or has let go of the lock without
   * filling it (`token`: the lock is now ours, fill it); `undefined` after `lockWaitMs`.
   */
  async #waitForFill(key: string): Promise<{ entry: CacheEntry } | { token: string | null } | undefined> {
    const deadline = Date.now() + this.#lockWaitMs;
    let delay = POLL_FIRST_MS;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(delay, Math.max(1, deadline - Date.now()))));
      const entry = await this.#get(key);
      if (entry !== undefined) return { entry };
      // A holder whose upstream call failed releases the lock without filling: waiting out lockWaitMs
      // would only delay this caller's answer (a 503 five seconds late).
      const token = await this.#tryLock(key);
      if (token !== undefined) return { token };
      delay = Math.min(delay * 2, POLL_MAX_MS);
    }
    return undefined;
  }

  #lockKey(key: string): string {
    return keys.fillLock(key);
  }

  /** A token; `undefined` when someone else holds the lock; `null` when the cache cannot lock (go ahead unlocked). */
  async #tryLock(key: string): Promise<string | undefined | null> {
    try {
      return await this.#cache.acquireLock(this.#lockKey(key), this.#lockTtlMs);
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      this.#logger.warn({ err: err.message }, 'cache cannot lock: loading without the lock');
      return null;
    }
  }

  async #unlock(key: string, token: string): Promise<void> {
    try {
      await this.#cache.releaseLock(this.#lockKey(key), token);
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      // The lock expires on its own TTL.
    }
  }

  async #get(key: string): Promise<CacheEntry | undefined> {
    try {
      return await this.#cache.get(key);
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      this.#logger.warn({ err: err.message }, 'cache read failed: treating it as a miss');
      return undefined;
    }
  }

  async #set(key: string, value: string, ttlMs: number): Promise<void> {
    try {
      await this.#cache.set(key, value, ttlMs);
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      this.#logger.warn({ err: err.message }, 'cache write failed: the response is served but not cached');
    }
  }
}
