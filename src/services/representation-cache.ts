/**
 * The one cache engine every market-data read goes through: a keyed cache of ready-to-send
 * representations. A read names a kind, its canonical parameters and a loader; the engine does
 * cache-aside with single-flight per key (one upstream call per process, and one per fleet through a
 * short lock per key), computes bytes and ETag once per cached value, keeps an in-process copy of
 * recent hits, answers an expired copy for a failed upstream when stale-if-error is on, and flushes
 * everything it stores on every instance.
 *
 * A loader's outcome is typed: a body found, a symbol the upstream does not know (never stored here:
 * the caller remembers those in a bounded structure of its own), a refusal of what the upstream
 * answered (stored), or a rejection for a failed upstream. What is stored is typed too
 * (`stored-entry.ts`): the outcome is a field of the entry, never a prefix of the body. A miss waits for another instance's fill
 * for `lockWaitMs` (500 ms) at most, and no longer once the cache changes mode (Redis lost or back):
 * a lock left by a dead instance, or stranded by a failover, never holds a read for seconds.
 */
import { CacheUnavailableError, DataSourceError } from '../domain/errors.js';
import { sentBodyOf, type SentBody } from '../domain/sent-json.js';
import { channels, keys } from '../domain/key-space.js';
import { LocalMemory, type MemoryEntry } from './local-memory.js';
import { decodeEntry, encodeEntry, encodeFoundEntryBytes, type BodyParts, type Refusal, type StoredEntry } from './stored-entry.js';
import type { Logger } from '../domain/ports/logger.js';
import { NO_METRICS, type CacheResult, type Metrics } from '../domain/ports/metrics.js';
import type { Broadcast, CacheStore } from '../domain/ports/cache.js';

/** The `X-Cache` value: from the cache, fetched upstream now, or an expired copy standing in for a failed upstream. */
export type CacheStatusHeader = 'HIT' | 'MISS' | 'STALE';

/** The kinds of cached data, each under its own key prefix. */
// `quote_in` is a quote converted to another currency (`currency=`): its own kind, so the stream, which
// follows `quote` fills by symbol, never mistakes one for a symbol's price.
export const CACHE_KINDS = ['indices', 'quote', 'quote_in', 'quotes', 'history', 'search', 'indicators'] as const;
export type CacheKind = (typeof CACHE_KINDS)[number];

/** The channel on which `flush()` tells every instance to drop its in-process copies. */
export const INVALIDATE_CHANNEL = channels.invalidate;

/**
 * What a loader found: the serialized body to cache and send, and how long it lives.
 */
export type Found = FoundFields &
  (
    | {
        /** The exact string to store and send (a JSON body). */
        value: string;
        sent?: undefined;
      }
    | {
        value?: undefined;
        /** The value as its bytes and ETag, made by the loader (the compute pool does, off the event loop): stored and sent as they are. */
        sent: SentBody;
      }
  );

interface FoundFields {
  outcome: 'found';
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
  /** Where the body's data lies and what it says of it, for answers assembled from this one (a quote in a batch). */
  parts?: BodyParts | undefined;
}

/**
 * The upstream does not know what was asked (an unknown symbol). Never stored under the read's key:
 * the caller keeps negative answers in its own bounded memory and hands them back through
 * `CacheRead.remembered`, so junk asked for does not grow the store by one key each.
 */
export interface Unknown {
  outcome: 'unknown';
  /** False when the caller answered from its own memory of negative answers (counted as a hit). */
  fetched?: boolean;
}

/**
 * The upstream answered, but what it answered cannot be served (a history window with more candles
 * than one answer carries). Stored like a body, so the next read does not ask the upstream again.
 */
export interface Refused {
  outcome: 'refused';
  /** Why, as a type (a window of too many candles, with its count). */
  refusal: Refusal;
  ttlMs: number;
  fetched?: boolean;
}

/**
 * What a loader produced. A failed upstream is the fourth outcome: the loader rejects with
 * `DataSourceError`, and the engine answers with an expired copy (stale-if-error) or passes it on.
 */
export type Loaded = Found | Unknown | Refused;

