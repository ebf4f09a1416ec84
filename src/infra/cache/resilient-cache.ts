/**
 * The cache the service uses: a store that answers every call, from Redis while Redis answers and
 * from process memory when it does not. A failed Redis command, or a closed connection, switches
 * every later call to memory at once (no request waits on a dead Redis); the switch back happens by
 * itself when the connection is ready again and Redis answers a PING. Each transition is logged once.
 * Locks and the shared counters follow the same switch; the broadcast between instances rides on it
 * (cache-bus.ts).
 */
import type { Logger } from '../logger.js';
import type { Broadcast, CacheEntry, FallbackCacheStore } from '../../domain/ports/cache.js';
import type { SharedCounters } from '../../domain/ports/counters.js';
import { RedisSharedCounters } from '../counters/redis-shared-counters.js';
import { CacheBus } from './cache-bus.js';
import type { MemoryCacheStore } from './memory-cache-store.js';
import type { RedisCacheStore } from './redis-cache-store.js';
import type { RedisClient, RedisTopology } from './redis-options.js';

/** Which store answers, whether Redis is connected, and hit/miss counts of `get` since start. */
export interface CacheStatus {
  mode: 'redis' | 'memory';
  connected: boolean;
  /** The Redis deployment configured (`single` when none is). */
  topology: RedisTopology;
  /** The Redis node in use, `host:port` (the current master under Sentinel, the first seed of a cluster), or null. */
  node: string | null;
  hits: number;
  misses: number;
}

export interface ResilientCacheOptions {
  /** The shared store; absent when the service runs with memory only. */
  redis?: RedisCacheStore | undefined;
  /** The fallback (and, without Redis, the only) store. */
  memory: MemoryCacheStore;
  logger: Logger;
  /** How long `start()` waits for Redis before carrying on from memory. Default 1000. */
  startTimeoutMs?: number;
  /**
   * While in memory mode with a connection that looks ready (a frozen Redis keeps its socket open),
   * how often to PING it to find out whether it answers again. Default 1000.
   */
  probeIntervalMs?: number;
}

/** A `FallbackCacheStore`: it never throws `CacheUnavailableError`, Redis failures fall back to memory. */
export class ResilientCache implements FallbackCacheStore, Broadcast {
  readonly #redis: RedisCacheStore | undefined;
  readonly #memory: MemoryCacheStore;
  readonly #logger: Logger;
  readonly #startTimeoutMs: number;
  readonly #probeIntervalMs: number;
  readonly #bus: CacheBus;
  readonly #unsubscribe: Array<() => void> = [];
  #useRedis = false;
  // Bumped on every switch to Redis, so that a command started before a fallback and recovery cannot
  // knock the cache back into memory mode when it finally fails.
  #epoch = 0;
  #hits = 0;
  #misses = 0;
  #probe: NodeJS.Timeout | undefined;
  #probing = false;
  #counters: SharedCounters | undefined;
  #started = false;
  #closed = false;

