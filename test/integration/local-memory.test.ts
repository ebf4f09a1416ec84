/**
 * The one in-process memory when the messages of other instances stop arriving: the caches built on it
 * (users for the revocation check, API keys, the representation cache's copies) over a real
 * ResilientCache on a redis-server this file stops and starts again, with a real SQLite store.
 * While Redis is away, nothing is trusted beyond a short bound on the strength of messages that
 * cannot arrive; when Redis is back, everything kept on that strength is dropped.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { UNCONFIRMED_MAX_AGE_MS } from '../../src/services/local-memory.js';
import type { ApiKeyStore } from '../../src/domain/ports/api-keys.js';
import type { UserStore } from '../../src/domain/ports/accounts.js';
import { RevocationCache } from '../../src/services/revocation-cache.js';
import { PinoAuditLog } from '../../src/infra/audit/pino-audit-log.js';
import { createCache, type ResilientCache } from '../../src/infra/cache/index.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { createLogger } from '../../src/infra/logger.js';
import { ApiKeyService } from '../../src/services/api-keys.js';
import { RepresentationCache } from '../../src/services/cache/representation-cache.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

const logger = createLogger({ level: 'silent' });
const HASH_A = '$2b$04$aaaaaaaaaaaaaaaaaaaaaaOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy';
const HASH_B = '$2b$04$bbbbbbbbbbbbbbbbbbbbbbOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy';
const CLI = { actor: 'cli' };

let redis: RedisProcess;
let cache: ResilientCache;
let dir: string;
let db: OpenedUserStore;
let userReads = 0;
let keyReads = 0;
let users: UserStore;
let apiKeys: ApiKeyStore;
let nowMs = 1_000_000;

beforeAll(async () => {
  redis = await startRedis();
  const config = loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(redis.port) }, { readFile: false });
  cache = createCache(config.cache, logger);
  await cache.start();
  dir = mkdtempSync(join(tmpdir(), 'mds-local-memory-'));
  db = await openUserStore(`sqlite:${join(dir, 'users.sqlite')}`, { runMigrations: true });
  await db.store.create({ username: 'alice', passwordHash: HASH_A, isAdmin: false });
  const store = db.store;
  users = {

    findByUsername: (username) => {
      userReads += 1;
      return store.findByUsername(username);
    },
    list: () => store.list(),
    count: (filter) => store.count(filter),
    create: (input) => store.create(input),
    updatePasswordHash: (username, hash) => store.updatePasswordHash(username, hash),
    delete: (username) => store.delete(username),
    ping: () => store.ping(),
  };
  const keys = db.apiKeys;
  apiKeys = {
    create: (record) => keys.create(record),
    findByDigest: (digest) => {
      keyReads += 1;
      return keys.findByDigest(digest);
    },
    findById: (id) => keys.findById(id),
    list: () => keys.list(),
    delete: (id) => keys.delete(id),
    touchLastUsed: (id, at, minIntervalMs) => keys.touchLastUsed(id, at, minIntervalMs),
  };
});

afterAll(async () => {
  await cache.close();
  await redis.stop();
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the in-process memory across a Redis outage', () => {
  const revocation = () => new RevocationCache({ store: users, ttlMs: 5_000, broadcast: cache, now: () => nowMs });
  const engine = () => new RepresentationCache({ cache, namespace: 'simulated', staleIfErrorMs: 0, logger, broadcast: cache, now: () => nowMs });
  const read = { kind: 'quote' as const, params: 'LOCAL', load: async () => ({ outcome: 'found' as const, value: '{"success":true}', ttlMs: 600_000 }) };

  let byUser: RevocationCache;
  let byKey: ApiKeyService;
  let copies: RepresentationCache;
  let key: string;

  it('when Redis answers, then a user, a key and a copy are served from memory within their lifetime', async () => {
    byUser = revocation();
    byKey = new ApiKeyService({ store: apiKeys, audit: new PinoAuditLog(logger), logger, broadcast: cache, cacheTtlMs: 1_000, now: () => nowMs });
    copies = engine();
    // Each cache subscribes to its channel: messages reach this instance once the subscriptions are confirmed.
    await waitFor(() => cache.live(), { timeoutMs: 10_000, message: 'the subscriptions to be live' });
    key = (await byKey.create({ name: 'outage', role: 'read' }, CLI)).key;

    expect((await byUser.lookup('alice'))?.passwordHash).toBe(HASH_A);
    expect(await byKey.verify(key)).toBeDefined();
    expect((await copies.read(read)).cacheStatus).toBe('MISS');
    nowMs += 500;

    expect((await byUser.lookup('alice'))?.passwordHash).toBe(HASH_A);
    expect(await byKey.verify(key)).toBeDefined();
    expect(copies.fresh(copies.keyOf('quote', 'LOCAL'))).toBeDefined();
    expect(userReads).toBe(1);
    expect(keyReads).toBe(1);
  });

  it('when Redis is lost, then what another instance may have changed is read again from the store, not trusted from memory', async () => {
    await redis.stop();
    await waitFor(() => !cache.live(), { message: 'the cache to notice Redis is gone' });
    // Changes made on another instance, whose messages cannot reach this one now.
    await db.store.updatePasswordHash('alice', HASH_B);
    const id = (await db.apiKeys.list()).find((k) => k.name === 'outage')?.id;
    expect(await db.apiKeys.delete(id!)).toBe(true);

    // The entries are 500 ms old: well within their lifetimes, beyond the bound for unconfirmed entries.
    expect((await byUser.lookup('alice'))?.passwordHash).toBe(HASH_B);
    expect(await byKey.verify(key)).toBeUndefined();
    expect(copies.fresh(copies.keyOf('quote', 'LOCAL'))).toBeUndefined();
    expect(userReads).toBe(2);
    expect(keyReads).toBe(2);
  });

  it('when Redis is still away, then an entry read now is served for the short bound only', async () => {
    expect((await copies.read(read)).cacheStatus).toBe('HIT');
    nowMs += UNCONFIRMED_MAX_AGE_MS - 1;
    expect((await byUser.lookup('alice'))?.passwordHash).toBe(HASH_B);
    expect(copies.fresh(copies.keyOf('quote', 'LOCAL'))).toBeDefined();
    expect(userReads).toBe(2);

    nowMs += 1;
    expect((await byUser.lookup('alice'))?.passwordHash).toBe(HASH_B);
    expect(copies.fresh(copies.keyOf('quote', 'LOCAL'))).toBeUndefined();
    expect(userReads).toBe(3);
  });

  it('when Redis comes back, then everything kept while messages could be missed is dropped', async () => {
    expect((await copies.read(read)).cacheStatus).toBe('HIT');
    // Read just now: served from memory while Redis is away...
    expect(await byUser.lookup('alice')).toBeDefined();
    expect(copies.fresh(copies.keyOf('quote', 'LOCAL'))).toBeDefined();
    expect(userReads).toBe(3);

    await redis.restart();
    await waitFor(() => cache.live(), { timeoutMs: 10_000, message: 'the cache to return to Redis' });

    // ...and gone on the resync, at the same age, though Redis mode would trust it for seconds.
    expect(copies.fresh(copies.keyOf('quote', 'LOCAL'))).toBeUndefined();
    expect((await byUser.lookup('alice'))?.passwordHash).toBe(HASH_B);
    expect(userReads).toBe(4);
    nowMs += 1_000;
    expect((await byUser.lookup('alice'))?.passwordHash).toBe(HASH_B);
    expect(userReads).toBe(4);
  });
});

describe('the in-process memory when the service starts without Redis', () => {
  let late: RedisProcess;
  let lateCache: ResilientCache;

  beforeAll(async () => {
    late = await startRedis();
    await late.stop();
    const config = loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(late.port) }, { readFile: false });
    lateCache = createCache(config.cache, logger, { startTimeoutMs: 200 });
    await lateCache.start();
  });
  afterAll(async () => {
    await lateCache.close();
    await late.stop();
  });

  it('when Redis arrives after the start, then what was read before it keeps the short bound (no resync announces that first connection)', async () => {
    expect(lateCache.live()).toBe(false);
    const byUser = new RevocationCache({ store: users, ttlMs: 5_000, broadcast: lateCache, now: () => nowMs });
    const before = userReads;
    await byUser.lookup('alice');

    await late.restart();
    await waitFor(() => lateCache.live(), { timeoutMs: 10_000, message: 'the cache to connect to Redis' });
    nowMs += UNCONFIRMED_MAX_AGE_MS;
    await byUser.lookup('alice');
    expect(userReads).toBe(before + 2);

    // Read while messages arrive: trusted for its whole lifetime again.
    nowMs += 1_000;
    await byUser.lookup('alice');
    expect(userReads).toBe(before + 2);
  });
});
