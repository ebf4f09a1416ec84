/**
 * One ApiKeyStore contract, run against every database the store supports: a real SQLite file in a
 * temp directory and the real PostgreSQL (a schema of its own per test). Includes the migration that
 * adds `api_keys` to a database that already holds users.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import type { ApiKeyRecord, ApiKeyStore } from '../../src/domain/ports/api-keys.js';
import { createTestSchema, findPostgres, shouldRunPostgres } from '../helpers/postgres.js';

interface Fixture {
  open(): Promise<OpenedUserStore>;
  dispose(): Promise<void>;
}

const HASH = '$2b$04$aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';

/** A record as the service would build it; `at` is its creation time. */
function record(overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return {
    id: randomUUID(),
    name: 'dashboard',
    role: 'read',
    digest: randomUUID().replace(/-/g, '').padEnd(64, '0'),
    rateLimitPerMinute: null,
    expiresAt: null,
    // Whole milliseconds survive both databases (PostgreSQL keeps microseconds, SQLite milliseconds).
    createdAt: new Date(Math.floor(Date.now() / 1000) * 1000),
    lastUsedAt: null,
    createdBy: 'user:admin',
    ...overrides,
  };
}

function apiKeyStoreContract(name: string, makeFixture: () => Promise<Fixture>): void {
  describe(`ApiKeyStore contract: ${name}`, () => {
    let fixture: Fixture;
    let db: OpenedUserStore;
    let store: ApiKeyStore;

    beforeEach(async () => {
      fixture = await makeFixture();
      db = await fixture.open();
      store = db.apiKeys;
    });

    afterEach(async () => {
      await db.close();
      await fixture.dispose();
    });

    it('create: when a key is stored, then findByDigest returns every field as given', async () => {
      const expiresAt = new Date(Date.now() + 3_600_000);
      const created = await store.create(record({ name: 'deploy-bot', role: 'admin', rateLimitPerMinute: 600, expiresAt, createdBy: 'cli' }));

      const found = await store.findByDigest(created.digest);

      expect(found).toEqual(created);
      expect(found).toMatchObject({ name: 'deploy-bot', role: 'admin', rateLimitPerMinute: 600, createdBy: 'cli', lastUsedAt: null });
      expect(found?.expiresAt?.getTime()).toBe(expiresAt.getTime());
    });

    it('findById: when the key exists, then returns it as findByDigest does; when it does not, then undefined', async () => {
      const created = await store.create(record({ name: 'by-id' }));

      expect(await store.findById(created.id)).toEqual(created);
      expect(await store.findById(randomUUID())).toBeUndefined();
      await store.delete(created.id);
      expect(await store.findById(created.id)).toBeUndefined();
    });

    it('findByDigest: when no key has the digest, then resolves to undefined', async () => {
      await store.create(record());

      expect(await store.findByDigest('f'.repeat(64))).toBeUndefined();
    });

    it('create: when the digest is taken, then rejects and keeps the first key', async () => {
      const first = await store.create(record({ name: 'first' }));

      await expect(store.create(record({ name: 'second', digest: first.digest }))).rejects.toMatchObject({ code: 'DATABASE_ERROR' });
      expect((await store.list()).map((k) => k.name)).toEqual(['first']);
    });

    it('list: when keys were created at different times, then returns them newest first', async () => {
      const base = Date.now() - 60_000;
      await store.create(record({ name: 'old', createdAt: new Date(base) }));
      await store.create(record({ name: 'new', createdAt: new Date(base + 2000) }));
      await store.create(record({ name: 'mid', createdAt: new Date(base + 1000) }));

      expect((await store.list()).map((k) => k.name)).toEqual(['new', 'mid', 'old']);
    });

    it('delete: when the key exists, then true and it is gone; when it does not, then false', async () => {
      const key = await store.create(record());
      const other = await store.create(record({ name: 'other' }));

      expect(await store.delete(key.id)).toBe(true);
      expect(await store.delete(key.id)).toBe(false);
      expect(await store.delete(randomUUID())).toBe(false);
      expect(await store.findByDigest(key.digest)).toBeUndefined();
      expect((await store.list()).map((k) => k.id)).toEqual([other.id]);
    });

    it('touchLastUsed: when called again within the interval, then writes only once; after it, then writes again', async () => {
      const key = await store.create(record());
      const t0 = new Date(Date.now() - 10 * 60_000);

      expect(await store.touchLastUsed(key.id, t0, 60_000)).toBe(true);
      expect(await store.touchLastUsed(key.id, new Date(t0.getTime() + 30_000), 60_000)).toBe(false);
      expect((await store.findByDigest(key.digest))?.lastUsedAt?.getTime()).toBe(t0.getTime());

      const t1 = new Date(t0.getTime() + 60_000);
      expect(await store.touchLastUsed(key.id, t1, 60_000)).toBe(true);
      expect((await store.findByDigest(key.digest))?.lastUsedAt?.getTime()).toBe(t1.getTime());
      expect(await store.touchLastUsed(randomUUID(), t1, 60_000)).toBe(false);
    });

    it('migrations: when a database from before api_keys is migrated, then the users are kept and keys work', async () => {
      await db.store.create({ username: 'alice', passwordHash: HASH, isAdmin: true });
      // Back to the schema before api_keys: every migration after the users table is undone.
      for (let i = 1; i < db.dataSource.migrations.length; i++) await db.dataSource.undoLastMigration({ transaction: 'each' });
      await expect(store.list()).rejects.toMatchObject({ code: 'DATABASE_NOT_INITIALIZED' });
      expect(await db.hasPendingMigrations()).toBe(true);
      await db.close();

      db = await fixture.open();
      store = db.apiKeys;

      expect(await db.hasPendingMigrations()).toBe(false);
      expect((await db.store.findByUsername('alice'))?.passwordHash).toBe(HASH);
      const key = await store.create(record());
      expect((await store.findByDigest(key.digest))?.id).toBe(key.id);
    });
  });
}

apiKeyStoreContract('SQLite (better-sqlite3, temp file)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mds-key-store-'));
  const url = `sqlite:${join(dir, 'mds.sqlite')}`;
  return {
    open: () => openUserStore(url, { runMigrations: true }),
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

const postgresUrl = await findPostgres();
if (shouldRunPostgres(postgresUrl, 'ApiKeyStore contract on PostgreSQL') && postgresUrl) {
  apiKeyStoreContract('PostgreSQL (own schema per test)', async () => {
    const schema = await createTestSchema(postgresUrl);
    return {
      open: () => openUserStore(postgresUrl, { runMigrations: true, schema: schema.name }),
      dispose: () => schema.drop(),
    };
  });
}
