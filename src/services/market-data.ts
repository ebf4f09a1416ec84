/**
 * Market data use cases: cache-aside for the indices with single-flight (one upstream call per
 * process, and one per fleet through a short lock), an ETag computed once per cache fill, optional
 * stale-if-error, and the scheduler's refresh.
 */
import { createHash } from 'node:crypto';
import { CacheUnavailableError, DataSourceError } from '../errors.js';
import type { components } from '../generated/api.js';
import type { Logger } from '../logger.js';
import { NO_METRICS, type Broadcast, type CacheEntry, type CacheResult, type CacheStore, type MarketDataProvider, type Metrics } from '../ports.js';

type IndicesResponse = components['schemas']['IndicesResponse'];

/** The `X-Cache` value: from the cache, fetched upstream now, or an expired copy standing in for a failed upstream. */
export type CacheStatusHeader = 'HIT' | 'MISS' | 'STALE';

/** A ready-to-send indices response: the exact cached bytes and their validators. */
export interface CachedRepresentation {
  /** The serialized `IndicesResponse`, byte-identical for every answer from one cache fill. */
  body: Buffer;
  /** Strong, quoted ETag of `body`. */
  etag: string;
  cacheStatus: CacheStatusHeader;
  /** Whole seconds the cached entry has left (0 for STALE): the `Cache-Control` max-age. */
  maxAgeSeconds: number;
}

/** What the cache reports about itself (the `cache` object of the admin status). */
export interface CacheStats {
  mode: 'redis' | 'memory';
  connected: boolean;
  hits: number;
  misses: number;
}

export interface MarketDataServiceOptions {
  /** The cache; when it also has `status()` (ResilientCache), `stats()` reports it. */
  cache: CacheStore & { status?: () => CacheStats };
  provider: MarketDataProvider;
  /** Lifetime of a cached response (CACHE_TTL_SECONDS in ms). */
  ttlMs: number;
  /** How long past `ttlMs` an expired copy may answer for a failed upstream; 0 turns it off. */
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
  /** Tells the other instances that share the store to drop their copies on `flush()`. */
  broadcast?: Broadcast;
  /** Clock for `updated_at` and the in-process copy's age; `Date.now` by default. */
  now?: () => number;
  /** Counts every read by its result; none by default. */
  metrics?: Metrics;
}

/** Every key of the service starts with this (login throttling and job locks too). */
export const MARKET_CACHE_PREFIX = 'mds:v1:';
/** The cached market data that `flush()` removes: fresh and stale copies, nothing else. */
const FLUSHED_PREFIXES = [`${MARKET_CACHE_PREFIX}indices:`, `${MARKET_CACHE_PREFIX}stale:`];

/** The channel on which `flush()` tells every instance to drop its in-process copy. */
export const INVALIDATE_CHANNEL = `${MARKET_CACHE_PREFIX}invalidate`;
/** The metrics result of each `X-Cache` value; a read that fails counts as a miss. */
const CACHE_RESULT: Record<CacheStatusHeader, CacheResult> = { HIT: 'hit', MISS: 'miss', STALE: 'stale' };
const POLL_FIRST_MS = 20;
const POLL_MAX_MS = 100;

/** The last cached value seen, ready to send: its bytes and ETag are computed once per value. */
interface LocalCopy {
  value: string;
  body: Buffer;
  etag: string;
  /** When the store last confirmed this value (ms). */
  readAt: number;
  /** When the cached entry expires in the store (ms). */
  expiresAt: number;
}

/** Market data for the handlers and the scheduler. */
export class MarketDataService {
  readonly #cache: MarketDataServiceOptions['cache'];
  readonly #provider: MarketDataProvider;
  readonly #ttlMs: number;
  readonly #staleIfErrorMs: number;
  readonly #lockTtlMs: number;
  readonly #lockWaitMs: number;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #localMaxAgeMs: number;
  readonly #broadcast: Broadcast | undefined;
  readonly #metrics: Metrics;
  readonly #key: string;
  readonly #staleKey: string;
  readonly #lockKey: string;
  #local: LocalCopy | undefined;
  #hits = 0;
  #misses = 0;
  #inflight: Promise<CachedRepresentation> | undefined;

