/**
 * The cache the service uses: Redis when it answers, process memory when it does not. A failed Redis
 * command, or a closed connection, switches every later call to memory at once (no request waits on
 * a dead Redis); the switch back happens by itself when the connection is ready again. Each
 * transition is logged once.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { Broadcast, CacheEntry, CacheStore } from '../../domain/ports/cache.js';
import type { SharedCounters } from '../../domain/ports/counters.js';
import { RedisSharedCounters } from '../counters/redis-shared-counters.js';
import type { MemoryCacheStore } from './memory-cache-store.js';
import type { RedisCacheStore } from './redis-cache-store.js';
import type { RedisClient, RedisTopology } from './redis-connection.js';

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

/** A `CacheStore` that never throws `CacheUnavailableError`: Redis failures fall back to memory. */
export class ResilientCache implements CacheStore, Broadcast {
  readonly #redis: RedisCacheStore | undefined;
  readonly #memory: MemoryCacheStore;
  readonly #logger: Logger;
  readonly #startTimeoutMs: number;
  readonly #probeIntervalMs: number;
  readonly #unsubscribe: Array<() => void> = [];
  readonly #localListeners = new Map<string, Set<(message: string) => void>>();
  readonly #resyncListeners = new Set<() => void>();
  /** Tells this cache's broadcasts (delivered locally already) from other instances'. */
  readonly #instanceId = randomUUID();
  #useRedis = false;
  /** What `live()` said when last looked at, to fire the resync listeners on each return to live. */
  #live = false;
  /** The store's subscription gap count at the last resync: a gap too short to see still resyncs. */
  #gapsAtResync = 0;
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

  /**
   * Delivers `message` to this instance's subscribers at once and, in Redis mode, to every other
   * instance through Redis. A Redis failure loses the remote delivery only; never throws.
   */
  async publish(channel: string, message: string): Promise<void> {
    for (const listener of this.#localListeners.get(channel) ?? []) listener(message);
    await this.#onRedis(
      (redis) => redis.publish(channel, `${this.#instanceId}:${message}`),
      () => undefined,
    );
  }

  /** Calls `listener` for messages on `channel` from this instance and, through Redis, from the others. */
  subscribe(channel: string, listener: (message: string) => void): () => void {
    let listeners = this.#localListeners.get(channel);
    if (!listeners) {
      listeners = new Set();
      this.#localListeners.set(channel, listeners);
      const local = listeners;
      const stop = this.#redis?.subscribe(channel, (raw) => {
        const at = raw.indexOf(':');
        // Our own messages were delivered locally when published.
        if (raw.slice(0, at) === this.#instanceId) return;
        for (const l of local) l(raw.slice(at + 1));
      });
      if (stop) this.#unsubscribe.push(stop);
    }
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  /**
   * Messages from other instances arrive while the cache is in Redis mode and the subscriber
   * connection is up with every channel subscribed again; without Redis configured there is no
   * other instance to hear from. Leans to false: a command connection down counts as not live too,
   * since whatever this instance publishes meanwhile reaches nobody and the store is in doubt.
   */
  live(): boolean {
    const redis = this.#redis;
    return redis === undefined || (this.#useRedis && redis.subscriptionLive());
  }

  /**
   * Calls `listener` each time `live()` turns true: after every gap (memory mode, the subscriber
   * connection lost) once every channel is subscribed again, and the first time at start (what was
   * kept before then was kept without hearing anyone).
   */
  onResync(listener: () => void): () => void {
    this.#resyncListeners.add(listener);
    return () => this.#resyncListeners.delete(listener);
  }

  /** Stops probing, closes Redis and clears memory. Safe to call twice. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopProbe();
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
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
        this.#failed(epoch, err);
      }
    }
    return otherwise();
  }

  #failed(epoch: number, err: unknown): void {
    if (epoch === this.#epoch) this.#toMemory(err);
  }

  #toMemory(cause: unknown): void {
    if (!this.#useRedis || this.#closed) return;
    this.#useRedis = false;
    this.#logger.warn({ cache: 'memory', reason: reasonOf(cause) }, 'Redis connection lost: caching in process memory until it is back');
    this.#startProbe();
    this.#checkLive();
  }

  #checkLive(): void {
    if (this.#closed) return;
    const live = this.live();
    const gaps = this.#redis?.subscriptionGaps() ?? 0;
    const wasLive = this.#live;
    this.#live = live;
    if (!live || (wasLive && gaps === this.#gapsAtResync)) return;
    this.#gapsAtResync = gaps;
    this.#logger.debug({ cache: 'redis' }, 'Broadcast delivery is live: dropping what was kept on the strength of messages');
    for (const listener of this.#resyncListeners) {
      try {
        listener();
      } catch (err) {
        this.#logger.error({ reason: reasonOf(err) }, 'A resync listener failed');
      }
    }
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