/** One read: what it is, how to name it, and how to produce it on a miss. */
export interface CacheRead {
  kind: CacheKind;
  /** Canonical parameters (already normalised: upper-cased symbols, defaults filled in). */
  params: string;
  /** Fetches the value upstream. Throws `DataSourceError` when the upstream fails. */
  load: () => Promise<Loaded>;
  /**
   * An answer the caller already holds in its own memory (a remembered unknown symbol), asked after
   * this process's copy and before the store; `undefined` when it holds none. Must not do I/O.
   */
  remembered?: () => Unknown | undefined;
}

/** A ready-to-send value: the exact cached bytes and their validators. */
export interface CachedRepresentation {
  outcome: 'found';
  /** What kind of data it is (the read named it; never parsed back from the key). */
  kind: CacheKind;
  /** The full cache key, e.g. `mds:v1:quote:yahoo:AAPL`. */
  key: string;
  /**
   * The cached value as UTF-8, byte-identical for every answer from one cache fill (`textOf` gives it
   * as a string). A body made on a compute thread stays bytes: it is never decoded on the event loop
   * unless a caller asks for its text.
   */
  body: Buffer;
  /** Strong, quoted ETag of `body`. */
  etag: string;
  cacheStatus: CacheStatusHeader;
  /** Milliseconds the entry has left (0 for STALE). */
  ttlMs: number;
  /** Whole seconds the entry has left (0 for STALE): the `Cache-Control` max-age. */
  maxAgeSeconds: number;
  /** Where the body's data lies, when the loader said (see `Found.parts`). */
  parts?: BodyParts | undefined;
}

/** How a read ended when the upstream does not know the thing asked for. */
export interface UnknownAnswer {
  outcome: 'unknown';
  cacheStatus: CacheStatusHeader;
}

/** How a read ended when the upstream's answer cannot be served. */
export interface RefusedAnswer {
  outcome: 'refused';
  refusal: Refusal;
  cacheStatus: CacheStatusHeader;
}

/** What a read answers: a representation to send, or why there is none. A failed upstream rejects. */
export type ReadOutcome = CachedRepresentation | UnknownAnswer | RefusedAnswer;

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

/** Called after a body was fetched upstream and stored (a miss or a refresh), on this instance. */
/** What a fill listener hears: the body's text is decoded only for a listener that asks (`text()`), so a large body made as bytes stays bytes. */
export type FillListener = (fill: { kind: CacheKind; params: string; text: () => string; parts?: BodyParts | undefined }) => void;

export interface RepresentationCacheOptions {
  /** The cache; when it also has `status()` (ResilientCache), `stats()` reports it. */
  cache: CacheStore & { status?: () => { mode: 'redis' | 'memory'; connected: boolean } };
  /** Names the provider in every key, so switching providers never serves the other's data. */
  namespace: string;
  /** How long past its lifetime an expired copy may answer for a failed upstream; 0 turns it off. */
  staleIfErrorMs: number;
  /** Lifetime of the fill/refresh lock; longer than an upstream call may take. Default 10000. */
  lockTtlMs?: number;
  /**
   * How long a miss waits for another holder of the lock to fill the cache before fetching itself.
   * Default `LOCK_WAIT_MS` (500): a holder that died with the lock, or a store that failed over, never
   * makes a read wait a second. The wait also ends at once when the cache changes mode.
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

/** The metrics result of each stats counter. */
const RESULT: Record<keyof KindStats, CacheResult> = { hits: 'hit', misses: 'miss', stale: 'stale' };

/** The last body seen for a key, ready to send: bytes and ETag are computed once per value. */
interface LocalCopy {
  kind: CacheKind;
  /** The value as a string when it came as one (from the store, from a loader on this thread); bytes alone otherwise. */
  text: string | undefined;
  body: Buffer;
  etag: string;
  parts: BodyParts | undefined;
}

/** A stored entry as read, with the time it has left. */
interface ReadEntry {
  entry: StoredEntry;
  ttlMs: number;
}

const POLL_FIRST_MS = 20;
const POLL_MAX_MS = 100;
/** The default bound of a miss waiting on another instance's fill; the read fills itself after it. */
export const LOCK_WAIT_MS = 500;

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
  readonly #cache: RepresentationCacheOptions['cache'];
  readonly #namespace: string;
  readonly #staleIfErrorMs: number;
  readonly #lockTtlMs: number;
  readonly #lockWaitMs: number;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #broadcast: Broadcast | undefined;
  /** This process's copies, each confirmed by the store within `localMaxAgeMs` (less while flushes may be missed). */
  readonly #local: LocalMemory<string, LocalCopy>;
  /** Keys whose copy a background read of the store is confirming. */
  readonly #confirming = new Set<string>();
  readonly #inflight = new Map<string, Promise<ReadOutcome>>();
  readonly #stats = new Map<CacheKind, KindStats>(CACHE_KINDS.map((kind) => [kind, { hits: 0, misses: 0, stale: 0 }]));
  readonly #fillListeners = new Set<FillListener>();
  readonly #metrics: Pick<Metrics, 'cacheRequest'>;

