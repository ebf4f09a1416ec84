/**
 * One UserStore contract, run against every database the store supports: a real SQLite file in a temp
 * directory and the real PostgreSQL (a schema of its own per test).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AppError, LastAdminError, UserNotFoundError, UsernameTakenError } from '../../src/domain/errors.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import type { UserStore } from '../../src/domain/ports/accounts.js';
import { createTestSchema, findPostgres, shouldRunPostgres, type TestSchema } from '../helpers/postgres.js';

/** Opens a fresh, migrated, empty database; `dispose` removes every trace of it. */
interface Fixture {
  open(): Promise<OpenedUserStore>;
  dispose(): Promise<void>;
}

const HASH_A = '$2b$04$aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const HASH_B = '$2b$04$bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';

function userStoreContract(name: string, makeFixture: () => Promise<Fixture>): void {
  describe(`UserStore contract: ${name}`, () => {
    let fixture: Fixture;
    let db: OpenedUserStore;
    let store: UserStore;

    beforeEach(async () => {
      fixture = await makeFixture();
      db = await fixture.open();
      store = db.store;
    });

    afterEach(async () => {
      await db.close();
      await fixture.dispose();
    });

    it('create: when the name is free, then findByUsername returns the same user', async () => {
      const created = await store.create({ username: 'alice', passwordHash: HASH_A, isAdmin: true });

      const found = await store.findByUsername('alice');

      expect(found).toEqual(created);
      expect(found).toMatchObject({ username: 'alice', passwordHash: HASH_A, isAdmin: true });
      expect(found?.createdAt).toBeInstanceOf(Date);
      expect(found?.updatedAt.getTime()).toBe(found?.createdAt.getTime());
      expect(Math.abs(Date.now() - (found?.createdAt.getTime() ?? 0))).toBeLessThan(60_000);
    });

    it('findByUsername: when there is no such user, then resolves to undefined', async () => {
      await store.create({ username: 'alice', passwordHash: HASH_A, isAdmin: false });

      expect(await store.findByUsername('bob')).toBeUndefined();
      expect(await store.findByUsername('ALICE')).toBeUndefined();
    });

    it('list: when users were created in any order, then returns them ordered by username bytewise', async () => {
      for (const username of ['carol', 'bob', 'Zed', 'alice', '_svc', 'a.b']) {
        await store.create({ username, passwordHash: HASH_A, isAdmin: false });
      }

      const names = (await store.list()).map((u) => u.username);

      expect(names).toEqual(['Zed', '_svc', 'a.b', 'alice', 'bob', 'carol']);
    });

    it('count: when there are admins and users, then counts all, or only admins with { admins: true }', async () => {
      expect(await store.count()).toBe(0);
      await store.create({ username: 'root', passwordHash: HASH_A, isAdmin: true });
      await store.create({ username: 'ops', passwordHash: HASH_A, isAdmin: true });
      await store.create({ username: 'viewer', passwordHash: HASH_A, isAdmin: false });

      expect(await store.count()).toBe(3);
      expect(await store.count({ admins: true })).toBe(2);
      expect(await store.count({ admins: false })).toBe(3);
    });

    it('create: when the name is taken, then throws UsernameTakenError and keeps the first user', async () => {
      await store.create({ username: 'alice', passwordHash: HASH_A, isAdmin: false });

      const second = store.create({ username: 'alice', passwordHash: HASH_B, isAdmin: true });

      await expect(second).rejects.toBeInstanceOf(UsernameTakenError);
      await expect(second).rejects.toMatchObject({ code: 'USERNAME_TAKEN' });
      expect(await store.findByUsername('alice')).toMatchObject({ passwordHash: HASH_A, isAdmin: false });
      expect(await store.count()).toBe(1);
    });

    it('create: when two requests race for one name, then exactly one wins', async () => {
      const results = await Promise.allSettled([
        store.create({ username: 'race', passwordHash: HASH_A, isAdmin: false }),
        store.create({ username: 'race', passwordHash: HASH_B, isAdmin: false }),
      ]);

      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const rejected = results.find((r) => r.status === 'rejected');
      expect(rejected?.reason).toBeInstanceOf(UsernameTakenError);
    });

    it('updatePasswordHash: when the user exists, then replaces the hash and moves updatedAt forward', async () => {
      const created = await store.create({ username: 'alice', passwordHash: HASH_A, isAdmin: false });

      const updated = await store.updatePasswordHash('alice', HASH_B);

      expect(updated.passwordHash).toBe(HASH_B);
      expect(updated.createdAt.getTime()).toBe(created.createdAt.getTime());
      expect(updated.updatedAt.getTime()).toBeGreaterThanOrEqual(created.updatedAt.getTime());
      expect((await store.findByUsername('alice'))?.passwordHash).toBe(HASH_B);
    });

    it('updatePasswordHash: when there is no such user, then throws UserNotFoundError', async () => {
      await expect(store.updatePasswordHash('ghost', HASH_B)).rejects.toBeInstanceOf(UserNotFoundError);
    });

    it('delete: when the user exists, then removes only that user', async () => {
      await store.create({ username: 'root', passwordHash: HASH_A, isAdmin: true });
      await store.create({ username: 'bob', passwordHash: HASH_A, isAdmin: false });

      await store.delete('bob');

      expect(await store.findByUsername('bob')).toBeUndefined();
      expect((await store.list()).map((u) => u.username)).toEqual(['root']);
    });

    it('delete: when an administrator is not the last one, then removes it', async () => {
      await store.create({ username: 'root', passwordHash: HASH_A, isAdmin: true });
      await store.create({ username: 'ops', passwordHash: HASH_A, isAdmin: true });

      await store.delete('root');

      expect(await store.count({ admins: true })).toBe(1);
    });

    it('delete: when it is the last administrator, then throws LastAdminError and keeps it', async () => {
      await store.create({ username: 'root', passwordHash: HASH_A, isAdmin: true });
      await store.create({ username: 'bob', passwordHash: HASH_A, isAdmin: false });

      await expect(store.delete('root')).rejects.toBeInstanceOf(LastAdminError);

      expect(await store.findByUsername('root')).toMatchObject({ isAdmin: true });
      expect(await store.count()).toBe(2);
    });

    it('delete: when two requests delete the last two administrators at once, then one fails with LastAdminError', async () => {
      await store.create({ username: 'root', passwordHash: HASH_A, isAdmin: true });
      await store.create({ username: 'ops', passwordHash: HASH_A, isAdmin: true });
      // Open pooled connections up front (PostgreSQL) so both transactions really overlap.
      await Promise.all([store.ping(), store.ping(), store.ping()]);

      const results = await Promise.allSettled([store.delete('root'), store.delete('ops')]);

      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect(results.find((r) => r.status === 'rejected')?.reason).toBeInstanceOf(LastAdminError);
      expect(await store.count({ admins: true })).toBe(1);
    });

    it('delete: when there are no administrators at all, then a plain user can still be deleted', async () => {
      await store.create({ username: 'bob', passwordHash: HASH_A, isAdmin: false });

      await store.delete('bob');

      expect(await store.count()).toBe(0);
    });

    it('delete: when there is no such user, then throws UserNotFoundError', async () => {
      await store.create({ username: 'root', passwordHash: HASH_A, isAdmin: true });

      await expect(store.delete('ghost')).rejects.toBeInstanceOf(UserNotFoundError);
      expect(await store.count()).toBe(1);
    });

    it('migrations: when run again, then there is nothing to do and the data stays', async () => {
      await store.create({ username: 'alice', passwordHash: HASH_A, isAdmin: true });

      const again = await db.dataSource.runMigrations();

      expect(again).toEqual([]);
      expect(await db.hasPendingMigrations()).toBe(false);
      expect(await store.count()).toBe(1);
    });

    it('migrations: when reopened with runMigrations, then the existing users are kept', async () => {
      await store.create({ username: 'alice', passwordHash: HASH_A, isAdmin: true });
      await db.close();

      db = await fixture.open();

      expect((await db.store.findByUsername('alice'))?.passwordHash).toBe(HASH_A);
    });

    it('migrations: the migrated schema is exactly what the entity describes', async () => {
      const pending = await db.dataSource.driver.createSchemaBuilder().log();

      expect(pending.upQueries.map((q) => q.query)).toEqual([]);
    });

    it('ping: when the database answers, then true; after close, then false', async () => {
      expect(await store.ping()).toBe(true);

      await db.close();

      expect(await store.ping()).toBe(false);
    });
  });
}

