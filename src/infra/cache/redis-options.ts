/**
 * Where Redis is and how a client of it is made: the options of each topology (a single server, a
 * master found through Sentinel, a Redis Cluster), tuned to fail fast rather than wait: no offline
 * queue, no retry per command, a command timeout, and a capped reconnect backoff. The connection that
 * uses them (revival, the Sentinel watch, the command runner) is `redis-connection.ts`.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

/** A host and port of a sentinel or cluster node. */
export interface RedisNodeAddress {
  host: string;
  port: number;
}

/** Which kind of Redis deployment the store talks to. */
export type RedisTopology = 'single' | 'sentinel' | 'cluster';

/** Where Redis is (the shape of `config.cache.redis`) plus the fail-fast timings. */
export interface RedisCacheStoreOptions {
  /** Default `single`: `host`/`port`. `sentinel`: `sentinels` and `sentinelName`. `cluster`: `clusterNodes`. */
  topology?: RedisTopology;
  /** The server of topology `single`. Default 127.0.0.1. */
  host?: string;
  /** Default 6379. */
  port?: number;
  /** Sentinels that know the master (topology `sentinel`). */
  sentinels?: readonly RedisNodeAddress[];
  /** The master's name as the sentinels know it. Default `mymaster`. */
  sentinelName?: string;
  /** AUTH for the sentinels themselves; empty or undefined: none. */
  sentinelPassword?: string;
  /** Seed nodes of the cluster (topology `cluster`); the rest is discovered. */
  clusterNodes?: readonly RedisNodeAddress[];
  /** Logical database (CACHE_DB); always 0 for a cluster. */
  db?: number;
  /** Empty or undefined: no AUTH. */
  password?: string;
  /** ACL user (Redis 6+); only sent together with a password. */
  username?: string | undefined;
  /** Connect with TLS (`rediss://`). */
  tls?: boolean;
  /** How long one command may take before it fails (protects against a frozen server). Default 500. */
  commandTimeoutMs?: number;
  /** How long one connection attempt may take. Default 1000. */
  connectTimeoutMs?: number;
  /** Upper bound of the reconnect backoff. Default 1000. */
  maxReconnectDelayMs?: number;
  /**
   * ioredis `maxRetriesPerRequest`. Default 0: commands in flight when the connection drops fail at
   * once instead of waiting for one reconnect attempt (~100 ms measured with 1), since the caller
   * falls back to memory anyway. Reconnecting is governed by the retry strategy, not by this.
   */
  maxRetriesPerRequest?: number;
}

/** Build from options (the store owns and closes the client) or wrap an existing client (the caller owns it). */
export type RedisCacheStoreSource = RedisCacheStoreOptions | { client: Redis };

/** The ioredis client of any topology (a Cluster speaks the same commands). */
export type RedisClient = Redis | Cluster;

export const DEFAULTS = { commandTimeoutMs: 500, connectTimeoutMs: 1000, maxReconnectDelayMs: 1000, maxRetriesPerRequest: 0 } as const;

/** The ioredis options that make a cache client fail fast and reconnect by itself (single server or Sentinel). */
export function failFastRedisOptions(options: RedisCacheStoreOptions): RedisOptions {
  const maxDelay = options.maxReconnectDelayMs ?? DEFAULTS.maxReconnectDelayMs;
  const password = options.password ? options.password : undefined;
  const commandTimeout = options.commandTimeoutMs ?? DEFAULTS.commandTimeoutMs;
  // Never give up (null would stop reconnecting for good); back off to at most maxDelay.
  const backoff = (attempt: number) => Math.min(attempt * 100, maxDelay);
  const base: RedisOptions = {
    db: options.db ?? 0,
    password,
    username: password !== undefined ? options.username : undefined,
    tls: options.tls ? {} : undefined,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: options.maxRetriesPerRequest ?? DEFAULTS.maxRetriesPerRequest,
    commandTimeout,
    connectTimeout: options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
    retryStrategy: backoff,
  };
  if (options.topology !== 'sentinel') return { ...base, host: options.host ?? '127.0.0.1', port: options.port ?? 6379 };
  return {
    ...base,
    sentinels: (options.sentinels ?? []).map(({ host, port }) => ({ host, port })),
    name: options.sentinelName ?? 'mymaster',
    sentinelPassword: options.sentinelPassword ? options.sentinelPassword : undefined,
    sentinelRetryStrategy: backoff,
    sentinelCommandTimeout: commandTimeout,
    // ioredis's own failover detector is off: when its +switch-master arrives while a reconnect is
    // resolving the master, the attempt fails as "Connection is closed" and the client ends for
    // good (status 'end', no retry, no sentinel watched); and the same announcement repeated by a
    // lagging sentinel drops a connection already on the new master. RedisCacheStore watches the
    // sentinels itself and moves only a connection that is still on the old master.
    failoverDetector: false,
    // A demoted master answers writes with READONLY until it closes our connection: reconnect at
    // once (through the sentinels, to the new master) rather than fail every write until then.
    reconnectOnError: (err: Error) => err.message.startsWith('READONLY'),
  };
}

/**
 * The ioredis Cluster options with the same fail-fast semantics: no offline queue, a command timeout
 * per node, few and short redirection retries, and a capped backoff when no seed answers.
 */
export function failFastClusterOptions(options: RedisCacheStoreOptions): ClusterOptions {
  const maxDelay = options.maxReconnectDelayMs ?? DEFAULTS.maxReconnectDelayMs;
  const password = options.password ? options.password : undefined;
  const connectTimeout = options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs;
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    enableReadyCheck: true,
    // Replicas may lag; a cache read from a stale replica would break "byte-identical hits".
    scaleReads: 'master',
    // Each retry of a redirected or CLUSTERDOWN command waits; keep the total well under a second.
    maxRedirections: 3,
    retryDelayOnFailover: 50,
    retryDelayOnClusterDown: 50,
    retryDelayOnTryAgain: 50,
    slotsRefreshTimeout: connectTimeout,
    clusterRetryStrategy: (attempt: number) => Math.min(attempt * 100, maxDelay),
    redisOptions: {
      password,
      username: password !== undefined ? options.username : undefined,
      tls: options.tls ? {} : undefined,
      maxRetriesPerRequest: options.maxRetriesPerRequest ?? DEFAULTS.maxRetriesPerRequest,
      commandTimeout: options.commandTimeoutMs ?? DEFAULTS.commandTimeoutMs,
      connectTimeout,
    },
  };
}

export function createClient(options: RedisCacheStoreOptions): RedisClient {
  if (options.topology === 'cluster') {
    const nodes = (options.clusterNodes ?? []).map(({ host, port }) => ({ host, port }));
    if (nodes.length === 0) throw new RangeError('topology cluster needs at least one node in clusterNodes');
    return new Cluster(nodes, failFastClusterOptions(options));
  }
  if (options.topology === 'sentinel' && (options.sentinels ?? []).length === 0) {
    throw new RangeError('topology sentinel needs at least one sentinel');
  }
  return new Redis(failFastRedisOptions(options));
}