  constructor(options: ResilientCacheOptions) {
    this.#redis = options.redis;
    this.#memory = options.memory;
    this.#logger = options.logger;
    this.#startTimeoutMs = options.startTimeoutMs ?? 1000;
    this.#probeIntervalMs = options.probeIntervalMs ?? 1000;
    this.#bus = new CacheBus({
      redis: options.redis,
      useRedis: () => this.#useRedis,
      onRedis: (op) => this.#onRedis(op, () => undefined),
      logger: options.logger,
    });
  }

  /**
   * Connects to Redis for at most the start timeout. When Redis is unreachable it logs one warning and
   * serves from memory; the connection keeps retrying and the cache switches to Redis once it is ready.
   * Never throws.
   */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    const redis = this.#redis;
    if (!redis) {
      this.#logger.info({ cache: 'memory' }, 'No Redis configured: caching in process memory');
      return;
    }
    this.#unsubscribe.push(
      redis.onReady(() => this.#confirmRedis()),
      redis.onDown((cause) => this.#toMemory(cause)),
      redis.onSubscriptionChange(() => this.#checkLive()),
    );
    try {
      await redis.connect(this.#startTimeoutMs);
      this.#toRedis();
    } catch (err) {
      // A 'ready' may already have arrived while the timeout fired.
      if (this.#useRedis) return;
      this.#logger.warn(
        { cache: 'memory', reason: reasonOf(err) },
        'Redis is unreachable: caching in process memory; will switch to Redis when it is back',
      );
      this.#startProbe();
    }
  }

  /** Current mode and counters (`connected` is whether the Redis connection is up, whatever the mode). */
  status(): CacheStatus {
    return {
      mode: this.#useRedis ? 'redis' : 'memory',
      connected: this.#redis?.isReady() ?? false,
      topology: this.#redis?.topology ?? 'single',
      node: this.#redis?.node() ?? null,
      hits: this.#hits,
      misses: this.#misses,
    };
  }

  /**
   * The service's one `SharedCounters` (quotas, login throttling, upstream budgets) over this cache's
   * connection: in Redis while the cache is in Redis mode, in memory otherwise, and a failed or late
   * counter call sends the whole cache to memory. Built once; every caller gets the same.
   */
  sharedCounters(): SharedCounters {
    this.#counters ??= new RedisSharedCounters({
      redis: this.#redis?.client,
      useRedis: () => this.#useRedis,
      onRedisError: (cause) => this.redisFailed(cause),
      ...(this.#redis ? { commandTimeoutMs: this.#redis.commandTimeoutMs } : {}),
    });
    return this.#counters;
  }

  /**
   * The underlying ioredis client when Redis is configured, for tests that watch the connection.
   * Adapters never take it: the counters that speak Redis themselves come from `sharedCounters()`.
   */
  redisClient(): RedisClient | undefined {
    return this.#redis?.client;
  }

  /**
   * A command sent outside the `CacheStore` methods failed (the shared counters report theirs here),
   * so every caller falls back to memory at once instead of each finding out by a failed command.
   * The cache returns to Redis as after any other failure (reconnect or probe).
   */
  redisFailed(cause: unknown): void {
    this.#toMemory(cause);
  }

  /** The entry under `key` with its remaining TTL in ms, or `undefined` on a miss. Counts a hit or a miss. */
  async get(key: string): Promise<CacheEntry | undefined> {
    const entry = await this.#onRedis(
      (redis) => redis.get(key),
      () => this.#memory.get(key),
    );
    if (entry === undefined) this.#misses++;
    else this.#hits++;
    return entry;
  }

  /**
   * Stores `value` for `ttlMs` ms. Memory always gets a copy, so a fallback starts warm with what this
   * instance last wrote; Redis gets it while in Redis mode.
   */
  async set(key: string, value: string | Uint8Array, ttlMs: number): Promise<void> {
    await this.#memory.set(key, value, ttlMs);
    await this.#onRedis(
      (redis) => redis.set(key, value, ttlMs),
      () => undefined,
    );
  }

  /** Removes `key` from both stores; true when the answering store had it. */
  async delete(key: string): Promise<boolean> {
    const inMemory = await this.#memory.delete(key);
    return this.#onRedis(
      (redis) => redis.delete(key),
      () => inMemory,
    );
  }

  /** Removes every key starting with `prefix` from both stores; the count is the answering store's. */
  async deleteByPrefix(prefix: string): Promise<number> {
    const inMemory = await this.#memory.deleteByPrefix(prefix);
    return this.#onRedis(
      (redis) => redis.deleteByPrefix(prefix),
      () => inMemory,
    );
  }

  /**
   * Takes the lock in Redis (shared by all instances) or, in memory mode, in this process only.
   * A token, or `undefined` while another owner holds it.
   */
  async acquireLock(key: string, ttlMs: number): Promise<string | undefined> {
    return this.#onRedis(
      (redis) => redis.acquireLock(key, ttlMs),
      () => this.#memory.acquireLock(key, ttlMs),
    );
  }

  /** Releases the lock if `token` owns it, in whichever store issued it (tokens are unique, so trying both is safe). */
  async releaseLock(key: string, token: string): Promise<void> {
    await this.#memory.releaseLock(key, token);
    // A Redis lock left unreleased by a failure expires on its own TTL.
    await this.#onRedis(
      (redis) => redis.releaseLock(key, token),
      () => undefined,
    );
  }

  /**
   * Extends a lock in the store in use now: a lock taken in memory while Redis was away is not
   * extended once Redis is back (another instance may hold it there), so its holder lets go and takes
   * it again where the fleet can see it. False when `token` no longer holds it.
   */
  async extendLock(key: string, token: string, ttlMs: number): Promise<boolean> {
    return this.#onRedis(
      (redis) => redis.extendLock(key, token, ttlMs),
      () => this.#memory.extendLock(key, token, ttlMs),
    );
  }

  /** `Broadcast.publish` (cache-bus.ts): here at once, elsewhere through Redis; never throws. */
  publish(channel: string, message: string): Promise<void> {
    return this.#bus.publish(channel, message);
  }

  /** `Broadcast.subscribe` (cache-bus.ts). */
  subscribe(channel: string, listener: (message: string) => void): () => void {
    return this.#bus.subscribe(channel, listener);
  }

  /** `Broadcast.live` (cache-bus.ts). */
  live(): boolean {
    return this.#bus.live();
  }

  /** `Broadcast.onResync` (cache-bus.ts). */
  onResync(listener: () => void): () => void {
    return this.#bus.onResync(listener);
  }

  /** Stops probing, closes Redis and clears memory. Safe to call twice. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopProbe();
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
    this.#bus.close();
    this.#useRedis = false;
    await this.#redis?.close();
    this.#memory.clear();
  }

  /**
   * Runs `op` against Redis while in Redis mode, else resolves to `otherwise()`. A failed command
   * switches to memory mode (unless a recovery came in between) and also resolves to `otherwise()`.
   */
  async #onRedis<T>(op: (redis: RedisCacheStore) => Promise<T>, otherwise: () => T | Promise<T>): Promise<T> {
    const redis = this.#useRedis ? this.#redis : undefined;
    if (redis) {
      const epoch = this.#epoch;
      try {
        return await op(redis);
      } catch (err) {
        if (epoch === this.#epoch) this.#toMemory(err);
      }
    }
    return otherwise();
  }

  #toMemory(cause: unknown): void {
    if (!this.#useRedis || this.#closed) return;
    this.#useRedis = false;
    this.#logger.warn({ cache: 'memory', reason: reasonOf(cause) }, 'Redis connection lost: caching in process memory until it is back');
    this.#startProbe();
    this.#checkLive();
  }

  #checkLive(): void {
    if (!this.#closed) this.#bus.checkLive();
  }

  /**
   * A reconnect is trusted once Redis answers a PING (for a cluster: every master, cluster state ok).
   * A cluster client says 'ready' again while a master is still down; switching on that alone made
   * one outage a run of lost/back switches, each failing a request over to memory.
   */
  #confirmRedis(): void {
    const redis = this.#redis;
    if (!redis || this.#useRedis || this.#closed) return;
    void redis.ping().then((ok) => {
      if (ok) this.#toRedis();
      else this.#startProbe();
    });
  }

  #toRedis(): void {
    if (this.#useRedis || this.#closed) return;
    this.#useRedis = true;
    this.#epoch++;
    this.#stopProbe();
    if (this.#epoch === 1) this.#logger.info({ cache: 'redis' }, 'Redis connected: caching in Redis');
    else this.#logger.info({ cache: 'redis' }, 'Redis is back: caching in Redis again');
    this.#checkLive();
  }

  // A reconnect announces itself with 'ready'; a server that froze and thawed does not (the socket
  // never closed), so while in memory mode an apparently ready connection is PINGed now and then.
  #startProbe(): void {
    if (this.#probe || !this.#redis || this.#closed) return;
    const redis = this.#redis;
    this.#probe = setInterval(() => {
      if (this.#probing || !redis.isReady()) return;
      this.#probing = true;
      void redis.ping().then((ok) => {
        this.#probing = false;
        if (ok && redis.isReady()) this.#toRedis();
      });
    }, this.#probeIntervalMs);
    this.#probe.unref();
  }

  #stopProbe(): void {
    if (this.#probe) clearInterval(this.#probe);
    this.#probe = undefined;
  }
}

function reasonOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return err === undefined ? 'connection closed' : String(err);
}