userStoreContract('SQLite (better-sqlite3, temp file)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mds-user-store-'));
  const url = `sqlite:${join(dir, 'users.sqlite')}`;
  return {
    open: () => openUserStore(url, { runMigrations: true }),
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

const postgresUrl = await findPostgres();
const runPostgres = shouldRunPostgres(postgresUrl, 'UserStore contract on PostgreSQL');

describe.runIf(runPostgres)('PostgreSQL availability', () => {
  it('PostgreSQL answers at 127.0.0.1:5432 (required in CI)', () => {
    expect(postgresUrl, 'no PostgreSQL answered at 127.0.0.1:5432 (database test, user postgres or root)').toBeDefined();
  });
});

if (runPostgres && postgresUrl) {
  userStoreContract('PostgreSQL (own schema per test)', async () => {
    const schema: TestSchema = await createTestSchema(postgresUrl);
    return {
      open: () => openUserStore(postgresUrl, { runMigrations: true, schema: schema.name }),
      dispose: () => schema.drop(),
    };
  });
}

describe('openUserStore', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'mds-open-store-'));
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('when the SQLite file lives in directories that do not exist, then creates them', async () => {
    const db = await openUserStore(`sqlite:${join(dir, 'nested', 'deeper', 'mds.sqlite')}`, { runMigrations: true });
    try {
      expect(await db.store.count()).toBe(0);
      expect(db.description).toBe(`sqlite:${join(dir, 'nested', 'deeper', 'mds.sqlite')}`);
    } finally {
      await db.close();
    }
  });

  it('when migrations were not run, then store calls fail with a message saying to run mds init', async () => {
    const db = await openUserStore(`sqlite:${join(dir, 'fresh.sqlite')}`, { runMigrations: false });
    try {
      expect(await db.hasPendingMigrations()).toBe(true);
      await expect(db.store.count()).rejects.toMatchObject({ code: 'DATABASE_NOT_INITIALIZED', message: expect.stringContaining('mds init') });
    } finally {
      await db.close();
    }
  });

  it('when the SQLite file cannot be opened, then throws one line naming the URL', async () => {
    const blocker = join(dir, 'not-a-directory');
    writeFileSync(blocker, 'x');
    const url = `sqlite:${join(blocker, 'mds.sqlite')}`;

    const opening = openUserStore(url, { runMigrations: true });

    await expect(opening).rejects.toBeInstanceOf(AppError);
    await expect(opening).rejects.toMatchObject({ code: 'DATABASE_UNAVAILABLE' });
    const message = await opening.catch((err: Error) => err.message);
    expect(message).toContain(`Cannot open the database at ${url}`);
    expect(message).not.toContain('\n');
  });

  it('when PostgreSQL is unreachable, then throws one line naming the URL without the password', async () => {
    const opening = openUserStore('postgres://mds:s3cret-pw@127.0.0.1:1/mds', { runMigrations: true });

    await expect(opening).rejects.toMatchObject({ code: 'DATABASE_UNAVAILABLE' });
    const message = await opening.catch((err: Error) => err.message);
    expect(message).toMatch(/^Cannot open the database at postgres:\/\/mds:\*\*\*@127\.0\.0\.1:1\/mds: .*ECONNREFUSED/);
    expect(message).not.toContain('s3cret-pw');
    expect(message).not.toContain('\n');
  });

  it('when the URL is neither sqlite: nor postgres://, then throws DATABASE_URL_INVALID without the password', async () => {
    const opening = openUserStore('mysql://u:topsecret@host/db', { runMigrations: true });

    await expect(opening).rejects.toMatchObject({ code: 'DATABASE_URL_INVALID' });
    expect(await opening.catch((err: Error) => err.message)).not.toContain('topsecret');
  });
});
