/**
 * Managed API keys over a real socket: two real instances of the service share the test redis-server
 * and one SQLite file, as two instances behind a load balancer share Redis and the database. Keys are
 * created, listed, used, refused, revoked and expired over HTTP; the database row and every log line
 * are checked for the secret.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noteSecrets } from '../helpers/log-files.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const STATIC_KEY = `static-${randomBytes(8).toString('hex')}`;
const STATIC_ID = `key:static:${createHash('sha256').update(STATIC_KEY).digest('hex').slice(0, 8)}`;
const KEY_FIELDS = ['created_at', 'created_by', 'expires_at', 'id', 'last_used_at', 'name', 'rate_limit_per_minute', 'role'];
const json = { 'content-type': 'application/json' };

interface ApiKey {
  id: string;
  name: string;
  role: 'read' | 'admin';
  rate_limit_per_minute: number | null;
  expires_at: string | null;
  created_at: string;
  last_used_at: string | null;
  created_by: string;
}
type CreatedApiKey = ApiKey & { key: string };

let a: TestService;
let b: TestService;
let adminToken: string;

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/** POSTs a new key; the key in a 201 is noted for the run's log scan. */
async function createKey(svc: TestService, headers: Record<string, string>, body: Record<string, unknown>, requestId?: string): Promise<Response> {
  const res = await svc.fetch('/api/admin/api-keys', {
    method: 'POST',
    headers: { ...json, ...headers, ...(requestId ? { 'x-request-id': requestId } : {}) },
    body: JSON.stringify(body),
  });
  if (res.status === 201) noteSecrets(((await res.clone().json()) as { data: { key: string } }).data.key);
  return res;
}

async function newKey(body: Record<string, unknown>): Promise<CreatedApiKey> {
  const res = await createKey(a, { authorization: `Bearer ${adminToken}` }, body);
  expect(res.status).toBe(201);
  return ((await res.json()) as { data: CreatedApiKey }).data;
}

async function listKeys(svc: TestService): Promise<ApiKey[]> {
  const res = await svc.fetch('/api/admin/api-keys', { headers: { authorization: `Bearer ${adminToken}` } });
  expect(res.status).toBe(200);
  // Every answer but health and login is {success, data} (issues 38 and 52); this one was a bare array in 0.1.
  const body = (await res.json()) as { success: boolean; data: ApiKey[] };
  expect(body.success).toBe(true);
  return body.data;
}

const adminStatus = (svc: TestService, key: string) => svc.fetch('/api/admin/status', { headers: { 'x-api-key': key } });
const revoke = (svc: TestService, id: string, headers: Record<string, string> = { authorization: `Bearer ${adminToken}` }) =>
  svc.fetch(`/api/admin/api-keys/${id}`, { method: 'DELETE', headers });

beforeAll(async () => {
  a = await startTestService({ API_KEYS: STATIC_KEY }, { init: true });
  b = await startTestService({ API_KEYS: STATIC_KEY }, { dir: a.dir });
  adminToken = await a.login(ADMIN.username, ADMIN.password);
});

afterAll(async () => {
  await b?.close();
  await a?.close();
});

