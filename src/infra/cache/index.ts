/**
 * Builds the service's cache from `config.cache`: Redis (single, Sentinel or Cluster) with a memory fallback. Call `start()` on
 * the result before serving and `close()` on shutdown.
 */
import type { Config } from '../../config.js';
import type { Logger } from '../logger.js';
import { MemoryCacheStore } from './memory-cache-store.js';
import { RedisCacheStore } from './redis-cache-store.js';
import { ResilientCache } from './resilient-cache.js';

export { MemoryCacheStore, type MemoryCacheStoreOptions } from './memory-cache-store.js';
export { RedisCacheStore } from './redis-cache-store.js';
export {
  failFastClusterOptions,
  failFastRedisOptions,
  type RedisCacheStoreOptions,
  type RedisCacheStoreSource,
  type RedisClient,
  type RedisNodeAddress,
  type RedisTopology,
} from './redis-options.js';
export { ResilientCache, type CacheStatus, type ResilientCacheOptions } from './resilient-cache.js';

/** Timings for tests and tuning; the defaults suit production. */
export interface CreateCacheOptions {
  /** Per-command timeout of Redis calls. Default 500. */
  commandTimeoutMs?: number;
  /** Per-attempt connect timeout. Default 1000. */
  connectTimeoutMs?: number;
  /** How long `start()` waits for Redis before serving from memory. Default 1000. */
  startTimeoutMs?: number;
}

/** A not yet started `ResilientCache` over Redis (`cacheConfig.topology`) and memory (`cacheConfig.memoryMaxEntries`). */
export function createCache(cacheConfig: Config['cache'], logger: Logger, options: CreateCacheOptions = {}): ResilientCache {
  const redis = new RedisCacheStore({
    ...cacheConfig.redis,
    topology: cacheConfig.topology,
    sentinels: cacheConfig.sentinel.sentinels,
    sentinelName: cacheConfig.sentinel.name,
    sentinelPassword: cacheConfig.sentinel.password,
    clusterNodes: cacheConfig.clusterNodes,
    commandTimeoutMs: options.commandTimeoutMs,
    connectTimeoutMs: options.connectTimeoutMs,
  });
  const memory = new MemoryCacheStore({ maxEntries: cacheConfig.memoryMaxEntries });
  return new ResilientCache({ redis, memory, logger: logger.child({ component: 'cache' }), startTimeoutMs: options.startTimeoutMs });
}
