/**
 * The parts that outlive a database outage (DESIGN 27), over a PostgreSQL server of the test's own that
 * is killed and started again, real TypeORM stores, and Redis announcements through the test
 * redis-server: the verification memories of API keys and users, and the usage totals waiting to be
 * written.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { DatabaseUnavailableError } from '../../src/domain/errors.js';
import { apiKeyIdentity, userIdentity } from '../../src/domain/identity.js';
import { channels, utcDay } from '../../src/domain/key-space.js';
import { PinoAuditLog } from '../../src/infra/audit/pino-audit-log.js';
import { createCache, type ResilientCache } from '../../src/infra/cache/index.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { loadContract } from '../../src/http/contract.js';
import { ApiKeyService } from '../../src/services/api-keys.js';
import { RevocationCache } from '../../src/services/revocation-cache.js';
import { UsageMeter } from '../../src/services/usage-meter.js';
import { captureLogs } from '../helpers/log-capture.js';
import { startPgServer, type PgServer } from '../helpers/pg-server.js';
import { waitFor } from '../helpers/wait-for.js';

const OPERATIONS = loadContract().operations.map((op) => op.operationId);
const CONTEXT = { actor: 'user:admin', ip: '127.0.0.1' };

describe('database outage: what waits and what is remembered', () => {
  let server: PgServer;
  let db: OpenedUserStore;
  let cache: ResilientCache;

  beforeAll(async () => {
    server = await startPgServer();
    db = await openUserStore(server.url, { runMigrations: true });
    const { logger } = captureLogs();
    cache = createCache(loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(inject('redisPort')) }, { readFile: false }).cache, logger);
    await cache.start();
  }, 60_000);

  afterAll(async () => {
    await cache?.close();
    await db?.close();
    await server?.destroy();
  });

  beforeEach(async () => {
    if (server.pid === undefined) await server.start();
    await waitFor(() => db.store.ping(), { timeoutMs: 10_000, message: 'the store to answer again' });
  });

  /** Memories trust an entry past 100 ms only when it was stored while announcements were heard: wait for the subscription. */
  const heard = () => waitFor(() => cache.live(), { timeoutMs: 5000, message: 'the Redis subscription to be live' });

  async function keyService(options: { outageGraceMs?: number; now?: () => number } = {}): Promise<ApiKeyService> {
    const { logger } = captureLogs();
    const service = new ApiKeyService({ store: db.apiKeys, audit: new PinoAuditLog(logger), logger, broadcast: cache, cacheTtlMs: 0, ...options });
    await heard();
    return service;
  }

  it('when PostgreSQL is killed, then a store call rejects with DatabaseUnavailableError (503), and works again once it is back', async () => {
    await server.kill();
    const failure = await db.store.findByUsername('admin').catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(DatabaseUnavailableError);
    expect(failure).toMatchObject({ code: 'DATABASE_UNAVAILABLE', retryAfterSeconds: 5 });
    expect(await db.store.ping()).toBe(false);
    await server.start();
    // The pool replaces its dead connections by itself: no reopening.
    await waitFor(() => db.store.ping(), { timeoutMs: 10_000, message: 'the pool to reconnect' });
    expect(await db.store.count()).toBeGreaterThanOrEqual(0);
    // A wrong statement is not an outage.
    await expect(db.dataSource.query('SELECT no_such_column FROM users')).rejects.toThrow();
  });

  it('when PostgreSQL shuts down (fast shutdown), then a store call rejects with DatabaseUnavailableError too, and a login-shaped read works once it is back', async () => {
    await db.store.findByUsername('admin');
    await server.stop();
    await expect(db.store.findByUsername('admin')).rejects.toBeInstanceOf(DatabaseUnavailableError);
    await expect(db.usage.list(utcDay(Date.now()))).rejects.toBeInstanceOf(DatabaseUnavailableError);
    await server.start();
    await waitFor(() => db.store.ping(), { timeoutMs: 10_000, message: 'the pool to reconnect' });
    expect(await db.store.findByUsername('no-such-user')).toBeUndefined();
  });

  it('when the database is away, then a key verified before still works, one never verified is DatabaseUnavailableError, and a revocation announced through Redis drops it', async () => {
    const service = await keyService();
    const kept = await service.create({ name: 'outage-kept', role: 'read' }, CONTEXT);
    const revoked = await service.create({ name: 'outage-revoked', role: 'read' }, CONTEXT);
    const unseen = await service.create({ name: 'outage-unseen', role: 'read' }, CONTEXT);
    expect(await service.verify(kept.key)).toMatchObject({ id: apiKeyIdentity(kept.id) });
    expect(await service.verify(revoked.key)).toMatchObject({ id: apiKeyIdentity(revoked.id) });

    await server.kill();
    expect(await service.verify(kept.key)).toMatchObject({ id: apiKeyIdentity(kept.id), kind: 'api-key' });
    expect(await service.exists(kept.id)).toBe(true);
    await expect(service.verify(unseen.key)).rejects.toBeInstanceOf(DatabaseUnavailableError);
    // Another instance (or the CLI) revoked it just before the database went: the announcement still arrives.
    await cache.publish(channels.identityChanged, apiKeyIdentity(revoked.id));
    await waitFor(async () => (await service.verify(revoked.key).catch((err: unknown) => err)) instanceof DatabaseUnavailableError, { timeoutMs: 5000, message: 'the announced revocation to drop the key' });
    await expect(service.exists(revoked.id)).rejects.toBeInstanceOf(DatabaseUnavailableError);
    expect(await service.verify(kept.key)).toMatchObject({ id: apiKeyIdentity(kept.id) });
    service.close();
  });

  it('when the outage outlasts the grace, or the grace is 0, then even a verified key is DatabaseUnavailableError', async () => {
    let nowMs = Date.now();
    const service = await keyService({ outageGraceMs: 60_000, now: () => nowMs });
    const none = await keyService({ outageGraceMs: 0 });
    const created = await service.create({ name: 'outage-grace', role: 'read' }, CONTEXT);
    await service.verify(created.key);
    await none.verify(created.key);

    await server.kill();
    nowMs += 59_000;
    expect(await service.verify(created.key)).toMatchObject({ id: apiKeyIdentity(created.id) });
    nowMs += 2000;
    await expect(service.verify(created.key)).rejects.toBeInstanceOf(DatabaseUnavailableError);
    await expect(none.verify(created.key)).rejects.toBeInstanceOf(DatabaseUnavailableError);
    service.close();
    none.close();
  });

  it('when the database is away, then a user read before is still answered to the bearer check, a change announced through Redis drops it, and the count is the last one read', async () => {
    const users = new RevocationCache({ store: db.store, ttlMs: 0, broadcast: cache });
    await heard();
    await users.watching().create({ username: 'outage-alice', passwordHash: 'x'.repeat(60), isAdmin: false });
    await users.watching().create({ username: 'outage-bob', passwordHash: 'y'.repeat(60), isAdmin: false });
    expect(await users.lookup('outage-alice')).toMatchObject({ username: 'outage-alice' });
    expect(await users.lookup('outage-bob')).toMatchObject({ username: 'outage-bob' });
    const count = await users.count();

    await server.kill();
    expect(await users.lookup('outage-alice')).toMatchObject({ username: 'outage-alice', isAdmin: false });
    expect(await users.count()).toBe(count);
    await expect(Promise.resolve(users.lookup('outage-never-read'))).rejects.toBeInstanceOf(DatabaseUnavailableError);
    await cache.publish(channels.identityChanged, userIdentity('outage-bob'));
    await waitFor(async () => (await Promise.resolve(users.lookup('outage-bob')).catch((err: unknown) => err)) instanceof DatabaseUnavailableError, { timeoutMs: 5000, message: 'the announced change to drop the user' });
    users.close();
  });

  it('when the database refuses the usage totals, then they wait in memory and are written once it is back, with no new request', async () => {
    const { logger, lines } = captureLogs();
    const meter = new UsageMeter({ counters: cache.sharedCounters(), store: db.usage, logger, operations: OPERATIONS });
    const caller = `outage-${Date.now()}`;
    await server.kill();
    for (let i = 0; i < 7; i += 1) meter.record({ username: caller, isAdmin: false, kind: 'user', id: userIdentity(caller) }, { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    await meter.flush();
    await meter.flush();
    expect(meter.unwrittenRows).toBe(2);
    expect(lines.some((l) => l.msg.startsWith('usage totals could not be written to the database; kept in memory'))).toBe(true);

    await server.start();
    await waitFor(() => db.store.ping(), { timeoutMs: 10_000, message: 'the store to answer again' });
    // Nothing recorded since: the waiting totals go with this flush all the same.
    await meter.flush();
    expect(meter.unwrittenRows).toBe(0);
    const rows = await db.usage.list(utcDay(Date.now()));
    expect(rows.find((r) => r.caller === caller)).toMatchObject({ requests: 7, points: 7, rateLimited: 0 });
    const operations = await db.usage.listOperations(utcDay(Date.now()));
    expect(operations.find((r) => r.caller === caller)).toMatchObject({ door: 'rest', operation: 'getQuote', requests: 7 });
    await meter.close();
  });

  it('when more rows wait than the bound, then the stalest are dropped, counted and logged', async () => {
    const { logger, lines } = captureLogs();
    const meter = new UsageMeter({ counters: cache.sharedCounters(), store: db.usage, logger, operations: OPERATIONS, maxUnwrittenRows: 3 });
    await server.kill();
    for (const name of ['a', 'b', 'c']) meter.record({ username: `outage-bound-${name}`, isAdmin: false, kind: 'user', id: userIdentity(`outage-bound-${name}`) }, { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    await meter.flush();
    // Three callers, each a caller row and an operation row: six rows for a bound of three.
    expect(meter.unwrittenRows).toBe(3);
    expect(meter.droppedRows).toBe(3);
    const warning = lines.find((l) => l.msg.startsWith('usage rows waiting for the database passed the bound'));
    expect(warning).toMatchObject({ dropped: 3, droppedTotal: 3, bound: 3 });
    await server.start();
    await meter.close();
  });
});