  constructor(options: MarketDataServiceOptions) {
    if (!(options.ttlMs > 0)) throw new RangeError(`ttlMs must be positive, got ${options.ttlMs}`);
    this.#cache = options.cache;
    this.#provider = options.provider;
    this.#ttlMs = options.ttlMs;
    this.#staleIfErrorMs = Math.max(0, options.staleIfErrorMs);
    this.#lockTtlMs = options.lockTtlMs ?? 10_000;
    this.#lockWaitMs = options.lockWaitMs ?? 5_000;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#localMaxAgeMs = Math.max(0, options.localMaxAgeMs ?? 1000);
    this.#broadcast = options.broadcast;
    this.#metrics = options.metrics ?? NO_METRICS;
    this.#broadcast?.subscribe(INVALIDATE_CHANNEL, () => {
      this.#local = undefined;
    });
    const name = options.provider.name;
    this.#key = `${MARKET_CACHE_PREFIX}indices:${name}`;
    this.#staleKey = `${MARKET_CACHE_PREFIX}stale:indices:${name}`;
    this.#lockKey = `${MARKET_CACHE_PREFIX}lock:indices:${name}`;
  }

  /**
   * The indices response: from the cache when it holds one (HIT), else fetched upstream once for all
   * concurrent callers and stored (MISS). Throws `DataSourceError` when the upstream fails and nothing
   * cached can answer (with stale-if-error, an expired copy answers as STALE).
   */
  async getIndices(): Promise<CachedRepresentation> {
    let result: CacheResult = 'miss';
    try {
      const rep = await this.#readIndices();
      result = CACHE_RESULT[rep.cacheStatus];
      return rep;
    } finally {
      this.#metrics.cacheRequest('indices', result);
    }
  }

  async #readIndices(): Promise<CachedRepresentation> {
    const now = this.#now();
    const local = this.#local;
    if (local !== undefined && now - local.readAt < this.#localMaxAgeMs && now < local.expiresAt) {
      this.#hits += 1;
      return { body: local.body, etag: local.etag, cacheStatus: 'HIT', maxAgeSeconds: this.#maxAgeSeconds(local.expiresAt - now) };
    }
    const entry = await this.#read(this.#key);
    if (entry !== undefined) {
      this.#hits += 1;
      return this.#represent(entry.value, 'HIT', entry.ttlMs);
    }
    this.#misses += 1;
    if (this.#inflight === undefined) {
      const started = Date.now();
      this.#inflight = this.#fill().finally(() => {
        this.#inflight = undefined;
        this.#logger.debug({ fillMs: Date.now() - started }, 'market data fill finished');
      });
    }
    return this.#inflight;
  }

  /**
   * Fetches upstream and overwrites the cached entry, for the scheduler. Resolves to 'skipped' when
   * another instance (or an in-flight fill) holds the lock. Throws `DataSourceError` when the upstream fails.
   */
  async refresh(): Promise<'ok' | 'skipped'> {
    const token = await this.#tryLock();
    if (token === undefined) return 'skipped';
    try {
      await this.#fetchAndStore();
      return 'ok';
    } finally {
      if (token !== null) await this.#unlock(token);
    }
  }

  /**
   * Removes the cached market data (fresh and stale copies under their own prefixes; never the whole
   * database, never throttling counters or locks); resolves to how many keys went.
   */
  async flush(): Promise<number> {
    this.#local = undefined;
    let removed = 0;
    for (const prefix of FLUSHED_PREFIXES) removed += await this.#cache.deleteByPrefix(prefix);
    await this.#broadcast?.publish(INVALIDATE_CHANNEL, 'flush');
    return removed;
  }

  /** The cache's mode and connection, with this service's own hit/miss counts of indices reads. */
  stats(): CacheStats {
    const status = this.#cache.status?.() ?? { mode: 'memory' as const, connected: false };
    return { mode: status.mode, connected: status.connected, hits: this.#hits, misses: this.#misses };
  }

  async #fill(): Promise<CachedRepresentation> {
    let token = await this.#tryLock();
    if (token === undefined) {
      const waitStarted = Date.now();
      const waited = await this.#waitForFill();
      this.#logger.debug(
        { waitedMs: Date.now() - waitStarted, outcome: waited === undefined ? 'timeout' : 'entry' in waited ? 'filled' : 'lock' },
        'waited for another fill of the market data',
      );
      // The holder is slow or gone; answering late beats failing.
      if (waited === undefined) return this.#fetchOrStale();
      if ('entry' in waited) return this.#represent(waited.entry.value, 'HIT', waited.entry.ttlMs);
      token = waited.token;
    }
    try {
      // A fill that finished between our miss and the lock (here or on another instance) already did the work.
      const entry = await this.#read(this.#key);
      if (entry !== undefined) return this.#represent(entry.value, 'HIT', entry.ttlMs);
      return await this.#fetchOrStale();
    } finally {
      if (token !== null) await this.#unlock(token);
    }
  }

  async #fetchOrStale(): Promise<CachedRepresentation> {
    try {
      return await this.#fetchAndStore();
    } catch (err) {
      if (!(err instanceof DataSourceError) || this.#staleIfErrorMs === 0) throw err;
      const stale = await this.#read(this.#staleKey);
      if (stale === undefined) throw err;
      this.#logger.warn({ err: err.message }, 'market data upstream failed: serving the stale copy');
      return this.#represent(stale.value, 'STALE', 0);
    }
  }

  async #fetchAndStore(): Promise<CachedRepresentation> {
    const quotes = await this.#provider.getIndices();
    const response: IndicesResponse = {
      success: true,
      data: quotes,
      // The port names providers with a plain string; the contract enumerates the ones we ship.
      source: this.#provider.name as IndicesResponse['source'],
      updated_at: new Date(this.#now()).toISOString(),
    };
    const value = JSON.stringify(response);
    const writes = [this.#write(this.#key, value, this.#ttlMs)];
    if (this.#staleIfErrorMs > 0) writes.push(this.#write(this.#staleKey, value, this.#ttlMs + this.#staleIfErrorMs));
    await Promise.all(writes);
    return this.#represent(value, 'MISS', this.#ttlMs);
  }

  /**
   * The value as sent: bytes and ETag are reused while the cached string is unchanged, so hits do no
   * hashing. `ttlMs` is what the store says the entry has left; a STALE answer (0) is never kept
   * as the local copy.
   */
  #represent(value: string, cacheStatus: CacheStatusHeader, ttlMs: number): CachedRepresentation {
    const now = this.#now();
    let local = this.#local;
    if (local === undefined || local.value !== value) {
      const body = Buffer.from(value, 'utf8');
      local = { value, body, etag: `"${createHash('sha1').update(body).digest('base64url')}"`, readAt: now, expiresAt: now + ttlMs };
    } else {
      local = { ...local, readAt: now, expiresAt: now + ttlMs };
    }
    if (cacheStatus !== 'STALE') this.#local = local;
    return { body: local.body, etag: local.etag, cacheStatus, maxAgeSeconds: cacheStatus === 'STALE' ? 0 : this.#maxAgeSeconds(ttlMs) };
  }

  #maxAgeSeconds(ttlMs: number): number {
    return Math.max(0, Math.floor(Math.min(ttlMs, this.#ttlMs) / 1000));
  }

  /**
   * Polls until the lock holder has filled the cache (`entry`) or has let go of the lock without
   * filling it (`token`: the lock is now ours, fill it); `undefined` after `lockWaitMs`.
   */
  async #waitForFill(): Promise<{ entry: CacheEntry } | { token: string | null } | undefined> {
    const deadline = Date.now() + this.#lockWaitMs;
    let delay = POLL_FIRST_MS;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(delay, Math.max(1, deadline - Date.now()))));
      const entry = await this.#read(this.#key);
      if (entry !== undefined) return { entry };
      // A holder whose upstream call failed releases the lock without filling: waiting out lockWaitMs
      // would only delay this caller's answer (a 503 five seconds late).
      const token = await this.#tryLock();
      if (token !== undefined) return { token };
      delay = Math.min(delay * 2, POLL_MAX_MS);
    }
    return undefined;
  }

  /** A token; `undefined` when someone else holds the lock; `null` when the cache cannot lock (go ahead unlocked). */
  async #tryLock(): Promise<string | undefined | null> {
    try {
      return await this.#cache.acquireLock(this.#lockKey, this.#lockTtlMs);
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      this.#logger.warn({ err: err.message }, 'cache cannot lock: fetching market data without the lock');
      return null;
    }
  }

  async #unlock(token: string): Promise<void> {
    try {
      await this.#cache.releaseLock(this.#lockKey, token);
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      // The lock expires on its own TTL.
    }
  }

  async #read(key: string): Promise<CacheEntry | undefined> {
    try {
      return await this.#cache.get(key);
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      this.#logger.warn({ err: err.message }, 'cache read failed: treating it as a miss');
      return undefined;
    }
  }

  async #write(key: string, value: string, ttlMs: number): Promise<void> {
    try {
      await this.#cache.set(key, value, ttlMs);
    } catch (err) {
      if (!(err instanceof CacheUnavailableError)) throw err;
      this.#logger.warn({ err: err.message }, 'cache write failed: the response is served but not cached');
    }
  }
}
