/**
 * `CacheStore` over Redis (ioredis): a single server, a master found through Sentinel, or a Redis
 * Cluster. Tuned to fail fast rather than wait: no offline queue, no retry per command, a command
 * timeout, and a capped reconnect backoff, so a dead, frozen or failing-over Redis costs a caller
 * milliseconds and the client keeps reconnecting by itself. Every ioredis error leaves this module as
 * `CacheUnavailableError`.
 *
 * Cluster: every command here touches one key, so no operation needs keys in one slot. Whoever adds a
 * multi-key command or script must give its keys one hash tag, built in `domain/key-space.ts`.
 */
import { randomUUID } from 'node:crypto';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { CacheUnavailableError } from '../../domain/errors.js';
import type { CacheEntry, CacheStore } from '../../domain/ports.js';

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

const DEFAULTS = { commandTimeoutMs: 500, connectTimeoutMs: 1000, maxReconnectDelayMs: 1000, maxRetriesPerRequest: 0 } as const;
const SCAN_BATCH = 500;
const SWITCH_MASTER_CHANNEL = '+switch-master';
const CLUSTER_SUBSCRIBER_CHECK_MS = 200;

// Returns nil on a miss, else {value, pttl}: value and remaining TTL in one round trip, atomically.
const GET_WITH_TTL_LUA = `local v = redis.call('GET', KEYS[1])
if not v then return nil end
return {v, redis.call('PTTL', KEYS[1])}`;

// Deletes the lock only while it still holds the caller's token, so a lock that expired and was
// taken by someone else is never released by the previous owner.
const RELEASE_LOCK_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** PEXPIRE the lock while the token owns it: 1 when extended, 0 when another holds it or none does. */
const EXTEND_LOCK_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";

interface Scripts {
  mdsGetWithTtl(key: string): Promise<[string, number] | null>;
  mdsReleaseLock(key: string, token: string): Promise<number>;
}
type ScriptedClient = RedisClient & Scripts;

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