  constructor(options: RepresentationCacheOptions) {
    this.#cache = options.cache;
    this.#namespace = options.namespace;
    this.#staleIfErrorMs = Math.max(0, options.staleIfErrorMs);
    this.#lockTtlMs = options.lockTtlMs ?? 10_000;
    this.#lockWaitMs = options.lockWaitMs ?? LOCK_WAIT_MS;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#broadcast = options.broadcast;
    this.#local = new LocalMemory({
      maxEntries: options.localMaxEntries ?? 10_000,
      maxAgeMs: options.localMaxAgeMs ?? 1000,
      invalidation: options.broadcast && { broadcast: options.broadcast, channel: INVALIDATE_CHANNEL },
      now: this.#now,
    });
    this.#metrics = options.metrics ?? NO_METRICS;
  }

  /** The store key of a read: `mds:v1:<kind>:<namespace>:<params>`. */
  keyOf(kind: CacheKind, params: string): string {
    return keys.representation(kind, this.#namespace, params);
  }

  /**
   * The answer to `read`: from the cache when it holds one (HIT), else loaded once for all concurrent
   * callers of this key and stored (MISS). A representation, or why there is none (unknown, refused).
   * Throws `DataSourceError` when the loader fails and nothing cached can answer (with
   * stale-if-error, an expired copy answers as STALE).
   */
  async read(read: CacheRead): Promise<ReadOutcome> {
    const key = this.keyOf(read.kind, read.params);
    const fresh = this.fresh(key);
    if (fresh !== undefined) {
      this.#count(read.kind, 'hits');
      return fresh;
    }
    if (read.remembered?.() !== undefined) {
      this.#count(read.kind, 'hits');
      return { outcome: 'unknown', cacheStatus: 'HIT' };
    }
    const stored = await this.#get(key);
    if (stored !== undefined) {
      this.#count(read.kind, 'hits');
      return this.#answer(read.kind, key, stored.entry, 'HIT', stored.ttlMs);
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
    this.#count(local.value.kind, 'hits');
    return this.#hit(key, local, now);
  }

  /** A HIT answered from this process's copy. */
  #hit(key: string, local: MemoryEntry<LocalCopy>, now: number): CachedRepresentation {
    const ttlMs = local.expiresAt - now;
    const copy = local.value;
    return { outcome: 'found', kind: copy.kind, key, body: copy.body, etag: copy.etag, cacheStatus: 'HIT', ttlMs, maxAgeSeconds: Math.floor(ttlMs / 1000), parts: copy.parts };
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
    this.#local.clear();
    let removed = 0;
    for (const kind of CACHE_KINDS) {
      for (const prefix of keys.flushOf(kind)) removed += await this.#cache.deleteByPrefix(prefix);
    }
    await this.#broadcast?.publish(INVALIDATE_CHANNEL, 'flush');
    return removed;
  }

  /** Calls `listener` after every body this instance loads and stores; returns a function that stops it. */
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

  /** Reads `key` from the store in the background: a hit renews the copy, a miss drops it. */
  #confirm(key: string, copy: LocalCopy): void {
    this.#confirming.add(key);
    const version = this.#local.version;
    this.#get(key).then(
      (stored) => {
        this.#confirming.delete(key);
        if (version !== this.#local.version || this.#local.peek(key)?.value !== copy) return;
        if (stored === undefined || stored.entry.outcome !== 'found') this.#local.delete(key);
        else this.#answer(copy.kind, key, stored.entry, 'HIT', stored.ttlMs);
      },
      () => {
        this.#confirming.delete(key);
      },
    );
  }

  #count(kind: CacheKind, result: keyof KindStats): void {
    const s = this.#stats.get(kind);
    if (s !== undefined) s[result] += 1;
    this.#metrics.cacheRequest(kind, RESULT[result]);
  }

  async #fill(read: CacheRead, key: string): Promise<ReadOutcome> {
    let token = await this.#tryLock(key);
    if (token === undefined) {
      const waited = await this.#waitForFill(key);
      // The holder is slow, gone, or out of reach; answering from the upstream beats waiting on it.
      if (waited === undefined) return this.#loadOrStale(read, key);
      if ('stored' in waited) return this.#answer(read.kind, key, waited.stored.entry, 'HIT', waited.stored.ttlMs);
      token = waited.token;
    }
    try {
      // A fill that finished between our miss and the lock (here or on another instance) already did the work.
      const stored = await this.#get(key);
      if (stored !== undefined) return this.#answer(read.kind, key, stored.entry, 'HIT', stored.ttlMs);
      return await this.#loadOrStale(read, key);
    } finally {
      if (token !== null) await this.#unlock(key, token);
    }
  }

  async #loadOrStale(read: CacheRead, key: string): Promise<ReadOutcome> {
    try {
      return await this.#loadAndStore(read, key);
    } catch (err) {
      if (!(err instanceof DataSourceError) || this.#staleIfErrorMs === 0) throw err;
      const stale = await this.#get(this.#staleKey(key));
      if (stale === undefined) throw err;
      this.#logger.warn({ key, err: err.message }, 'upstream failed: serving the stale copy');
      return this.#answer(read.kind, key, stale.entry, 'STALE', 0);
    }
  }

  async #loadAndStore(read: CacheRead, key: string): Promise<ReadOutcome> {
    const loaded = await read.load();
    if (loaded.outcome === 'unknown') return { outcome: 'unknown', cacheStatus: loaded.fetched === false ? 'HIT' : 'MISS' };
    if (loaded.outcome === 'found' && loaded.stale === true) {
      // The last good copy of this very key says the same with the bytes and ETag clients already have.
      const own = this.#staleIfErrorMs > 0 ? await this.#get(this.#staleKey(key)) : undefined;
      if (own?.entry.outcome === 'found') return this.#represent(read.kind, key, own.entry.body, own.entry.parts, 'STALE', 0);
      return this.#represent(read.kind, key, loaded.sent ?? loaded.value, loaded.parts, 'STALE', 0);
    }
    // A body made on a compute thread arrives as bytes: stored as they are, never decoded here nor
    // encoded again (twice: the entry and its stale copy).
    const value =
      loaded.outcome === 'refused'
        ? encodeEntry({ outcome: 'refused', refusal: loaded.refusal })
        : loaded.sent !== undefined
          ? encodeFoundEntryBytes(loaded.parts, loaded.sent.body)
          : encodeEntry({ outcome: 'found', body: loaded.value, parts: loaded.parts });
    const ttlMs = Math.max(1000, Math.round(loaded.ttlMs));
    const writes = [this.#set(key, value, ttlMs)];
    if (this.#staleIfErrorMs > 0) writes.push(this.#set(this.#staleKey(key), value, ttlMs + this.#staleIfErrorMs));
    await Promise.all(writes);
    const cacheStatus = loaded.fetched === false ? 'HIT' : 'MISS';
    if (loaded.outcome === 'refused') return { outcome: 'refused', refusal: loaded.refusal, cacheStatus };
    for (const listener of this.#fillListeners) {
      try {
        listener({ kind: read.kind, params: read.params, text: loaded.sent === undefined ? () => loaded.value : () => textOf(loaded.sent), parts: loaded.parts });
      } catch (err) {
        this.#logger.error({ err, key }, 'a cache fill listener failed');
      }
    }
    return this.#represent(read.kind, key, loaded.sent ?? loaded.value, loaded.parts, cacheStatus, ttlMs);
  }

  /**
   * Stores a body that arrived without a read (a pushed price merged into the cached quote), as a
   * fill would: the entry, its stale copy and this process's copy are replaced, and the fill
   * listeners hear of it (the stream hub then versions and announces it).
   */
  async store(kind: CacheKind, params: string, value: string, ttlMs: number, parts?: BodyParts): Promise<void> {
    const key = this.keyOf(kind, params);
    const lifetime = Math.max(1000, Math.round(ttlMs));
    const stored = encodeEntry({ outcome: 'found', body: value, parts });
    const writes = [this.#set(key, stored, lifetime)];
    if (this.#staleIfErrorMs > 0) writes.push(this.#set(this.#staleKey(key), stored, lifetime + this.#staleIfErrorMs));
    await Promise.all(writes);
    this.#represent(kind, key, value, parts, 'HIT', lifetime);
    for (const listener of this.#fillListeners) {
      try {
        listener({ kind, params, text: () => value, parts });
      } catch (err) {
        this.#logger.error({ err, key }, 'a cache fill listener failed');
      }
    }
  }

  #staleKey(key: string): string {
    return keys.stale(key);
  }

  /** What a stored entry answers: a body to send, or why there is none. */
  #answer(kind: CacheKind, key: string, entry: StoredEntry, cacheStatus: CacheStatusHeader, ttlMs: number): ReadOutcome {
    switch (entry.outcome) {
      case 'found':
        return this.#represent(kind, key, entry.body, entry.parts, cacheStatus, ttlMs);
      case 'refused':
        return { outcome: 'refused', refusal: entry.refusal, cacheStatus };
      case 'unknown':
        return { outcome: 'unknown', cacheStatus };
    }
  }

  /**
   * The value as sent: bytes and ETag are reused while the cached value is unchanged, so hits do no
   * hashing; `value` is the string, or the bytes and ETag a loader made (the compute pool does, off the
   * event loop). `ttlMs` is what the store says the entry has left; a STALE answer is never kept as
   * the local copy.
   */
  #represent(kind: CacheKind, key: string, value: string | SentBody, parts: BodyParts | undefined, cacheStatus: CacheStatusHeader, ttlMs: number): CachedRepresentation {
    let copy = this.#local.peek(key)?.value;
    if (copy === undefined || !sameValue(copy, value)) copy = typeof value === 'string' ? { kind, text: value, ...sentBodyOf(value), parts } : { kind, text: undefined, ...value, parts };
    if (cacheStatus !== 'STALE') this.#local.set(key, copy, ttlMs);
    const left = cacheStatus === 'STALE' ? 0 : ttlMs;
    return { outcome: 'found', kind, key, body: copy.body, etag: copy.etag, cacheStatus, ttlMs: left, maxAgeSeconds: Math.max(0, Math.floor(left / 1000)), parts: copy.parts };
  }

  /**
   * Polls until the lock holder has filled the cache (`entry`) or has let go of the lock without
   * filling it (`token`: the lock is now ours, fill it); `undefined` after `lockWaitMs`, or at once
   * when the store stops being the one the wait began on (it fell back to memory, or Redis came
   * back): a holder on another instance can then neither be seen filling nor be relied on to.
   */
  async #waitForFill(key: string): Promise<{ stored: ReadEntry } | { token: string | null } | undefined> {
    const deadline = Date.now() + this.#lockWaitMs;
    const mode = this.#mode();
    let delay = POLL_FIRST_MS;
    while (Date.now() < deadline && this.#mode() === mode) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(delay, Math.max(1, deadline - Date.now()))));
      const stored = await this.#get(key);
      if (stored !== undefined) return { stored };
      if (this.#mode() !== mode || Date.now() >= deadline) break;
      // A holder whose upstream call failed releases the lock without filling: waiting out lockWaitMs
      // would only delay this caller's answer.
      const token = await this.#tryLock(key);
      if (token !== undefined) return { token };
      delay = Math.min(delay * 2, POLL_MAX_MS);
    }
    return undefined;
  }

  /** Which store answers now (Redis or memory); `redis` for a store that does not say. */
  #mode(): 'redis' | 'memory' {
    return this.#cache.status?.().mode ?? 'redis';
  }

  /**
   * The fill lock of `key`. In a cluster it may live on another node than the value (no command names
   * both); a lock stranded there by a failover holds a read for `lockWaitMs` at most.
   */
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

  /** The entry under `key` as a type; `undefined` on a miss, a failed read, or a string this release cannot read. */
  async #get(key: string): Promise<ReadEntry | undefined> {
    try {
      const raw = await this.#cache.get(key);
      if (raw === undefined) return undefined;
      const entry = decodeEntry(raw.value);
      return entry === undefined ? undefined : { entry, ttlMs: raw.ttlMs };
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      this.#logger.warn({ err: err.message }, 'cache read failed: treating it as a miss');
      return undefined;
    }
  }

  async #set(key: string, value: string | Uint8Array, ttlMs: number): Promise<void> {
    try {
      await this.#cache.set(key, value, ttlMs);
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      this.#logger.warn({ err: err.message }, 'cache write failed: the response is served but not cached');
    }
  }
}