describe('managed API keys over HTTP', () => {
  it('create: when an administrator creates a key, then 201 shows the mds_ key once, with no-store, and only its digest is stored', async () => {
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();

    const res = await createKey(a, { authorization: `Bearer ${adminToken}` }, { name: 'dashboard', role: 'read', rate_limit_per_minute: 600, expires_at: expiresAt });

    expect(res.status).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = (await res.json()) as { success: boolean; data: CreatedApiKey };
    expect(Object.keys(body).sort()).toEqual(['data', 'success']);
    expect(body.success).toBe(true);
    const created = body.data;
    expect(created.key).toMatch(/^mds_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(created.key.slice(4), 'base64url')).toHaveLength(32);
    expect(created).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: 'dashboard',
      role: 'read',
      rate_limit_per_minute: 600,
      expires_at: new Date(expiresAt).toISOString(),
      created_at: expect.any(String),
      last_used_at: null,
      created_by: 'user:admin',
      key: created.key,
    });
    const db = new Database(join(a.dir, 'mds.sqlite'), { readonly: true });
    const row = db.prepare('SELECT * FROM api_keys WHERE id = ?').get(created.id) as Record<string, unknown>;
    db.close();
    expect(row.key_digest).toBe(sha256(created.key));
    expect(JSON.stringify(row)).not.toContain(created.key.slice(4));
  });

  it('list: when keys exist, then each instance lists them without the secret and without the digest', async () => {
    const created = await newKey({ name: 'listed', role: 'admin' });

    for (const svc of [a, b]) {
      const keys = await listKeys(svc);
      const listed = keys.find((k) => k.id === created.id);
      expect(listed).toEqual({ ...created, key: undefined });
      for (const key of keys) expect(Object.keys(key).sort()).toEqual(KEY_FIELDS);
      const text = JSON.stringify(keys);
      expect(text).not.toContain(created.key);
      expect(text).not.toContain(sha256(created.key));
    }
  });

  it('use: when a read key calls admin endpoints, then 403 on both instances; an admin key is an administrator', async () => {
    const reader = await newKey({ name: 'reader', role: 'read' });
    const admin = await newKey({ name: 'operator', role: 'admin' });

    for (const svc of [a, b]) {
      const refused = await adminStatus(svc, reader.key);
      expect(refused.status).toBe(403);
      expect(await refused.json()).toEqual({ success: false, error: 'Administrator rights required', code: 403, detail: 'Administrator rights required' });
      expect((await svc.fetch('/api/admin/api-keys', { headers: { 'x-api-key': reader.key } })).status).toBe(403);
      expect((await adminStatus(svc, admin.key)).status).toBe(200);
    }
    const byKey = await createKey(b, { 'x-api-key': admin.key }, { name: 'made-by-key', role: 'read' });
    expect(byKey.status).toBe(201);
    expect(((await byKey.json()) as { data: ApiKey }).data.created_by).toBe(`key:${admin.id}`);
  });

  it('use: when a key from API_KEYS is used, then it stays an administrator and creates keys as key:static:<digest prefix>', async () => {
    const res = await createKey(a, { 'x-api-key': STATIC_KEY }, { name: 'by-static', role: 'read' });

    expect(res.status).toBe(201);
    expect(((await res.json()) as { data: ApiKey }).data.created_by).toBe(STATIC_ID);
    expect((await adminStatus(b, STATIC_KEY)).status).toBe(200);
  });

  it('use: when an mds_ key is unknown, then 401 Invalid API key', async () => {
    const res = await adminStatus(a, `mds_${randomBytes(32).toString('base64url')}`);

    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: string }).error).toBe('Invalid API key');
  });

  it('revoke: when a key is revoked on one instance, then the other answers 401 within a second, and a second revoke is 404', async () => {
    const key = await newKey({ name: 'to-revoke', role: 'admin' });
    // Both instances have just verified it, so both hold it in their lookup caches.
    expect((await adminStatus(a, key.key)).status).toBe(200);
    expect((await adminStatus(b, key.key)).status).toBe(200);

    const res = await revoke(a, key.id);
    const revokedAt = Date.now();

    expect(res.status).toBe(204);
    expect((await adminStatus(a, key.key)).status).toBe(401);
    await waitFor(async () => (await adminStatus(b, key.key)).status === 401, { timeoutMs: 1000, message: 'the second instance refuses the revoked key' });
    expect(Date.now() - revokedAt).toBeLessThan(1000);
    expect((await listKeys(b)).some((k) => k.id === key.id)).toBe(false);
    const again = await revoke(b, key.id);
    expect(again.status).toBe(404);
    expect(((await again.json()) as { error: string }).error).toBe(`API key '${key.id}' not found`);
  });

  it('revoke: when the id is unknown, then 404; when it is not a key id, then 422', async () => {
    expect((await revoke(a, randomUUID())).status).toBe(404);
    const bad = await revoke(a, 'not-a-uuid');
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { violations: Array<{ path: string }> }).violations[0]?.path).toBe('path.id');
  });

  it('expiry: when a key reaches expires_at, then every instance answers 401', async () => {
    const key = await newKey({ name: 'short-lived', role: 'admin', expires_at: new Date(Date.now() + 1500).toISOString() });
    expect((await adminStatus(b, key.key)).status).toBe(200);

    await waitFor(async () => (await adminStatus(b, key.key)).status === 401, { timeoutMs: 5000, intervalMs: 100, message: 'the expired key is refused' });

    expect(Date.now()).toBeGreaterThanOrEqual(new Date(key.expires_at ?? 0).getTime());
    const refused = await adminStatus(a, key.key);
    expect(refused.status).toBe(401);
    // Expired, not unknown: a refusal says which, as for an expired token.
    expect(await refused.json()).toEqual({ success: false, error: 'API key has expired', code: 401, detail: 'API key has expired' });
  });

  it('create: when the body is invalid, then 422 naming each field, and nothing is created', async () => {
    const before = (await listKeys(a)).length;
    const headers = { authorization: `Bearer ${adminToken}` };

    const past = await createKey(a, headers, { name: 'late', role: 'read', expires_at: new Date(Date.now() - 1000).toISOString() });
    const bad = await createKey(a, headers, { name: 'bad name', role: 'owner', rate_limit_per_minute: 0 });

    expect(past.status).toBe(422);
    expect(await past.json()).toMatchObject({ violations: [{ path: 'body.expires_at', message: 'must lie in the future' }] });
    // Days and hours that do not exist are refused, not rolled over into the next (2 March, the next day).
    for (const expires_at of ['2030-02-30T00:00:00Z', '2030-04-31T00:00:00Z', '2030-01-01T24:00:00Z']) {
      const res = await createKey(a, headers, { name: 'nonday', role: 'read', expires_at });
      expect(res.status, expires_at).toBe(422);
      expect(((await res.json()) as { violations: Array<{ path: string }> }).violations.map((v) => v.path)).toEqual(['body.expires_at']);
    }
    expect(bad.status).toBe(422);
    const paths = ((await bad.json()) as { violations: Array<{ path: string }> }).violations.map((v) => v.path).sort();
    expect(paths).toEqual(['body.name', 'body.rate_limit_per_minute', 'body.role']);
    expect((await listKeys(a)).length).toBe(before);
  });

  it('last_used_at: when a key is used, then it is recorded, and not rewritten by more use within the minute', async () => {
    const key = await newKey({ name: 'tracked', role: 'admin' });
    const before = Date.now();

    expect((await adminStatus(a, key.key)).status).toBe(200);
    let first: string | null = null;
    await waitFor(async () => (first = (await listKeys(a)).find((k) => k.id === key.id)?.last_used_at ?? null) !== null, { message: 'last_used_at is set' });
    expect(new Date(first ?? 0).getTime()).toBeGreaterThanOrEqual(before - 1000);

    expect((await adminStatus(a, key.key)).status).toBe(200);
    expect((await adminStatus(b, key.key)).status).toBe(200);
    // b's write, had it happened, is awaited by nothing: give it the time of one more list to land.
    await listKeys(b);

    expect((await listKeys(b)).find((k) => k.id === key.id)?.last_used_at).toBe(first);
  });

  it('audit: when keys are created and revoked and the cache flushed, then audit lines name actor, action, target, address and request id, and no line holds a key', async () => {
    const requestId = `audit-${randomBytes(4).toString('hex')}`;
    const created = ((await (await createKey(a, { authorization: `Bearer ${adminToken}` }, { name: 'audited', role: 'read' }, requestId)).json()) as { data: CreatedApiKey }).data;
    expect((await revoke(b, created.id, { 'x-api-key': STATIC_KEY, 'x-request-id': `${requestId}-r` })).status).toBe(204);
    expect((await a.fetch('/api/admin/cache', { method: 'DELETE', headers: { authorization: `Bearer ${adminToken}`, 'x-request-id': `${requestId}-f` } })).status).toBe(200);

    const audit = (svc: TestService, action: string) => svc.logs.filter((l) => l.audit === true && l.action === action);
    // The logger's own `name` is not overwritten by the key's (two `name` fields in one JSON line).
    expect(audit(a, 'api_key.created').every((l) => l.name === 'mds')).toBe(true);
    expect(audit(a, 'api_key.created').find((l) => l.reqId === requestId)).toMatchObject({
      actor: 'user:admin',
      target: `key:${created.id}`,
      ip: expect.stringMatching(/127\.0\.0\.1/),
      key_name: 'audited',
      role: 'read',
    });
    expect(audit(b, 'api_key.revoked').find((l) => l.reqId === `${requestId}-r`)).toMatchObject({ actor: STATIC_ID, target: `key:${created.id}` });
    expect(audit(a, 'cache.flushed').find((l) => l.reqId === `${requestId}-f`)).toMatchObject({ actor: 'user:admin', target: 'cache', removed: expect.any(Number) });
    expect(audit(a, 'login.succeeded').some((l) => l.actor === 'user:admin')).toBe(true);
    const everything = JSON.stringify([...a.logs, ...b.logs]);
    expect(everything).not.toContain(created.key);
    expect(everything).not.toMatch(/mds_[A-Za-z0-9_-]{43}/);
    expect(everything).not.toContain(STATIC_KEY);
    expect(everything).not.toContain(adminToken);
  });
});
