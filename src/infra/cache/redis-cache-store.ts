/**
 * `CacheStore` over Redis (ioredis): the operations (GET with TTL, SET, UNLINK, prefix deletion, locks,
 * PING), over the connection of `redis-connection.ts` (single server, Sentinel or Cluster, fail-fast,
 * revived) with the publish/subscribe of `redis-pubsub.ts`. Every ioredis error leaves as
 * `CacheUnavailableError`.
 *
 * Cluster: every command here touches one key, so no operation needs keys in one slot. Whoever adds a
 * multi-key command or script must give its keys one hash tag, built in `domain/key-space.ts`.
 */
import { randomUUID } from 'node:crypto';
import { Cluster, type Redis } from 'ioredis';
import type { CacheEntry, CacheStore } from '../../domain/ports/cache.js';
import { RedisConnection } from './redis-connection.js';
import type { RedisClient, RedisCacheStoreSource, RedisTopology } from './redis-options.js';
import { RedisSubscriptions } from './redis-pubsub.js';

const SCAN_BATCH = 500;

// Returns nil on a miss, else {value, pttl}: value and remaining TTL in one round trip, atomically.
const GET_WITH_TTL_LUA = `local v = redis.call('GET', KEYS[1])
if not v then return nil end
return {v, redis.call('PTTL', KEYS[1])}`;

// Deletes the lock only while it still holds the caller's token, so a lock that expired and was
// taken by someone else is never released by the previous owner.
/** PEXPIRE the lock while the token owns it: 1 when extended, 0 when another holds it or none does. */
const EXTEND_LOCK_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
const RELEASE_LOCK_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

interface Scripts {
  mdsGetWithTtl(key: string): Promise<[string, number] | null>;
  mdsReleaseLock(key: string, token: string): Promise<number>;
}
type ScriptedClient = RedisClient & Scripts;

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

function positiveMs(ttlMs: number): number {
  if (!Number.isFinite(ttlMs)) throw new RangeError(`ttlMs must be a finite number of milliseconds, got ${ttlMs}`);
  return Math.max(1, Math.ceil(ttlMs));
}

/** A `CacheStore` in Redis, shared by every instance of the service. */
export class RedisCacheStore implements CacheStore {
  readonly #connection: RedisConnection;
  readonly #subscriptions: RedisSubscriptions;

  constructor(source: RedisCacheStoreSource) {
    this.#connection = new RedisConnection(source);
    this.#subscriptions = new RedisSubscriptions(this.#connection);
    const client = this.#client();
    if (typeof client.mdsGetWithTtl !== 'function') client.defineCommand('mdsGetWithTtl', { numberOfKeys: 1, lua: GET_WITH_TTL_LUA });
    if (typeof client.mdsReleaseLock !== 'function') client.defineCommand('mdsReleaseLock', { numberOfKeys: 1, lua: RELEASE_LOCK_LUA });
  }

