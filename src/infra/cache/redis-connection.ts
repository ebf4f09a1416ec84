/**
 * The connection to Redis (ioredis) and its topology: a single server, a master found through
 * Sentinel, or a Redis Cluster. Tuned to fail fast rather than wait: no offline queue, no retry per
 * command, a command timeout, and a capped reconnect backoff, so a dead, frozen or failing-over Redis
 * costs a caller milliseconds and the client keeps reconnecting by itself (and is revived when ioredis
 * gives up). Every ioredis error of a command run through `run` leaves as `CacheUnavailableError`.
 *
 * How a client is made (the options of each topology) is `redis-options.ts`; the operations of the cache
 * store are in `redis-cache-store.ts`, publish/subscribe in `redis-pubsub.ts`.
 */
import { Cluster, Redis } from 'ioredis';
import { CacheUnavailableError } from '../../domain/errors.js';
import { createClient, DEFAULTS, type RedisCacheStoreSource, type RedisClient, type RedisNodeAddress, type RedisTopology } from './redis-options.js';

const SWITCH_MASTER_CHANNEL = '+switch-master';

/** `promise`, or a rejection naming `what` once `ms` have passed without it settling (adapters on `client` use it too). */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

export function formatNode(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

function streamNode(client: Redis): string | null {
  const stream = client.stream as { remoteAddress?: string; remotePort?: number } | undefined;
  return stream?.remoteAddress && stream.remotePort ? formatNode(stream.remoteAddress, stream.remotePort) : null;
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

/** One Redis connection of any topology, with its revival, its Sentinel watch and its fail-fast command runner. */
export class RedisConnection {
  readonly #client: RedisClient;
  readonly #ownsClient: boolean;
  readonly #topology: RedisTopology;
  /** Seeds of a cluster, the server of a single Redis; unused for Sentinel (the master moves). */
  readonly #configuredNode: string | null;
  readonly #connectTimeoutMs: number;
  readonly #commandTimeoutMs: number;
  readonly #readyListeners = new Set<() => void>();
  readonly #downListeners = new Set<(cause: Error | undefined) => void>();
  readonly #maxReconnectDelayMs: number;
  /** Where the sentinels are and what they call the master, when this store watches them itself. */
  readonly #sentinelWatch: { sentinels: RedisNodeAddress[]; name: string; password: string | undefined } | undefined;
  #sentinelWatchers: Redis[] | undefined;
  /** Other connections (the subscriber) moved to the new master with this one on +switch-master. */
  readonly #followers: RedisClient[] = [];
  /** What else closes with this connection (the subscriber), before the client itself. */
  readonly #closers: Array<() => void> = [];
  readonly #revivals = new Set<NodeJS.Timeout>();
  #lastError: Error | undefined;
  #closed = false;

  constructor(source: RedisCacheStoreSource) {
    if ('client' in source) {
      const client = source.client;
      this.#client = client;
      this.#ownsClient = false;
      this.#topology = client.options.sentinels ? 'sentinel' : 'single';
      this.#configuredNode = formatNode(client.options.host ?? '127.0.0.1', client.options.port ?? 6379);
      this.#connectTimeoutMs = client.options.connectTimeout ?? DEFAULTS.connectTimeoutMs;
      this.#commandTimeoutMs = client.options.commandTimeout ?? DEFAULTS.commandTimeoutMs;
      this.#maxReconnectDelayMs = DEFAULTS.maxReconnectDelayMs;
      this.#sentinelWatch = undefined;
    } else {
      this.#client = createClient(source);
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
    // 'end' without 'close' is how a failed connection attempt ends (see reviveOnEnd).
    client.on('end', () => {
      for (const listener of this.#downListeners) listener(this.#lastError);
    });
    if (this.#ownsClient) this.reviveOnEnd(client);
  }

  /**
   * ioredis stops reconnecting for good ('end') when an attempt fails outside its retry strategy:
   * a Sentinel connector interrupted while it resolves the master rejects the attempt as "Connection
   * is closed", and the client then sits with no connection and no timer. A client this store owns
   * is never meant to end before `close()`, so it is connected again, with the same capped backoff.
   * The subscriber connection of `RedisSubscriptions` is revived the same way.
   */
  reviveOnEnd(client: RedisClient): void {
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
  watchSentinels(): void {
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
    for (const client of [this.#client, ...this.#followers]) {
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
    this.watchSentinels();
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
        reject(this.unavailable('connect', this.#lastError ?? new Error('connection closed')));
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(this.unavailable('connect', this.#lastError ?? new Error(`no answer within ${timeoutMs} ms`)));
      }, timeoutMs);
      client.on('ready', onReady);
      client.on('close', onClose);
      client.on('end', onClose);
      // Failures arrive through the listeners above; the promise itself adds nothing.
      if (client.status === 'wait' || client.status === 'end') client.connect().catch(() => undefined);
    });
  }

  /** True once `close()` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Moves `client` (another connection to the same Redis) to the new master too on +switch-master. */
  followSwitches(client: RedisClient): void {
    this.#followers.push(client);
  }

  /** Runs `closer` when this connection closes, before the client itself is closed. */
  onClose(closer: () => void): void {
    this.#closers.push(closer);
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
    for (const closer of this.#closers) closer();
    for (const timer of this.#revivals) clearTimeout(timer);
    this.#revivals.clear();
    for (const sentinel of this.#sentinelWatchers ?? []) sentinel.disconnect(false);
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
  async run<T>(operation: string, call: () => Promise<T>): Promise<T> {
    try {
      return this.#topology === 'cluster' ? await within(call(), this.#commandTimeoutMs, operation) : await call();
    } catch (err) {
      throw err instanceof CacheUnavailableError ? err : this.unavailable(operation, err);
    }
  }

  /** `cause` as the `CacheUnavailableError` of `operation`. */
  unavailable(operation: string, cause: unknown): CacheUnavailableError {
    const reason = cause instanceof Error ? cause.message : String(cause);
    return new CacheUnavailableError(`Redis ${operation} failed: ${reason}`, { cause });
  }
}
