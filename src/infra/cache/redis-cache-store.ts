/**
 * `CacheStore` over Redis (ioredis). Tuned to fail fast rather than wait: no offline queue, no retry
 * per command, a command timeout, and a capped reconnect backoff, so a dead or frozen Redis costs a
 * caller milliseconds and the client keeps reconnecting by itself. Every ioredis error leaves this
 * module as `CacheUnavailableError`.
 */
import { randomUUID } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import { CacheUnavailableError } from '../../errors.js';
import type { CacheEntry, CacheStore } from '../../ports.js';

/** Where Redis is (the shape of `config.cache.redis`) plus the fail-fast timings. */
export interface RedisCacheStoreOptions {
  host: string;
  port: number;
  /** Logical database (CACHE_DB). */
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

const DEFAULTS = { commandTimeoutMs: 500, connectTimeoutMs: 1000, maxReconnectDelayMs: 1000, maxRetriesPerRequest: 0 } as const;
const SCAN_BATCH = 500;

// Returns nil on a miss, else {value, pttl}: value and remaining TTL in one round trip, atomically.
const GET_WITH_TTL_LUA = `local v = redis.call('GET', KEYS[1])
if not v then return nil end
return {v, redis.call('PTTL', KEYS[1])}`;

// Deletes the lock only while it still holds the caller's token, so a lock that expired and was
// taken by someone else is never released by the previous owner.
const RELEASE_LOCK_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

interface ScriptedRedis extends Redis {
  mdsGetWithTtl(key: string): Promise<[string, number] | null>;
  mdsReleaseLock(key: string, token: string): Promise<number>;
}

/** The ioredis options that make a cache client fail fast and reconnect by itself. */
export function failFastRedisOptions(options: RedisCacheStoreOptions): RedisOptions {
  const maxDelay = options.maxReconnectDelayMs ?? DEFAULTS.maxReconnectDelayMs;
  const password = options.password ? options.password : undefined;
  return {
    host: options.host,
    port: options.port,
    db: options.db ?? 0,
    password,
    username: password !== undefined ? options.username : undefined,
    tls: options.tls ? {} : undefined,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: options.maxRetriesPerRequest ?? DEFAULTS.maxRetriesPerRequest,
    commandTimeout: options.commandTimeoutMs ?? DEFAULTS.commandTimeoutMs,
    connectTimeout: options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
    // Never give up (null would stop reconnecting for good); back off to at most maxDelay.
    retryStrategy: (attempt: number) => Math.min(attempt * 100, maxDelay),
  };
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
  readonly #client: ScriptedRedis;
  readonly #ownsClient: boolean;
  readonly #connectTimeoutMs: number;
  readonly #readyListeners = new Set<() => void>();
  readonly #downListeners = new Set<(cause: Error | undefined) => void>();
  readonly #channelListeners = new Map<string, Set<(message: string) => void>>();
  #subscriber: Redis | undefined;
  #lastError: Error | undefined;
  #closed = false;

  constructor(source: RedisCacheStoreSource) {
    if ('client' in source) {
      this.#client = source.client as ScriptedRedis;
      this.#ownsClient = false;
      this.#connectTimeoutMs = source.client.options.connectTimeout ?? DEFAULTS.connectTimeoutMs;
    } else {
      this.#client = new Redis(failFastRedisOptions(source)) as ScriptedRedis;
      this.#ownsClient = true;
      this.#connectTimeoutMs = source.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs;
    }
    const client = this.#client;
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
  }

  /**
   * Infra only: the underlying ioredis client, for adapters that speak Redis themselves
   * (e.g. rate-limiter-flexible). Services must use the `CacheStore` methods.
   */
  get client(): Redis {
    return this.#client;
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
    let reply: [string, number] | null;
    try {
      reply = await this.#client.mdsGetWithTtl(key);
    } catch (err) {
      throw this.#unavailable('GET', err);
    }
    if (reply === null) return undefined;
    const [value, pttl] = reply;
    if (pttl === -1) return { value, ttlMs: Number.POSITIVE_INFINITY };
    if (pttl <= 0) return undefined;
    return { value, ttlMs: pttl };
  }

  /** `SET key value PX ttlMs` (at least 1 ms). */
  async set(key: string, value: string, ttlMs: number): Promise<void> {
    const px = positiveMs(ttlMs);
    try {
      await this.#client.set(key, value, 'PX', px);
    } catch (err) {
      throw this.#unavailable('SET', err);
    }
  }

  /** Removes `key`; true when it existed. */
  async delete(key: string): Promise<boolean> {
    try {
      return (await this.#client.unlink(key)) > 0;
    } catch (err) {
      throw this.#unavailable('UNLINK', err);
    }
  }

  /**
   * Removes every key of the selected database that starts with `prefix`, by SCAN MATCH and UNLINK
   * in batches (never FLUSHDB, never KEYS). Resolves to how many keys were removed.
   */
  async deleteByPrefix(prefix: string): Promise<number> {
    if (prefix.length === 0) throw new RangeError('deleteByPrefix needs a non-empty prefix');
    const pattern = `${escapeGlob(prefix)}*`;
    let cursor = '0';
    let removed = 0;
    try {
      do {
        const [next, keys] = await this.#client.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_BATCH);
        cursor = next;
        // MATCH is a glob; the startsWith check keeps the promise of "never anything else" literal.
        const mine = keys.filter((k) => k.startsWith(prefix));
        if (mine.length > 0) removed += await this.#client.unlink(...mine);
      } while (cursor !== '0');
    } catch (err) {
      throw this.#unavailable('SCAN/UNLINK', err);
    }
    return removed;
  }

  /** `SET key token NX PX ttlMs`: a fresh token, or `undefined` while another owner holds the lock. */
  async acquireLock(key: string, ttlMs: number): Promise<string | undefined> {
    const token = randomUUID();
    const px = positiveMs(ttlMs);
    try {
      const reply = await this.#client.set(key, token, 'PX', px, 'NX');
      return reply === 'OK' ? token : undefined;
    } catch (err) {
      throw this.#unavailable('SET NX', err);
    }
  }

  /** Deletes the lock only if `token` still owns it (compare-and-delete in one script). */
  async releaseLock(key: string, token: string): Promise<void> {
    try {
      await this.#client.mdsReleaseLock(key, token);
    } catch (err) {
      throw this.#unavailable('release lock', err);
    }
  }

  /** PUBLISHes `message` on `channel`. Throws `CacheUnavailableError` when Redis cannot take it. */
  async publish(channel: string, message: string): Promise<void> {
    try {
      await this.#client.publish(channel, message);
    } catch (err) {
      throw this.#unavailable('PUBLISH', err);
    }
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
      this.#subscriberClient()
        .subscribe(channel)
        .catch(() => undefined);
    }
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  #subscriberClient(): Redis {
    if (!this.#subscriber) {
      const sub = this.#client.duplicate({ enableOfflineQueue: true, lazyConnect: false, autoResubscribe: true });
      sub.on('error', () => undefined);
      sub.on('message', (channel: string, message: string) => {
        for (const listener of this.#channelListeners.get(channel) ?? []) listener(message);
      });
      this.#subscriber = sub;
    }
    return this.#subscriber;
  }

  /** True when Redis answers PING now. Never throws. */
  async ping(): Promise<boolean> {
    try {
      return (await this.#client.ping()) === 'PONG';
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
    this.#subscriber?.disconnect(false);
    if (!this.#ownsClient) return;
    const client = this.#client;
    if (client.status === 'ready') {
      try {
        await client.quit();
        return;
      } catch {
        // fall through: drop the socket instead of a polite QUIT
      }
    }
    client.disconnect(false);
  }

  #unavailable(operation: string, cause: unknown): CacheUnavailableError {
    const reason = cause instanceof Error ? cause.message : String(cause);
    return new CacheUnavailableError(`Redis ${operation} failed: ${reason}`, { cause });
  }
}