  #client(): ScriptedClient {
    return this.#connection.client as ScriptedClient;
  }

  /**
   * Infra only: the underlying ioredis client (a `Cluster` for topology `cluster`), for adapters that
   * speak Redis themselves (e.g. rate-limiter-flexible). Services must use the `CacheStore` methods.
   */
  get client(): RedisClient {
    return this.#connection.client;
  }

  /** How long one command may take before it fails, in ms: adapters on `client` keep to it too. */
  get commandTimeoutMs(): number {
    return this.#connection.commandTimeoutMs;
  }

  /** `single`, `sentinel` or `cluster`. */
  get topology(): RedisTopology {
    return this.#connection.topology;
  }

  /** See `RedisConnection.node`. */
  node(): string | null {
    return this.#connection.node();
  }

  /** The last connection or command error ioredis reported, cleared when the connection is ready. */
  get lastError(): Error | undefined {
    return this.#connection.lastError;
  }

  /** True while the connection is established and usable. */
  isReady(): boolean {
    return this.#connection.isReady();
  }

  /** See `RedisConnection.onReady`. */
  onReady(listener: () => void): () => void {
    return this.#connection.onReady(listener);
  }

  /** See `RedisConnection.onDown`. */
  onDown(listener: (cause: Error | undefined) => void): () => void {
    return this.#connection.onDown(listener);
  }

  /** See `RedisConnection.connect`. */
  connect(timeoutMs?: number): Promise<void> {
    return this.#connection.connect(timeoutMs);
  }

  /** The value under `key` and its remaining TTL in ms (one round trip), or `undefined` on a miss. Keys without a TTL report `Infinity`. */
  async get(key: string): Promise<CacheEntry | undefined> {
    const reply = await this.#connection.run('GET', () => this.#client().mdsGetWithTtl(key));
    if (reply === null) return undefined;
    const [value, pttl] = reply;
    if (pttl === -1) return { value, ttlMs: Number.POSITIVE_INFINITY };
    if (pttl <= 0) return undefined;
    return { value, ttlMs: pttl };
  }

  /** `SET key value PX ttlMs` (at least 1 ms). */
  async set(key: string, value: string | Uint8Array, ttlMs: number): Promise<void> {
    const px = positiveMs(ttlMs);
    // Bytes go out as they are (a Buffer view of them, no copy); a string is encoded by the client.
    const sent = typeof value === 'string' || Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    await this.#connection.run('SET', () => this.#client().set(key, sent, 'PX', px));
  }

  /** Removes `key`; true when it existed. */
  async delete(key: string): Promise<boolean> {
    return (await this.#connection.run('UNLINK', () => this.#client().unlink(key))) > 0;
  }

  /**
   * Removes every key of the selected database that starts with `prefix`, by SCAN MATCH and UNLINK
   * in batches (never FLUSHDB, never KEYS); in a cluster, on every master. Resolves to how many keys
   * were removed.
   */
  async deleteByPrefix(prefix: string): Promise<number> {
    if (prefix.length === 0) throw new RangeError('deleteByPrefix needs a non-empty prefix');
    const client = this.#client();
    if (!(client instanceof Cluster)) return this.#deleteByPrefixOn(client, prefix, (keys) => client.unlink(...keys));
    if (client.status !== 'ready') throw this.#connection.unavailable('SCAN/UNLINK', new Error(`cluster is ${client.status}`));
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
      const [next, keys] = await this.#connection.run('SCAN', () => node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_BATCH));
      cursor = next;
      // MATCH is a glob; the startsWith check keeps the promise of "never anything else" literal.
      const mine = keys.filter((k) => k.startsWith(prefix));
      if (mine.length > 0) removed += await this.#connection.run('UNLINK', () => unlink(mine));
    } while (cursor !== '0');
    return removed;
  }

  /** `SET key token NX PX ttlMs`: a fresh token, or `undefined` while another owner holds the lock. */
  async acquireLock(key: string, ttlMs: number): Promise<string | undefined> {
    const token = randomUUID();
    const px = positiveMs(ttlMs);
    const reply = await this.#connection.run('SET NX', () => this.#client().set(key, token, 'PX', px, 'NX'));
    return reply === 'OK' ? token : undefined;
  }

  /** Deletes the lock only if `token` still owns it (compare-and-delete in one script). */
  async releaseLock(key: string, token: string): Promise<void> {
    await this.#connection.run('release lock', () => this.#client().mdsReleaseLock(key, token));
  }

  /** Extends the lock to `ttlMs` from now only if `token` still owns it (compare-and-expire in one script): a lease's renewal. */
  async extendLock(key: string, token: string, ttlMs: number): Promise<boolean> {
    const reply = await this.#connection.run('extend lock', () => this.#client().eval(EXTEND_LOCK_LUA, 1, key, token, String(positiveMs(ttlMs))));
    return reply === 1;
  }

  /**
   * True when Redis answers PING now; for a cluster, when the cluster state is ok and every master
   * answers (one dead master fails the commands of its slots, whatever the others say). Never throws.
   */
  async ping(): Promise<boolean> {
    const client = this.#client();
    try {
      if (!(client instanceof Cluster)) return (await this.#connection.run('PING', () => client.ping())) === 'PONG';
      const masters = client.nodes('master');
      if (masters.length === 0) return false;
      const info = await this.#connection.run('CLUSTER INFO', () => masters[0]!.cluster('INFO'));
      if (!/^cluster_state:ok\b/m.test(String(info))) return false;
      // Until the cluster itself notices a dead master (cluster-node-timeout), CLUSTER INFO still says
      // ok while ioredis has dropped that node: every master that owns slots must be among those
      // answering, or the cache would switch back to Redis and fail over again, once per reconnect.
      const ranges = await this.#connection.run('CLUSTER SLOTS', () => masters[0]!.cluster('SLOTS'));
      const owners = new Set(ranges.flatMap(([, , master]) => (master ? [`${master[0]}:${master[1]}`] : []))).size;
      if (masters.length < owners) {
        // ioredis re-learns a dropped node only from a slot refresh, which nothing else triggers
        // while the service serves from memory: ask for one, so a master that is back is seen.
        client.refreshSlotsCache();
        return false;
      }
      const pongs = await Promise.all(masters.map((node) => this.#connection.run('PING', () => node.ping())));
      return pongs.every((pong) => pong === 'PONG');
    } catch {
      return false;
    }
  }

  /** See `RedisSubscriptions.publish`. */
  publish(channel: string, message: string): Promise<void> {
    return this.#subscriptions.publish(channel, message);
  }

  /** See `RedisSubscriptions.subscribe`. */
  subscribe(channel: string, listener: (message: string) => void): () => void {
    return this.#subscriptions.subscribe(channel, listener);
  }

  /** See `RedisSubscriptions.subscriptionLive`. */
  subscriptionLive(): boolean {
    return this.#subscriptions.subscriptionLive();
  }

  /** See `RedisSubscriptions.subscriptionGaps`. */
  subscriptionGaps(): number {
    return this.#subscriptions.subscriptionGaps();
  }

  /** See `RedisSubscriptions.onSubscriptionChange`. */
  onSubscriptionChange(listener: () => void): () => void {
    return this.#subscriptions.onSubscriptionChange(listener);
  }

  /** See `RedisConnection.close` (the subscriber connection closes with it). */
  close(): Promise<void> {
    return this.#connection.close();
  }
}