function createClient(options: RedisCacheStoreOptions): RedisClient {
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

/** `promise`, or a rejection naming `what` once `ms` have passed without it settling (adapters on `client` use it too). */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

function formatNode(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

function streamNode(client: Redis): string | null {
  const stream = client.stream as { remoteAddress?: string; remotePort?: number } | undefined;
  return stream?.remoteAddress && stream.remotePort ? formatNode(stream.remoteAddress, stream.remotePort) : null;
}

/** The connection ioredis's cluster subscriber uses now (an ioredis internal; `undefined` when not found). */
function clusterSubscriberConnection(cluster: Cluster): unknown {
  const internal = (cluster as unknown as { subscriber?: unknown }).subscriber;
  return typeof internal === 'object' && internal !== null && 'subscriber' in internal ? internal.subscriber : undefined;
}

/**
 * Whether a cluster client's own subscriber connection (ioredis keeps one on some node and, when that
 * node goes, picks another and subscribes the same channels there) is up with its channels
 * subscribed again. Reads ioredis internals, checked for shape: when they are not as expected the
 * answer is true, i.e. the cluster's own status alone decides, as before.
 */
function clusterSubscriberUp(cluster: Cluster): boolean {
  const internal = (cluster as unknown as { subscriber?: unknown }).subscriber;
  if (typeof internal !== 'object' || internal === null || !('subscriber' in internal)) return true;
  // lastActiveSubscriber is set once the channels of the previous connection are subscribed again.
  const { subscriber: instance, lastActiveSubscriber } = internal as { subscriber: { status?: unknown } | null; lastActiveSubscriber?: unknown };
  return instance !== null && instance.status === 'ready' && lastActiveSubscriber === instance;
}

/**
 * Clears ioredis's pending reconnect timer (a private field, checked to be a timer first) so that a
 * reconnect started by hand is the only one: the timer would otherwise fire a second attempt later.
 */
function cancelReconnectTimer(client: Redis): void {
  const internals = client as unknown as { reconnectTimeout?: NodeJS.Timeout | null };
  if (internals.reconnectTimeout && typeof internals.reconnectTimeout === 'object') {
    clearTimeout(internals.reconnectTimeout);
    internals.reconnectTimeout = null;
  }
}

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

function positiveMs(ttlMs: number): number {
  if (!Number.isFinite(ttlMs)) throw new RangeError(`ttlMs must be a finite number of milliseconds, got ${ttlMs}`);
  return Math.max(1, Math.ceil(ttlMs));
}

/** A `CacheStore` in Redis, shared by every instance of the service. */
export class RedisCacheStore implements CacheStore {
  readonly #client: ScriptedClient;
  readonly #ownsClient: boolean;
  readonly #topology: RedisTopology;
  /** Seeds of a cluster, the server of a single Redis; unused for Sentinel (the master moves). */
  readonly #configuredNode: string | null;
  readonly #connectTimeoutMs: number;
  readonly #commandTimeoutMs: number;
  readonly #readyListeners = new Set<() => void>();
  readonly #downListeners = new Set<(cause: Error | undefined) => void>();
  readonly #channelListeners = new Map<string, Set<(message: string) => void>>();
  readonly #makeSubscriber: () => RedisClient;
  readonly #maxReconnectDelayMs: number;
  /** Where the sentinels are and what they call the master, when this store watches them itself. */
  readonly #sentinelWatch: { sentinels: RedisNodeAddress[]; name: string; password: string | undefined } | undefined;
  #sentinelWatchers: Redis[] | undefined;
  #subscriber: RedisClient | undefined;
  /** Channels whose SUBSCRIBE the current subscriber connection has confirmed; emptied when it drops. */
  readonly #confirmedChannels = new Set<string>();
  readonly #subscriptionListeners = new Set<() => void>();
  readonly #revivals = new Set<NodeJS.Timeout>();
  #clusterSubscriberWatch: NodeJS.Timeout | undefined;
  /** How many times the subscription was lost (see `subscriptionGaps`). */
  #subscriptionGaps = 0;
  #lastError: Error | undefined;
  #closed = false;

  constructor(source: RedisCacheStoreSource) {
    if ('client' in source) {
      const client = source.client;
      this.#client = client as ScriptedClient;
      this.#ownsClient = false;
      this.#topology = client.options.sentinels ? 'sentinel' : 'single';
      this.#configuredNode = formatNode(client.options.host ?? '127.0.0.1', client.options.port ?? 6379);
      this.#connectTimeoutMs = client.options.connectTimeout ?? DEFAULTS.connectTimeoutMs;
      this.#commandTimeoutMs = client.options.commandTimeout ?? DEFAULTS.commandTimeoutMs;
      this.#maxReconnectDelayMs = DEFAULTS.maxReconnectDelayMs;
      this.#sentinelWatch = undefined;
    } else {
      this.#client = createClient(source) as ScriptedClient;
      this.#ownsClient = true;
      this.#topology = source.topology ?? 'single';
      const seed = this.#topology === 'cluster' ? source.clusterNodes?.[0] : source;
      this.#configuredNode = seed ? formatNode(seed.host ?? '127.0.0.1', seed.port ?? 6379) : null;
      this.#connectTimeoutMs = source.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs;
      this.#commandTimeoutMs = source.commandTimeoutMs ?? DEFAULTS.commandTimeoutMs;
      this.#maxReconnectDelayMs = source.maxReconnectDelayMs ?? DEFAULTS.maxReconnectDelayMs;
      this.#sentinelWatch =
        this.#topology === 'sentinel'
          ? {
              sentinels: (source.sentinels ?? []).map(({ host, port }) => ({ host, port })),
              name: source.sentinelName ?? 'mymaster',
              password: source.sentinelPassword ? source.sentinelPassword : undefined,
            }
          : undefined;
    }
    const client = this.#client;
    this.#makeSubscriber = () => {
      // Subscribing is no request: it may wait for Redis as long as Redis takes. So the subscriber
      // queues while disconnected, keeps what it queued across failed connection attempts (the
      // fail-fast `maxRetriesPerRequest: 0` dropped a SUBSCRIBE issued during a slow first connect,
      // and that instance never heard another instance again) and has no command timeout.
      const patient = { maxRetriesPerRequest: null, commandTimeout: undefined };
      if (client instanceof Cluster) {
        return client.duplicate(undefined, { enableOfflineQueue: true, lazyConnect: false, redisOptions: { ...client.options.redisOptions, ...patient } });
      }
      // ioredis's own re-subscribing is off: the 'ready' handler below subscribes every channel itself.
      return client.duplicate({ enableOfflineQueue: true, lazyConnect: false, autoResubscribe: false, ...patient });
    };
    if (typeof client.mdsGetWithTtl !== 'function') client.defineCommand('mdsGetWithTtl', { numberOfKeys: 1, lua: GET_WITH_TTL_LUA });
    if (typeof client.mdsReleaseLock !== 'function') client.defineCommand('mdsReleaseLock', { numberOfKeys: 1, lua: RELEASE_LOCK_LUA });

    // Without an 'error' listener ioredis reports every failed reconnect as an unhandled error.
    client.on('error', (err: Error) => {
      this.#lastError = err;
    });
    client.on('ready', () => {
      this.#lastError = undefined;
      for (const listener of this.#readyListeners) listener();
    });
    client.on('close', () => {
      for (const listener of this.#downListeners) listener(this.#lastError);
    });
    // 'end' without 'close' is how a failed connection attempt ends (see #reviveOnEnd).
    client.on('end', () => {
      for (const listener of this.#downListeners) listener(this.#lastError);
    });
    if (this.#ownsClient) this.#reviveOnEnd(client);
  }

  /**
   * ioredis stops reconnecting for good ('end') when an attempt fails outside its retry strategy:
   * a Sentinel connector interrupted while it resolves the master rejects the attempt as "Connection
   * is closed", and the client then sits with no connection and no timer. A client this store owns
   * is never meant to end before `close()`, so it is connected again, with the same capped backoff.
   */
  #reviveOnEnd(client: RedisClient): void {
    let attempts = 0;
    client.on('ready', () => {
      attempts = 0;
    });
    client.on('end', () => {
      if (this.#closed) return;
      const timer = setTimeout(
        () => {
          this.#revivals.delete(timer);
          if (!this.#closed && client.status === 'end') client.connect().catch(() => undefined);
        },
        Math.min(++attempts * 100, this.#maxReconnectDelayMs),
      );
      this.#revivals.add(timer);
    });
  }

  /**
   * Listens to +switch-master on every sentinel (one patient connection each, reconnecting forever)
   * and moves a connection that is still on the old master. Only a connection that is up is moved:
   * one being established resolves the master through the sentinels anyway, and interrupting it is
   * what ends an ioredis Sentinel client.
   */
  #watchSentinels(): void {
    const watch = this.#sentinelWatch;
    if (!watch || this.#sentinelWatchers || this.#closed) return;
    this.#sentinelWatchers = watch.sentinels.map(({ host, port }) => {
      const sentinel = new Redis({
        host,
        port,
        password: watch.password,
        connectTimeout: this.#connectTimeoutMs,
        retryStrategy: (attempt: number) => Math.min(attempt * 100, this.#maxReconnectDelayMs),
        maxRetriesPerRequest: null,
        enableReadyCheck: false,
        autoResubscribe: false,
      });
      sentinel.on('error', () => undefined);
      sentinel.on('ready', () => {
        sentinel.subscribe(SWITCH_MASTER_CHANNEL).catch(() => undefined);
      });
      sentinel.on('message', (channel: string, message: string) => {
        if (channel !== SWITCH_MASTER_CHANNEL) return;
        // "<name> <old ip> <old port> <new ip> <new port>"
        const [name, , , newHost, newPort] = message.split(' ');
        if (name === watch.name && newHost && newPort) this.#followSwitch(formatNode(newHost, Number(newPort)));
      });
      return sentinel;
    });
  }

  #followSwitch(master: string): void {
    for (const client of [this.#client, this.#subscriber]) {
      if (!client || client instanceof Cluster) continue;
      if (client.status === 'end' || client.status === 'reconnecting') {
        // Waiting out a backoff grown during the outage (up to the cap) would leave the command and
        // subscriber connections to return up to a second apart: both go now, to the new master.
        cancelReconnectTimer(client);
        client.connect().catch(() => undefined);
        continue;
      }
      if (client.status !== 'ready' && client.status !== 'connect') continue;
      const at = streamNode(client);
      // Dropping the socket (not disconnect()) leaves ioredis to reconnect through the sentinels as
      // after any lost connection; a frozen old master would hold a polite close for seconds.
      if (at !== master) client.stream?.destroy();
    }
  }

  /**
   * Infra only: the underlying ioredis client (a `Cluster` for topology `cluster`), for adapters that
   * speak Redis themselves (e.g. rate-limiter-flexible). Services must use the `CacheStore` methods.
   */
  get client(): RedisClient {
    return this.#client;
  }

  /** How long one command may take before it fails, in ms: adapters on `client` keep to it too. */
  get commandTimeoutMs(): number {
    return this.#commandTimeoutMs;
  }

  /** `single`, `sentinel` or `cluster`. */
  get topology(): RedisTopology {
    return this.#topology;
  }

  /**
   * The Redis node in use as `host:port`: the server of a single Redis, the current master under
   * Sentinel (null while not connected), the first seed node of a cluster.
   */
  node(): string | null {
    if (this.#topology !== 'sentinel') return this.#configuredNode;
    const client = this.#client as Redis;
    return client.status === 'ready' ? streamNode(client) : null;
  }

  /** The last connection or command error ioredis reported, cleared when the connection is ready. */
  get lastError(): Error | undefined {
    return this.#lastError;
  }

  /** True while the connection is established and usable. */
  isReady(): boolean {
    return this.#client.status === 'ready';
  }

  /** Calls `listener` every time the connection becomes ready (first connect and each reconnect). Returns an unsubscribe function. */
  onReady(listener: () => void): () => void {
    this.#readyListeners.add(listener);
    return () => this.#readyListeners.delete(listener);
  }

  /** Calls `listener` every time the connection closes (including each failed reconnect attempt). Returns an unsubscribe function. */
  onDown(listener: (cause: Error | undefined) => void): () => void {
    this.#downListeners.add(listener);
    return () => this.#downListeners.delete(listener);
  }

  /**
   * Connects (or waits for the connection in progress) for at most `timeoutMs` (default: the connect
   * timeout). Throws `CacheUnavailableError` when Redis refuses, rejects the credentials or does not
   * answer in time; the client keeps retrying in the background either way.
   */
  async connect(timeoutMs: number = this.#connectTimeoutMs): Promise<void> {
    const client = this.#client;
    if (this.#closed) throw new CacheUnavailableError('Redis store is closed');
    this.#watchSentinels();
    if (client.status === 'ready') return;
    await new Promise<void>((resolve, reject) => {
      const cleanup = () => {
        clearTimeout(timer);
        client.off('ready', onReady);
        client.off('close', onClose);
        client.off('end', onClose);
      };
      const onReady = () => {
        cleanup();
        resolve();
      };
      const onClose = () => {
        cleanup();
        reject(this.#unavailable('connect', this.#lastError ?? new Error('connection closed')));
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(this.#unavailable('connect', this.#lastError ?? new Error(`no answer within ${timeoutMs} ms`)));
      }, timeoutMs);
      client.on('ready', onReady);
      client.on('close', onClose);
      client.on('end', onClose);
      // Failures arrive through the listeners above; the promise itself adds nothing.
      if (client.status === 'wait' || client.status === 'end') client.connect().catch(() => undefined);
    });
  }

  /** The value under `key` and its remaining TTL in ms (one round trip), or `undefined` on a miss. Keys without a TTL report `Infinity`. */
  async get(key: string): Promise<CacheEntry | undefined> {
    const reply = await this.#run('GET', () => this.#client.mdsGetWithTtl(key));
    if (reply === null) return undefined;
    const [value, pttl] = reply;
    if (pttl === -1) return { value, ttlMs: Number.POSITIVE_INFINITY };
    if (pttl <= 0) return undefined;
    return { value, ttlMs: pttl };
  }

  /** `SET key value PX ttlMs` (at least 1 ms). */
  async set(key: string, value: string, ttlMs: number): Promise<void> {
    const px = positiveMs(ttlMs);
    await this.#run('SET', () => this.#client.set(key, value, 'PX', px));
  }

  /** Removes `key`; true when it existed. */
  async delete(key: string): Promise<boolean> {
    return (await this.#run('UNLINK', () => this.#client.unlink(key))) > 0;
  }

  /**
   * Removes every key of the selected database that starts with `prefix`, by SCAN MATCH and UNLINK
   * in batches (never FLUSHDB, never KEYS); in a cluster, on every master. Resolves to how many keys
   * were removed.
   */
  async deleteByPrefix(prefix: string): Promise<number> {
    if (prefix.length === 0) throw new RangeError('deleteByPrefix needs a non-empty prefix');
    const client = this.#client;
    if (!(client instanceof Cluster)) return this.#deleteByPrefixOn(client, prefix, (keys) => client.unlink(...keys));
    if (client.status !== 'ready') throw this.#unavailable('SCAN/UNLINK', new Error(`cluster is ${client.status}`));
    const counts = await Promise.all(
      client.nodes('master').map((node) =>
        // A node's keys may lie in many slots, and a multi-key UNLINK must stay within one: one
        // UNLINK per key, pipelined to the node that owns them all.
        this.#deleteByPrefixOn(node, prefix, async (keys) => {
          const replies = (await node.pipeline(keys.map((key) => ['unlink', key])).exec()) ?? [];
          let removed = 0;
          for (const [err, count] of replies) {
            if (err) throw err;
            removed += Number(count);
          }
          return removed;
        }),
      ),
    );
    return counts.reduce((sum, n) => sum + n, 0);
  }

  async #deleteByPrefixOn(node: Redis, prefix: string, unlink: (keys: string[]) => Promise<number>): Promise<number> {
    const pattern = `${escapeGlob(prefix)}*`;
    let cursor = '0';
    let removed = 0;
    do {
      const [next, keys] = await this.#run('SCAN', () => node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_BATCH));
      cursor = next;
      // MATCH is a glob; the startsWith check keeps the promise of "never anything else" literal.
      const mine = keys.filter((k) => k.startsWith(prefix));
      if (mine.length > 0) removed += await this.#run('UNLINK', () => unlink(mine));
    } while (cursor !== '0');
    return removed;
  }

  /** `SET key token NX PX ttlMs`: a fresh token, or `undefined` while another owner holds the lock. */
  async acquireLock(key: string, ttlMs: number): Promise<string | undefined> {
    const token = randomUUID();
    const px = positiveMs(ttlMs);
    const reply = await this.#run('SET NX', () => this.#client.set(key, token, 'PX', px, 'NX'));
    return reply === 'OK' ? token : undefined;
  }

  /** Deletes the lock only if `token` still owns it (compare-and-delete in one script). */
  async releaseLock(key: string, token: string): Promise<void> {
    await this.#run('release lock', () => this.#client.mdsReleaseLock(key, token));
  }

  /** Extends the lock to `ttlMs` from now only if `token` still owns it (compare-and-expire in one script): a lease's renewal. */
  async extendLock(key: string, token: string, ttlMs: number): Promise<boolean> {
    const reply = await this.#run('extend lock', () => this.#client.eval(EXTEND_LOCK_LUA, 1, key, token, String(positiveMs(ttlMs))));
    return reply === 1;
  }

  /** PUBLISHes `message` on `channel`. Throws `CacheUnavailableError` when Redis cannot take it. */
  async publish(channel: string, message: string): Promise<void> {
    await this.#run('PUBLISH', () => this.#client.publish(channel, message));
  }

  /**
   * Calls `listener` for each message on `channel`, over a second connection that subscribes as soon
   * as Redis answers and again after every reconnect. Never throws; returns an unsubscribe function.
   */
  subscribe(channel: string, listener: (message: string) => void): () => void {
    let listeners = this.#channelListeners.get(channel);
    if (!listeners) {
      listeners = new Set();
      this.#channelListeners.set(channel, listeners);
      // Queued until connected: a subscription is no request, so waiting for Redis costs nobody.
      const sub = this.#subscriberClient();
      this.#notifySubscription();
      sub
        .subscribe(channel)
        .then(() => this.#confirmChannels(sub, [channel]))
        .catch(() => undefined);
    }
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  /**
   * True while every channel subscribed through `subscribe` is confirmed on a subscriber connection
   * that is up, i.e. messages other instances publish now reach this process (true when nothing is
   * subscribed). False from the moment that connection drops until it is back and subscribed again.
   */
  subscriptionLive(): boolean {
    if (this.#channelListeners.size === 0) return true;
    const sub = this.#subscriber;
    if (!sub || sub.status !== 'ready') return false;
    if (sub instanceof Cluster && !clusterSubscriberUp(sub)) return false;
    for (const channel of this.#channelListeners.keys()) if (!this.#confirmedChannels.has(channel)) return false;
    return true;
  }

  /**
   * How many times the subscription was lost since this store was made. A gap can be shorter than
   * anyone looks (a cluster moves its subscriber to another node in milliseconds): a count that moved
   * says messages may have been missed even when `subscriptionLive()` is true at every look.
   */
  subscriptionGaps(): number {
    return this.#subscriptionGaps;
  }

  /** Calls `listener` whenever `subscriptionLive()` or `subscriptionGaps()` may have changed. Returns an unsubscribe function. */
  onSubscriptionChange(listener: () => void): () => void {
    this.#subscriptionListeners.add(listener);
    return () => this.#subscriptionListeners.delete(listener);
  }

  #notifySubscription(): void {
    for (const listener of this.#subscriptionListeners) listener();
  }

  #confirmChannels(sub: RedisClient, channels: readonly string[]): void {
    // A reply that raced a drop says nothing about the connection now.
    if (this.#closed || this.#subscriber !== sub || sub.status !== 'ready') return;
    for (const channel of channels) this.#confirmedChannels.add(channel);
    this.#notifySubscription();
  }

  #subscriberClient(): RedisClient {
    if (!this.#subscriber) {
      this.#watchSentinels();
      const sub = this.#makeSubscriber();
      sub.on('error', () => undefined);
      // Every channel again on every connection: what this process listens to never depends on
      // whether an earlier SUBSCRIBE got its answer (ioredis re-subscribes only confirmed channels).
      sub.on('ready', () => {
        const channels = [...this.#channelListeners.keys()];
        if (channels.length > 0) {
          sub
            .subscribe(...channels)
            .then(() => this.#confirmChannels(sub, channels))
            .catch(() => undefined);
        }
      });
      const lost = () => {
        this.#subscriptionGaps++;
        this.#confirmedChannels.clear();
        this.#notifySubscription();
      };
      sub.on('close', lost);
      sub.on('end', lost);
      sub.on('message', (channel: string, message: string) => {
        for (const listener of this.#channelListeners.get(channel) ?? []) listener(message);
      });
      this.#reviveOnEnd(sub);
      this.#subscriber = sub;
      if (sub instanceof Cluster) {
        // A cluster moves its subscriber connection to another node by itself, with no event of its
        // own: look every 200 ms, so a gap in delivery is seen (and its end announced) anyway.
        let last = this.subscriptionLive();
        let connection = clusterSubscriberConnection(sub);
        this.#clusterSubscriberWatch = setInterval(() => {
          const now = this.subscriptionLive();
          const current = clusterSubscriberConnection(sub);
          // A new connection object means the old one ended: a gap, however short.
          const moved = current !== connection;
          if (moved) this.#subscriptionGaps++;
          if (moved || now !== last) this.#notifySubscription();
          last = now;
          connection = current;
        }, CLUSTER_SUBSCRIBER_CHECK_MS);
        this.#clusterSubscriberWatch.unref();
      }
    }
    return this.#subscriber;
  }

  /**
   * True when Redis answers PING now; for a cluster, when the cluster state is ok and every master
   * answers (one dead master fails the commands of its slots, whatever the others say). Never throws.
   */
  async ping(): Promise<boolean> {
    const client = this.#client;
    try {
      if (!(client instanceof Cluster)) return (await this.#run('PING', () => client.ping())) === 'PONG';
      const masters = client.nodes('master');
      if (masters.length === 0) return false;
      const info = await this.#run('CLUSTER INFO', () => masters[0]!.cluster('INFO'));
      if (!/^cluster_state:ok\b/m.test(String(info))) return false;
      // Until the cluster itself notices a dead master (cluster-node-timeout), CLUSTER INFO still says
      // ok while ioredis has dropped that node: every master that owns slots must be among those
      // answering, or the cache would switch back to Redis and fail over again, once per reconnect.
      const ranges = await this.#run('CLUSTER SLOTS', () => masters[0]!.cluster('SLOTS'));
      const owners = new Set(ranges.flatMap(([, , master]) => (master ? [`${master[0]}:${master[1]}`] : []))).size;
      if (masters.length < owners) {
        // ioredis re-learns a dropped node only from a slot refresh, which nothing else triggers
        // while the service serves from memory: ask for one, so a master that is back is seen.
        client.refreshSlotsCache();
        return false;
      }
      const pongs = await Promise.all(masters.map((node) => this.#run('PING', () => node.ping())));
      return pongs.every((pong) => pong === 'PONG');
    } catch {
      return false;
    }
  }

  /**
   * Closes the connection and stops reconnecting, when this store created the client; a client handed
   * in stays open (its owner closes it). Safe to call twice.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#readyListeners.clear();
    this.#downListeners.clear();
    this.#channelListeners.clear();
    this.#subscriptionListeners.clear();
    clearInterval(this.#clusterSubscriberWatch);
    for (const timer of this.#revivals) clearTimeout(timer);
    this.#revivals.clear();
    for (const sentinel of this.#sentinelWatchers ?? []) sentinel.disconnect(false);
    this.#subscriber?.disconnect(false);
    if (!this.#ownsClient) return;
    const client = this.#client;
    if (client.status === 'ready') {
      // A polite QUIT first; a failure only means the socket is dropped below instead.
      await client.quit().catch(() => undefined);
    }
    // Also after QUIT: ioredis closes a Sentinel client's failover watch (a subscription on every
    // sentinel) only in disconnect(), and those connections alone kept `mds serve` from exiting.
    client.disconnect(false);
  }

  /**
   * Runs one Redis call, every failure as `CacheUnavailableError`. A cluster call may be redirected
   * and retried across nodes, each attempt with its own command timeout, so it gets one overall
   * deadline of a command timeout too.
   */
  async #run<T>(operation: string, call: () => Promise<T>): Promise<T> {
    try {
      return this.#topology === 'cluster' ? await within(call(), this.#commandTimeoutMs, operation) : await call();
    } catch (err) {
      throw err instanceof CacheUnavailableError ? err : this.#unavailable(operation, err);
    }
  }

  #unavailable(operation: string, cause: unknown): CacheUnavailableError {
    const reason = cause instanceof Error ? cause.message : String(cause);
    return new CacheUnavailableError(`Redis ${operation} failed: ${reason}`, { cause });
  }
}
