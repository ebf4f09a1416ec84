/**
 * The bearer check's memory of users: over a real SQLite user store (reads counted), and across two
 * real service instances sharing one redis-server and one database.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RevocationCache } from '../../src/services/revocation-cache.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import type { UserStore } from '../../src/domain/ports/accounts.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const HASH_A = '$2b$04$aaaaaaaaaaaaaaaaaaaaaaOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy';
const HASH_B = '$2b$04$bbbbbbbbbbbbbbbbbbbbbbOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy';

describe('RevocationCache over a real user store', () => {
  let dir: string;
  let db: OpenedUserStore;
  let reads: number;
  let counts: number;
  let counted: UserStore;
  let nowMs: number;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-revocation-'));
    db = await openUserStore(`sqlite:${join(dir, 'users.sqlite')}`, { runMigrations: true });
    await db.store.create({ username: 'alice', passwordHash: HASH_A, isAdmin: true });
    const store = db.store;
    counted = {
      findByUsername: (username) => {
        reads += 1;
        return store.findByUsername(username);
      },
      list: () => store.list(),
      count: (filter) => {
        counts += 1;
        return store.count(filter);
      },
      create: (input) => store.create(input),
      updatePasswordHash: (username, hash) => store.updatePasswordHash(username, hash),
      delete: (username) => store.delete(username),
      ping: () => store.ping(),
    };
  });
  afterAll(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    await db.store.updatePasswordHash('alice', HASH_A);
  });

  const cacheOf = (ttlMs = 5_000) => {
    reads = 0;
    counts = 0;
    nowMs = 1_000_000;
    return new RevocationCache({ store: counted, ttlMs, now: () => nowMs });
  };

  it('when a user is looked up again within the lifetime, then the store is read once', async () => {
    const cache = cacheOf();

    const first = await cache.lookup('alice');
    nowMs += 4_999;
    const second = await cache.lookup('alice');

    expect(first?.passwordHash).toBe(HASH_A);
    expect(second).toEqual(first);
    expect(reads).toBe(1);
  });

  it('when the lifetime has passed, then the store is read again and a change made behind its back is seen', async () => {
    const cache = cacheOf();
    await cache.lookup('alice');
    await db.store.updatePasswordHash('alice', HASH_B);

    nowMs += 5_000;
    const user = await cache.lookup('alice');

    expect(user?.passwordHash).toBe(HASH_B);
    expect(reads).toBe(2);
  });

  it('when many lookups of one user miss at once, then they share one store read', async () => {
    const cache = cacheOf();

    const users = await Promise.all(Array.from({ length: 20 }, () => cache.lookup('alice')));

    expect(new Set(users.map((u) => u?.passwordHash))).toEqual(new Set([HASH_A]));
    expect(reads).toBe(1);
  });

  it('when an unknown user is looked up twice, then the absence is remembered too', async () => {
    const cache = cacheOf();

    expect(await cache.lookup('nobody')).toBeUndefined();
    expect(await cache.lookup('nobody')).toBeUndefined();
    expect(reads).toBe(1);
  });

  it('when the password is changed through the watched store, then the next lookup reads the new hash', async () => {
    const cache = cacheOf();
    await cache.lookup('alice');

    await cache.watching().updatePasswordHash('alice', HASH_B);
    const user = await cache.lookup('alice');

    expect(user?.passwordHash).toBe(HASH_B);
    expect(reads).toBe(2);
  });

  it('when the user changes while a lookup is in flight, then what that lookup read is not kept', async () => {
    const cache = cacheOf();
    const inFlight = cache.lookup('alice');

    await cache.watching().updatePasswordHash('alice', HASH_B);
    await inFlight;
    const after = await cache.lookup('alice');

    expect(after?.passwordHash).toBe(HASH_B);
  });

  it('when the user count is asked again within the lifetime, then the store counts once, also for concurrent askers', async () => {
    const cache = cacheOf();

    const [a, b] = await Promise.all([cache.count(), cache.count()]);
    nowMs += 4_999;
    const c = await cache.count();

    expect([a, b, c]).toEqual([1, 1, 1]);
    expect(counts).toBe(1);
  });

  it('when a user is created or deleted through the watched store, then the next count is read again and right', async () => {
    const cache = cacheOf();
    const users = cache.watching();
    expect(await cache.count()).toBe(1);

    await users.create({ username: 'carol', passwordHash: HASH_B, isAdmin: false });
    expect(await cache.count()).toBe(2);
    await users.delete('carol');
    expect(await cache.count()).toBe(1);

    expect(counts).toBe(3);
  });

  it('when a user is created behind its back, then the count is right once the lifetime has passed', async () => {
    const cache = cacheOf();
    expect(await cache.count()).toBe(1);
    await db.store.create({ username: 'dave', passwordHash: HASH_B, isAdmin: false });
    try {
      nowMs += 5_000;
      expect(await cache.count()).toBe(2);
    } finally {
      await db.store.delete('dave');
    }
  });

  it('when a write happens while a count is in flight, then that count is not kept', async () => {
    const cache = cacheOf();
    const inFlight = cache.count();
    await cache.invalidate('anyone');
    await inFlight;
    await cache.count();

    expect(counts).toBe(2);
  });

  it('when the lifetime is 0, then every lookup reads the store', async () => {
    const cache = cacheOf(0);

    await cache.lookup('alice');
    await cache.lookup('alice');
    await cache.count();
    await cache.count();

    expect(reads).toBe(2);
    expect(counts).toBe(2);
  });
});

describe('revocation across instances sharing one redis-server', () => {
  let dir: string;
  let a: TestService;
  let b: TestService;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-two-instances-'));
    // A lifetime far beyond the test's deadline: only the broadcast can make B notice in time.
    const env = { AUTH_CACHE_SECONDS: '300' };
    a = await startTestService(env, { dir, init: true });
    b = await startTestService(env, { dir });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const status = (service: TestService, token: string) => service.fetch('/api/admin/status', { headers: { Authorization: `Bearer ${token}` } });

  it('when the password is changed on A, then the old token answers 401 on B within a second and the new one works there', async () => {
    const oldToken = await a.login(ADMIN.username, ADMIN.password);
    expect((await status(b, oldToken)).status).toBe(200); // B now remembers the user

    const changed = await a.fetch('/api/auth/change-password', {
      method: 'POST',
      headers: { Authorization: `Bearer ${oldToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ old_password: ADMIN.password, new_password: 'a-new-password-42' }),
    });
    expect(changed.status).toBe(200);
    const newToken = ((await changed.json()) as { data: { access_token: string } }).data.access_token;

    let last: { status: number; body: unknown } | undefined;
    await waitFor(
      async () => {
        const res = await status(b, oldToken);
        last = { status: res.status, body: await res.json() };
        return res.status === 401;
      },
      { timeoutMs: 1_000, message: 'B refuses the old token' },
    );
    expect(last).toEqual({ status: 401, body: { success: false, error: 'Token has been revoked', code: 401, detail: 'Token has been revoked' } });
    expect((await status(b, newToken)).status).toBe(200);
    expect((await status(a, oldToken)).status).toBe(401);
  });

  it('when a user is created and deleted on A, then the admin status of B counts it within a second', async () => {
    const adminToken = await a.login(ADMIN.username, 'a-new-password-42');
    const countOn = async (service: TestService) => ((await (await status(service, adminToken)).json()) as { data: { users: { count: number } } }).data.users.count;
    const before = await countOn(b); // B now remembers the count

    const created = await a.fetch('/api/admin/users', {
      method: 'POST',
      headers: { Authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'erin', password: 'erin-password-1', is_admin: false }),
    });
    expect(created.status).toBe(201);
    await waitFor(async () => (await countOn(b)) === before + 1, { timeoutMs: 1_000, message: 'B counts the new user' });

    const deleted = await a.fetch('/api/admin/users/erin', { method: 'DELETE', headers: { Authorization: `Bearer ${adminToken}` } });
    expect(deleted.status).toBeLessThan(300);
    await waitFor(async () => (await countOn(b)) === before, { timeoutMs: 1_000, message: 'B no longer counts the deleted user' });
  });

  it('when a user is deleted on A, then its token answers 401 on B within a second', async () => {
    const adminToken = await a.login(ADMIN.username, 'a-new-password-42');
    const created = await a.fetch('/api/admin/users', {
      method: 'POST',
      headers: { Authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'bob', password: 'bob-password-1', is_admin: true }),
    });
    expect(created.status).toBe(201);
    const bobToken = await a.login('bob', 'bob-password-1');
    expect((await status(b, bobToken)).status).toBe(200);

    const deleted = await a.fetch('/api/admin/users/bob', { method: 'DELETE', headers: { Authorization: `Bearer ${adminToken}` } });
    expect(deleted.status).toBeLessThan(300);

    await waitFor(async () => (await status(b, bobToken)).status === 401, { timeoutMs: 1_000, message: "B refuses the deleted user's token" });
  });
});
