/**
 * Negative answers ("the provider does not know this symbol"), remembered per provider for an hour in
 * a structure of fixed size, so that junk asked for cannot grow memory or the store: a caller who
 * asks for 100,000 made-up symbols leaves at most `maxSymbols` remembered, in at most `BUCKETS` keys.
 *
 * Two levels, the same bound in each:
 * - this process: a `LocalMemory` of up to `maxSymbols` members (least recently used go first),
 *   dropped with every flush (here and, through the broadcast, on every instance);
 * - the shared store: `BUCKETS` keys per provider (`mds:v1:unknown:<provider>:<n>`), each a small JSON
 *   object `{member: expiry ms}` of at most `maxSymbols / BUCKETS` members; a write drops expired
 *   members and, when the bucket is full, the ones closest to expiry.
 *
 * Why buckets of plain strings rather than a sorted set per provider: they go through the `CacheStore`
 * port (get/set with a TTL), so they work the same on a single Redis, Sentinel, a cluster (each
 * bucket is one key, so no cross-slot command) and in memory mode, with no Redis command of their
 * own. A lost update (two instances rewriting one bucket at once) only forgets a negative answer:
 * the next ask goes upstream once more. Writes from this process to one bucket are serialized.
 */
import { LocalMemory } from './local-memory.js';
import type { Broadcast, CacheStore } from '../domain/ports/cache.js';
import type { Logger } from '../domain/ports/logger.js';
import { channels, keys } from '../domain/key-space.js';
import { HOUR_MS } from '../domain/durations.js';

/** How many store keys hold one provider's negative answers. */
export const BUCKETS = 64;

export interface UnknownSymbolsOptions {
  store: CacheStore;
  /** The provider's name: each provider has its own structure. */
  provider: string;
  /** The most negative answers kept, in memory and in the store (CACHE_UNKNOWN_MAX_SYMBOLS); at least `BUCKETS`. */
  maxSymbols: number;
  /** How long one is remembered, ms. Default one hour. */
  ttlMs?: number;
  /** Where flushes on other instances are heard (they drop this process's memory too). */
  broadcast?: Broadcast | undefined;
  logger: Logger;
  now?: () => number;
}

/** The bounded memory of symbols a provider does not know. Members name what was asked (`quote:XYZ`). */
export class UnknownSymbols {
  readonly #store: CacheStore;
  readonly #provider: string;
  readonly #perBucket: number;
  readonly #ttlMs: number;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #memory: LocalMemory<string, true>;
  /** Members waiting to be written, per bucket. */
  readonly #pending = new Map<number, Map<string, number>>();
  /** The write in progress per bucket; the next one starts after it. */
  readonly #writing = new Map<number, Promise<void>>();

  constructor(options: UnknownSymbolsOptions) {
    const maxSymbols = Math.max(BUCKETS, Math.floor(options.maxSymbols));
    this.#store = options.store;
    this.#provider = options.provider;
    this.#perBucket = Math.floor(maxSymbols / BUCKETS);
    this.#ttlMs = options.ttlMs ?? HOUR_MS;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#memory = new LocalMemory({
      // quick-lru keeps up to two generations of maxSize: half the bound keeps the whole under it.
      maxEntries: Math.floor(maxSymbols / 2),
      maxAgeMs: this.#ttlMs,
      invalidation: options.broadcast && { broadcast: options.broadcast, channel: channels.invalidate },
      now: this.#now,
    });
  }

  /** True when this process remembers `member` as unknown; no I/O. */
  remembered(member: string): boolean {
    return this.#memory.get(member) === true;
  }

  /** True when `member` is remembered as unknown here or in the store. A failing store counts as "not remembered". */
  async has(member: string): Promise<boolean> {
    if (this.remembered(member)) return true;
    const version = this.#memory.version;
    const expiresAt = (await this.#read(this.#bucketOf(member)))[member];
    const now = this.#now();
    if (expiresAt === undefined || expiresAt <= now) return false;
    this.#memory.set(member, true, expiresAt - now, version);
    return true;
  }

  /** Remembers `member` as unknown for the lifetime, here at once and in the store when the write is done. */
  async remember(member: string): Promise<void> {
    const expiresAt = this.#now() + this.#ttlMs;
    this.#memory.set(member, true, this.#ttlMs);
    const bucket = this.#bucketOf(member);
    let pending = this.#pending.get(bucket);
    if (pending === undefined) {
      pending = new Map();
      this.#pending.set(bucket, pending);
    }
    pending.set(member, expiresAt);
    const write = (this.#writing.get(bucket) ?? Promise.resolve()).then(() => this.#write(bucket));
    this.#writing.set(bucket, write);
    await write;
    if (this.#writing.get(bucket) === write) this.#writing.delete(bucket);
  }

  /** Forgets every negative answer of this provider, here and in the store; resolves to how many keys went. */
  async flush(): Promise<number> {
    this.#memory.clear();
    this.#pending.clear();
    let removed = 0;
    for (const prefix of keys.unknownSymbolsFlushOf(this.#provider)) removed += await this.#store.deleteByPrefix(prefix);
    return removed;
  }

  /** Members held in this process's memory (expired ones included until pushed out). */
  get size(): number {
    return this.#memory.size;
  }

  async #write(bucket: number): Promise<void> {
    const pending = this.#pending.get(bucket);
    if (pending === undefined) return;
    this.#pending.delete(bucket);
    try {
      const members = await this.#read(bucket);
      const now = this.#now();
      const kept = Object.entries(members).filter(([member, at]) => at > now && !pending.has(member));
      for (const entry of pending) kept.push(entry);
      // Full: the answers closest to expiry go first.
      if (kept.length > this.#perBucket) kept.sort((a, b) => b[1] - a[1]).length = this.#perBucket;
      await this.#store.set(this.#keyOf(bucket), JSON.stringify(Object.fromEntries(kept)), this.#ttlMs);
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'could not store unknown symbols: they are asked upstream again');
    }
  }

  async #read(bucket: number): Promise<Record<string, number>> {
    try {
      const entry = await this.#store.get(this.#keyOf(bucket));
      if (entry === undefined) return {};
      const parsed: unknown = JSON.parse(entry.value);
      return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, number>) : {};
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message }, 'could not read unknown symbols: asking upstream');
      return {};
    }
  }

  #keyOf(bucket: number): string {
    return keys.unknownSymbols(this.#provider, bucket);
  }

  /** FNV-1a of the member: spreads symbols evenly over the buckets, the same on every instance. */
  #bucketOf(member: string): number {
    let hash = 0x811c9dc5;
    for (let i = 0; i < member.length; i++) {
      hash ^= member.charCodeAt(i);
      hash = Math.imul(hash, 0x01000193);
    }
    return (hash >>> 0) % BUCKETS;
  }
}
