/**
 * ApiKeyService over a real SQLite file with a clock the tests move: how long a verified key is trusted
 * without the database, expiry to the millisecond, and `last_used_at` at most once a minute per key.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PinoAuditLog } from '../../src/infra/audit/pino-audit-log.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { ApiKeyService, apiKeyDigest } from '../../src/services/api-keys.js';
import { captureLogs } from '../helpers/log-capture.js';
import { waitFor } from '../helpers/wait-for.js';

const CLI = { actor: 'cli' };

describe('ApiKeyService', () => {
  let dir: string;
  let db: OpenedUserStore;
  let nowMs: number;
  let keys: ApiKeyService;

  const service = (options: { cacheTtlMs?: number } = {}) => {
    const { logger } = captureLogs('info');
    return new ApiKeyService({ store: db.apiKeys, audit: new PinoAuditLog(logger), logger, now: () => nowMs, ...options });
  };
  const lastUsed = async (id: string) => (await db.apiKeys.list()).find((k) => k.id === id)?.lastUsedAt?.getTime() ?? null;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-key-service-'));
    db = await openUserStore(`sqlite:${join(dir, 'mds.sqlite')}`, { runMigrations: true });
    nowMs = Date.now();
    keys = service();
  });

  afterEach(async () => {
    keys.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('verify: when the key is live, then its principal carries key:<id>, the role and its own rate limit', async () => {
    const admin = await keys.create({ name: 'ops', role: 'admin', rate_limit_per_minute: 90 }, CLI);
    const reader = await keys.create({ name: 'feed', role: 'read' }, CLI);

    expect(await keys.verify(admin.key)).toEqual({ username: 'api-key:ops', isAdmin: true, kind: 'api-key', id: `key:${admin.id}`, rateLimitPerMinute: 90 });
    expect(await keys.verify(reader.key)).toEqual({ username: 'api-key:feed', isAdmin: false, kind: 'api-key', id: `key:${reader.id}` });
    expect(await keys.verify(`${admin.key.slice(0, -1)}${admin.key.endsWith('A') ? 'B' : 'A'}`)).toBeUndefined();
    expect(await keys.verify('not-even-shaped-like-a-key')).toBeUndefined();
  });

  it('verify: when another instance deletes the key and no broadcast arrives, then it is refused once the cache lifetime (500 ms) is over', async () => {
    const created = await keys.create({ name: 'elsewhere', role: 'admin' }, CLI);
    expect(await keys.verify(created.key)).toBeDefined();

    expect(await db.apiKeys.delete(created.id)).toBe(true);

    nowMs += 499;
    expect(await keys.verify(created.key)).toBeDefined();
    nowMs += 1;
    expect(await keys.verify(created.key)).toBeUndefined();
  });

  it('verify: when asked for a cache longer than a second, then it is held to one second', async () => {
    keys.close();
    keys = service({ cacheTtlMs: 60_000 });
    const created = await keys.create({ name: 'long', role: 'admin' }, CLI);
    expect(await keys.verify(created.key)).toBeDefined();
    await db.apiKeys.delete(created.id);

    nowMs += 1000;

    expect(await keys.verify(created.key)).toBeUndefined();
  });

  it('revoke: when revoked here, then refused at once, and a second revoke is ApiKeyNotFoundError', async () => {
    const created = await keys.create({ name: 'gone', role: 'admin' }, CLI);
    expect(await keys.verify(created.key)).toBeDefined();

    await keys.revoke(created.id, CLI);

    expect(await keys.verify(created.key)).toBeUndefined();
    await expect(keys.revoke(created.id, CLI)).rejects.toMatchObject({ code: 'API_KEY_NOT_FOUND' });
  });

  it('verify: when expires_at passes, then refused from that millisecond, cached or not', async () => {
    const created = await keys.create({ name: 'brief', role: 'read', expires_at: new Date(nowMs + 60_000).toISOString() }, CLI);
    expect(await keys.verify(created.key)).toBeDefined();

    nowMs += 59_999;
    expect(await keys.verify(created.key)).toBeDefined();
    nowMs += 1;
    await expect(keys.verify(created.key)).rejects.toMatchObject({ code: 'INVALID_CREDENTIALS', message: 'API key has expired' });
  });

  it('last_used_at: when a key is used many times, then it is written once a minute, not once a use', async () => {
    const created = await keys.create({ name: 'busy', role: 'read' }, CLI);
    const start = nowMs;

    await keys.verify(created.key);
    await waitFor(async () => (await lastUsed(created.id)) === start, { message: 'first use recorded' });
    for (let i = 0; i < 20; i++) {
      nowMs += 2_000;
      await keys.verify(created.key);
    }
    // 40 s of use later, the first write still stands. The SQLite store runs its operations in order, so
    // this read comes after any write those uses queued.
    expect(await lastUsed(created.id)).toBe(start);

    nowMs = start + 60_000;
    await keys.verify(created.key);
    await waitFor(async () => (await lastUsed(created.id)) === start + 60_000, { message: 'use a minute later recorded' });
  });

  it('create: stores only the digest of the key it returns', async () => {
    const created = await keys.create({ name: 'digest', role: 'read' }, CLI);

    const stored = await db.apiKeys.findByDigest(apiKeyDigest(created.key));

    expect(stored?.id).toBe(created.id);
    expect(JSON.stringify(await db.apiKeys.list())).not.toContain(created.key);
  });
});
