/**
 * Authentication and authorization of the real service over a real socket: every way a credential is
 * refused on an admin endpoint, who may call the admin endpoints, login, password change, login
 * throttling (counters in the shared test Redis) and the user administration API. Every error is
 * checked as status + the exact envelope, and no body may carry a password hash, a stack or the secret.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import jwt from 'jsonwebtoken';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import { freePort } from '../helpers/redis-server.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';

const API_KEYS = 'key-one,key-two';
const VALID_KEY = 'key-two';
const NOT_AUTHENTICATED = 'Not authenticated: please log in first';
const FORBIDDEN = 'Administrator rights required';
const LOGIN_FAILED = 'Invalid username or password';
const INVALID_TOKEN = 'Invalid token';
const EXPIRED_TOKEN = 'Token has expired';
const REVOKED_TOKEN = 'Token has been revoked';
const INVALID_API_KEY = 'Invalid API key';
const BAD_AUTH_HEADER = 'Invalid Authorization header: expected "Bearer <token>"';
const NOT_BEARER = "Invalid credentials: send the token as 'Authorization: Bearer <token>'";

const jsonHeaders = { 'content-type': 'application/json' };
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const apiKey = (key: string) => ({ 'x-api-key': key });

/** A name no other run sharing the test Redis will use. */
const unique = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

/** `count` bytes of UTF-8 made of two-byte characters, plus one ASCII byte when `count` is odd. */
const multibytePassword = (count: number) => 'é'.repeat(Math.floor(count / 2)) + (count % 2 === 1 ? 'x' : '');

interface Envelope {
  success: false;
  error: string;
  code: number;
  detail: string;
  violations?: Array<{ path: string; message: string }>;
}

function secretOf(svc: TestService): string {
  const secret = svc.config.auth.secretKey;
  if (!secret) throw new Error('the test service has no SECRET_KEY');
  return secret;
}

/** No password hash, no stack trace, no source location and no signing secret in a response body. */
function expectNothingLeaked(text: string, svc: TestService): void {
  expect(text).not.toMatch(/\$2[aby]\$\d\d\$/);
  expect(text).not.toMatch(/\n\s+at |\bat .+:\d+:\d+|node_modules|\.ts:\d+/);
  expect(text).not.toContain(secretOf(svc));
}

/** Asserts the status and that the body is exactly the envelope with `message` (and `violations` on 422). */
async function expectError(svc: TestService, res: Response, status: number, message: string, violations?: Envelope['violations']): Promise<Envelope> {
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status });
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expectNothingLeaked(text, svc);
  const body = JSON.parse(text) as Envelope;
  const expected: Envelope = { success: false, error: message, code: status, detail: message };
  if (violations) expected.violations = violations;
  expect(body).toStrictEqual(expected);
  return body;
}

async function jsonOf<T>(svc: TestService, res: Response, status: number): Promise<T> {
  const text = await res.text();
  expect({ status: res.status, text }).toMatchObject({ status });
  expectNothingLeaked(text, svc);
  return JSON.parse(text) as T;
}

function login(svc: TestService, username: string, password: string, headers: Record<string, string> = {}): Promise<Response> {
  return svc.fetch('/api/auth/login', { method: 'POST', headers: { ...jsonHeaders, ...headers }, body: JSON.stringify({ username, password }) });
}

function changePassword(svc: TestService, headers: Record<string, string>, oldPassword: string, newPassword: string): Promise<Response> {
  return svc.fetch('/api/auth/change-password', {
    method: 'POST',
    headers: { ...jsonHeaders, ...headers },
    body: JSON.stringify({ old_password: oldPassword, new_password: newPassword }),
  });
}

function adminStatus(svc: TestService, headers: Record<string, string> = {}): Promise<Response> {
  return svc.fetch('/api/admin/status', { headers });
}

function createUser(svc: TestService, headers: Record<string, string>, user: { username: string; password: string; is_admin?: boolean }): Promise<Response> {
  return svc.fetch('/api/admin/users', { method: 'POST', headers: { ...jsonHeaders, ...headers }, body: JSON.stringify(user) });
}

function deleteUser(svc: TestService, headers: Record<string, string>, pathSegment: string): Promise<Response> {
  return svc.fetch(`/api/admin/users/${pathSegment}`, { method: 'DELETE', headers });
}

async function usernames(svc: TestService): Promise<string[]> {
  const { data: users } = await jsonOf<{ data: Array<{ username: string }> }>(svc, await svc.fetch('/api/admin/users', { headers: apiKey(VALID_KEY) }), 200);
  return users.map((u) => u.username);
}

/** Creates a user through the API (with the API key) and returns its credentials. */
async function newUser(svc: TestService, label: string, isAdmin = false): Promise<{ username: string; password: string }> {
  const user = { username: unique(label), password: `pw-${randomBytes(6).toString('hex')}` };
  const res = await createUser(svc, apiKey(VALID_KEY), { ...user, is_admin: isAdmin });
  expect(res.status).toBe(201);
  return user;
}

function decodePart(token: string, index: 0 | 1): Record<string, unknown> {
  const part = token.split('.')[index];
  if (part === undefined) throw new Error(`not a JWT: ${token}`);
  return JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;
}

const encodePart = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');

/** The token with its payload patched and its original header and signature kept. */
function tamper(token: string, patch: Record<string, unknown>): string {
  const [header, , signature] = token.split('.');
  return `${header}.${encodePart({ ...decodePart(token, 1), ...patch })}.${signature}`;
}

describe('admin status: refused credentials answer 401 with the envelope', () => {
  let svc: TestService;
  let adminToken: string;
  let readerToken: string;

  beforeAll(async () => {
    svc = await startTestService({ API_KEYS }, { init: true });
    adminToken = await svc.login(ADMIN.username, ADMIN.password);
    const reader = await newUser(svc, 'reader');
    readerToken = await svc.login(reader.username, reader.password);
  });

  afterAll(async () => {
    await svc.close();
  });

  it('admin status: when the admin token is valid, answers 200 (the baseline the other cases break)', async () => {
    const body = await jsonOf<{ success: boolean }>(svc, await adminStatus(svc, bearer(adminToken)), 200);
    expect(body.success).toBe(true);
  });

  it("admin status: when no credentials are sent, answers 401 'Not authenticated: please log in first'", async () => {
    await expectError(svc, await adminStatus(svc), 401, NOT_AUTHENTICATED);
  });

  it("admin status: when the Authorization header is 'Bearer' with no token, answers 401 naming the expected header", async () => {
    await expectError(svc, await adminStatus(svc, { authorization: 'Bearer' }), 401, BAD_AUTH_HEADER);
    await expectError(svc, await adminStatus(svc, { authorization: 'Bearer   ' }), 401, BAD_AUTH_HEADER);
  });

  it('admin status: when a valid token is followed by anything else in the header, answers 401 naming the expected header', async () => {
    await expectError(svc, await adminStatus(svc, { authorization: `Bearer ${adminToken} extra` }), 401, BAD_AUTH_HEADER);
    await expectError(svc, await adminStatus(svc, { authorization: `Bearer ${adminToken}, Basic cm9vdDpwdw==` }), 401, BAD_AUTH_HEADER);
    // Scheme names are case-insensitive (RFC 9110), so this one is still the admin's token.
    expect((await adminStatus(svc, { authorization: `bearer ${adminToken}` })).status).toBe(200);
  });

  it("admin status: when the bearer token is not a JWT ('Bearer a.b'), answers 401 'Invalid token'", async () => {
    await expectError(svc, await adminStatus(svc, bearer('a.b')), 401, INVALID_TOKEN);
    await expectError(svc, await adminStatus(svc, bearer('not-a-token-at-all')), 401, INVALID_TOKEN);
  });

  it('admin status: when the Authorization header is garbage without a scheme, answers 401 asking for a Bearer token', async () => {
    await expectError(svc, await adminStatus(svc, { authorization: 'garbage' }), 401, NOT_BEARER);
    await expectError(svc, await adminStatus(svc, { authorization: adminToken }), 401, NOT_BEARER);
  });

  it('admin status: when the scheme is Basic instead of Bearer, answers 401 asking for a Bearer token', async () => {
    const basic = `Basic ${Buffer.from(`${ADMIN.username}:${ADMIN.password}`).toString('base64')}`;
    await expectError(svc, await adminStatus(svc, { authorization: basic }), 401, NOT_BEARER);
  });

  it("admin status: when the token was signed with another secret, answers 401 'Invalid token'", async () => {
    const forged = jwt.sign(decodePart(adminToken, 1), 'another-secret-that-is-long-enough-9876543210', { algorithm: 'HS256' });
    await expectError(svc, await adminStatus(svc, bearer(forged)), 401, INVALID_TOKEN);
  });

  it("admin status: when the token says alg 'none' and has no signature, answers 401 'Invalid token'", async () => {
    const unsigned = `${encodePart({ alg: 'none', typ: 'JWT' })}.${encodePart(decodePart(adminToken, 1))}.`;
    await expectError(svc, await adminStatus(svc, bearer(unsigned)), 401, INVALID_TOKEN);
  });

  it("admin status: when the token is signed with the right secret but HS512, answers 401 'Invalid token' (HS256 is pinned)", async () => {
    const otherAlg = jwt.sign(decodePart(adminToken, 1), secretOf(svc), { algorithm: 'HS512' });
    await expectError(svc, await adminStatus(svc, bearer(otherAlg)), 401, INVALID_TOKEN);
  });

  it("admin status: when the token has expired, answers 401 'Token has expired'", async () => {
    const nowS = Math.floor(Date.now() / 1000);
    const expired = jwt.sign({ ...decodePart(adminToken, 1), iat: nowS - 3600, exp: nowS - 60 }, secretOf(svc), { algorithm: 'HS256' });
    await expectError(svc, await adminStatus(svc, bearer(expired)), 401, EXPIRED_TOKEN);
  });

  it("admin status: when a non-admin token's payload is edited to adm: true, answers 401 'Invalid token'", async () => {
    expect(decodePart(readerToken, 1).adm).toBe(false);
    await expectError(svc, await adminStatus(svc, bearer(tamper(readerToken, { adm: true }))), 401, INVALID_TOKEN);
  });

  it("admin status: when a non-admin token's payload is edited to sub: admin, answers 401 'Invalid token'", async () => {
    await expectError(svc, await adminStatus(svc, bearer(tamper(readerToken, { sub: ADMIN.username }))), 401, INVALID_TOKEN);
  });

  it("admin status: when the token was issued before the user's password change, answers 401 'Token has been revoked'", async () => {
    const ops = await newUser(svc, 'ops', true);
    const oldToken = await svc.login(ops.username, ops.password);
    expect((await adminStatus(svc, bearer(oldToken))).status).toBe(200);

    expect((await changePassword(svc, bearer(oldToken), ops.password, 'a-brand-new-passphrase')).status).toBe(200);

    await expectError(svc, await adminStatus(svc, bearer(oldToken)), 401, REVOKED_TOKEN);
  });

  it("admin status: when the token's user has been deleted, answers 401 'Token has been revoked'", async () => {
    const gone = await newUser(svc, 'gone', true);
    const token = await svc.login(gone.username, gone.password);
    expect((await adminStatus(svc, bearer(token))).status).toBe(200);

    expect((await deleteUser(svc, apiKey(VALID_KEY), gone.username)).status).toBe(204);

    await expectError(svc, await adminStatus(svc, bearer(token)), 401, REVOKED_TOKEN);
  });

  it("admin status: when the API key is not one of API_KEYS, answers 401 'Invalid API key'", async () => {
    await expectError(svc, await adminStatus(svc, apiKey('key-three')), 401, INVALID_API_KEY);
    await expectError(svc, await adminStatus(svc, apiKey('key-one,key-two')), 401, INVALID_API_KEY);
  });

  it("admin status: when the X-API-Key header is empty, answers 401 'Invalid API key'", async () => {
    await expectError(svc, await adminStatus(svc, apiKey('')), 401, INVALID_API_KEY);
  });
});

describe('admin endpoints: an API key or an admin token gets in, a user token gets 403', () => {
  let svc: TestService;
  let adminToken: string;
  let userToken: string;

  beforeAll(async () => {
    svc = await startTestService({ API_KEYS }, { init: true });
    adminToken = await svc.login(ADMIN.username, ADMIN.password);
    const user = await newUser(svc, 'plain');
    userToken = await svc.login(user.username, user.password);
  });

  afterAll(async () => {
    await svc.close();
  });

  const credentials = [
    ['the API key', () => apiKey(VALID_KEY)],
    ['the first API key of the list', () => apiKey('key-one')],
    ['an admin token', () => bearer(adminToken)],
  ] as const;

  describe.each(credentials)('with %s', (_label, headersOf) => {
    it('admin status: answers 200 with the status', async () => {
      const body = await jsonOf<{ success: boolean; data: { version: string } }>(svc, await adminStatus(svc, headersOf()), 200);
      expect(body.success).toBe(true);
      expect(body.data.version).toEqual(expect.any(String));
    });

    it('list users: answers 200 with the users', async () => {
      const users = await jsonOf<{ success: boolean; data: Array<{ username: string }> }>(svc, await svc.fetch('/api/admin/users', { headers: headersOf() }), 200);
      expect(users.success).toBe(true);
      expect(users.data.map((u) => u.username)).toContain(ADMIN.username);
    });

    it('create user: answers 201 and the user exists', async () => {
      const username = unique('made');
      const created = await jsonOf<{ success: boolean; data: { username: string } }>(svc, await createUser(svc, headersOf(), { username, password: 'made-password-1' }), 201);
      expect(created.success).toBe(true);
      expect(created.data.username).toBe(username);
      expect(await usernames(svc)).toContain(username);
    });

    it('delete user: answers 204 and the user is gone', async () => {
      const victim = await newUser(svc, 'victim');
      const res = await deleteUser(svc, headersOf(), victim.username);
      expect(res.status).toBe(204);
      expect(await res.text()).toBe('');
      expect(await usernames(svc)).not.toContain(victim.username);
    });

    it('flush cache: answers 200 with the number removed at data', async () => {
      expect((await svc.fetch('/api/indices')).status).toBe(200);
      const body = await jsonOf<{ success: boolean; data: { removed: number } }>(svc, await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: headersOf() }), 200);
      expect(body).toStrictEqual({ success: true, data: { removed: expect.any(Number) as number } });
      expect(body.data.removed).toBeGreaterThanOrEqual(1);
      expect((await svc.fetch('/api/indices')).headers.get('x-cache')).toBe('MISS');
    });
  });

  it("admin status: when a non-admin user's token is valid, answers 403 'Administrator rights required'", async () => {
    await expectError(svc, await adminStatus(svc, bearer(userToken)), 403, FORBIDDEN);
  });

  it("list users: when a non-admin user's token is valid, answers 403 'Administrator rights required'", async () => {
    await expectError(svc, await svc.fetch('/api/admin/users', { headers: bearer(userToken) }), 403, FORBIDDEN);
  });

  it("create user: when a non-admin user's token is valid, answers 403 and creates nobody", async () => {
    const username = unique('sneaky');
    await expectError(svc, await createUser(svc, bearer(userToken), { username, password: 'sneaky-password', is_admin: true }), 403, FORBIDDEN);
    expect(await usernames(svc)).not.toContain(username);
  });

  it("delete user: when a non-admin user's token is valid, answers 403 and deletes nobody", async () => {
    const target = await newUser(svc, 'target');
    await expectError(svc, await deleteUser(svc, bearer(userToken), target.username), 403, FORBIDDEN);
    expect(await usernames(svc)).toContain(target.username);
  });

  it("flush cache: when a non-admin user's token is valid, answers 403 and the cache keeps its data", async () => {
    expect((await svc.fetch('/api/indices')).status).toBe(200);
    await expectError(svc, await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: bearer(userToken) }), 403, FORBIDDEN);
    expect((await svc.fetch('/api/indices')).headers.get('x-cache')).toBe('HIT');
  });

  it('admin status: when a valid admin token comes with an unknown API key, answers 401 (every credential sent is checked)', async () => {
    expect((await adminStatus(svc, { ...bearer(adminToken), ...apiKey('key-three') })).status).toBe(401);
  });

  it('admin status: when a valid API key comes with a garbage bearer token, answers 401 (every credential sent is checked)', async () => {
    expect((await adminStatus(svc, { ...bearer('a.b.c'), ...apiKey(VALID_KEY) })).status).toBe(401);
  });

  it("admin status: when a valid API key comes with a non-admin user's token, answers 200", async () => {
    expect((await adminStatus(svc, { ...bearer(userToken), ...apiKey(VALID_KEY) })).status).toBe(200);
  });

  it('admin status: when both the bearer token and the API key are invalid, answers 401', async () => {
    await expectError(svc, await adminStatus(svc, { ...bearer('a.b'), ...apiKey('key-three') }), 401, INVALID_TOKEN);
  });
});

describe('change password over HTTP', () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startTestService({ API_KEYS }, { init: true });
  });

  afterAll(async () => {
    await svc.close();
  });

  it('change password: when it succeeds, the old token and old password die, the fresh token and new password work', async () => {
    const first = await jsonOf<{ access_token: string; must_change_password: boolean }>(svc, await login(svc, ADMIN.username, ADMIN.password), 200);
    expect(first.must_change_password).toBe(true);
    const newPassword = 'the-admin-has-a-better-passphrase';

    const changed = await jsonOf<{ success: boolean; data: Record<string, unknown> }>(svc, await changePassword(svc, bearer(first.access_token), ADMIN.password, newPassword), 200);

    expect(changed).toStrictEqual({
      success: true,
      data: {
        access_token: expect.any(String) as string,
        token_type: 'bearer',
        username: ADMIN.username,
        is_admin: true,
        expires_in: svc.config.auth.tokenTtlMs / 1000,
        must_change_password: false,
      },
    });
    const freshToken = changed.data.access_token as string;
    expect(freshToken).not.toBe(first.access_token);
    await expectError(svc, await adminStatus(svc, bearer(first.access_token)), 401, REVOKED_TOKEN);
    await expectError(svc, await changePassword(svc, bearer(first.access_token), newPassword, 'yet-another-passphrase'), 401, REVOKED_TOKEN);
    await expectError(svc, await login(svc, ADMIN.username, ADMIN.password), 401, LOGIN_FAILED);
    expect((await adminStatus(svc, bearer(freshToken))).status).toBe(200);
    const again = await jsonOf<{ must_change_password: boolean }>(svc, await login(svc, ADMIN.username, newPassword), 200);
    expect(again.must_change_password).toBe(false);
  });

  it("change password: when the old password is wrong, answers 400 'Old password is incorrect' and nothing changes", async () => {
    const user = await newUser(svc, 'wrongold');
    const token = await svc.login(user.username, user.password);

    await expectError(svc, await changePassword(svc, bearer(token), 'not-the-old-password', 'whatever-new-passphrase'), 400, 'Old password is incorrect');

    expect((await login(svc, user.username, user.password)).status).toBe(200);
    expect((await changePassword(svc, bearer(token), user.password, 'whatever-new-passphrase')).status).toBe(200);
  });

  it("change password: when the new password equals the old one, answers 400 'New password must differ from the old one'", async () => {
    const user = await newUser(svc, 'same');
    const token = await svc.login(user.username, user.password);

    await expectError(svc, await changePassword(svc, bearer(token), user.password, user.password), 400, 'New password must differ from the old one');

    expect((await adminStatus(svc, bearer(token))).status).toBe(403);
  });

  it('change password: when the new password is 73 bytes of UTF-8 in 37 characters, answers 422 and the old password still works', async () => {
    const user = await newUser(svc, 'long');
    const token = await svc.login(user.username, user.password);
    const tooLong = multibytePassword(73);
    expect([tooLong.length, Buffer.byteLength(tooLong)]).toEqual([37, 73]);

    const message = 'must be at most 72 bytes in UTF-8 (got 73)';
    await expectError(svc, await changePassword(svc, bearer(token), user.password, tooLong), 422, `Invalid request parameters: body.new_password ${message}`, [
      { path: 'body.new_password', message },
    ]);

    expect((await login(svc, user.username, user.password)).status).toBe(200);
    await expectError(svc, await login(svc, user.username, tooLong), 401, LOGIN_FAILED);
  });

  it('change password: when the new password is exactly 72 bytes of UTF-8, answers 200 and it logs in', async () => {
    const user = await newUser(svc, 'max');
    const token = await svc.login(user.username, user.password);
    const longest = multibytePassword(72);
    expect(Buffer.byteLength(longest)).toBe(72);

    expect((await changePassword(svc, bearer(token), user.password, longest)).status).toBe(200);

    expect((await login(svc, user.username, longest)).status).toBe(200);
    await expectError(svc, await login(svc, user.username, user.password), 401, LOGIN_FAILED);
  });

  it('change password: when the new password is 73 ASCII characters, answers 422 from the contract', async () => {
    const user = await newUser(svc, 'ascii');
    const token = await svc.login(user.username, user.password);

    const res = await changePassword(svc, bearer(token), user.password, 'x'.repeat(73));

    const message = 'must NOT have more than 72 characters';
    await expectError(svc, res, 422, `Invalid request parameters: body.new_password ${message}`, [{ path: 'body.new_password', message }]);
  });

  it("change password: when only a valid API key is sent, answers 401 'Not authenticated: please log in first', saying an API key is not taken here (bearer only)", async () => {
    const message = `${NOT_AUTHENTICATED} (this operation takes a bearer token, not an API key)`;
    await expectError(svc, await changePassword(svc, apiKey(VALID_KEY), 'anything-old', 'anything-new-1'), 401, message);
  });

  it("change password: when no credentials are sent, answers 401 'Not authenticated: please log in first'", async () => {
    await expectError(svc, await changePassword(svc, {}, 'anything-old', 'anything-new-1'), 401, NOT_AUTHENTICATED);
  });

  it('logs: no line carries a password hash or the signing secret', () => {
    const text = JSON.stringify(svc.logs);
    expect(text).not.toMatch(/\$2[aby]\$\d\d\$/);
    expect(text).not.toContain(secretOf(svc));
  });
});

describe('login over HTTP', () => {
  const EXPIRE_MINUTES = 15;
  let svc: TestService;

  beforeAll(async () => {
    svc = await startTestService({ API_KEYS, ACCESS_TOKEN_EXPIRE_MINUTES: String(EXPIRE_MINUTES) }, { init: true });
  });

  afterAll(async () => {
    await svc.close();
  });

  it('login: when the default admin still uses DEFAULT_ADMIN_PASSWORD, answers exactly the LoginResult with must_change_password true', async () => {
    const body = await jsonOf<Record<string, unknown>>(svc, await login(svc, ADMIN.username, ADMIN.password), 200);

    expect(body).toStrictEqual({
      ok: true,
      access_token: expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/) as string,
      token_type: 'bearer',
      username: ADMIN.username,
      is_admin: true,
      expires_in: EXPIRE_MINUTES * 60,
      must_change_password: true,
    });
  });

  it('login: the token is HS256 for the user, and exp - iat is ACCESS_TOKEN_EXPIRE_MINUTES', async () => {
    const before = Math.floor(Date.now() / 1000);
    const token = await svc.login(ADMIN.username, ADMIN.password);
    const after = Math.floor(Date.now() / 1000);

    expect(decodePart(token, 0)).toStrictEqual({ alg: 'HS256', typ: 'JWT' });
    const claims = jwt.verify(token, secretOf(svc), { algorithms: ['HS256'] }) as { sub: string; adm: boolean; iat: number; exp: number };
    expect(claims.sub).toBe(ADMIN.username);
    expect(claims.adm).toBe(true);
    expect(claims.exp - claims.iat).toBe(EXPIRE_MINUTES * 60);
    expect(claims.iat).toBeGreaterThanOrEqual(before);
    expect(claims.iat).toBeLessThanOrEqual(after);
  });

  it('login: when another user logs in, must_change_password is false and is_admin says what they are', async () => {
    const user = await newUser(svc, 'someone');

    const body = await jsonOf<Record<string, unknown>>(svc, await login(svc, user.username, user.password), 200);

    expect(body).toMatchObject({ ok: true, username: user.username, is_admin: false, must_change_password: false, expires_in: EXPIRE_MINUTES * 60 });
  });

  it('login: when a user other than the default admin uses DEFAULT_ADMIN_PASSWORD, must_change_password is false', async () => {
    const username = unique('copycat');
    expect((await createUser(svc, apiKey(VALID_KEY), { username, password: ADMIN.password })).status).toBe(201);

    const body = await jsonOf<{ must_change_password: boolean }>(svc, await login(svc, username, ADMIN.password), 200);

    expect(body.must_change_password).toBe(false);
  });

  it('login: when the user is unknown or the password is wrong, answers the same 401 and body', async () => {
    const user = await newUser(svc, 'known');

    const unknownRes = await login(svc, unique('nobody'), user.password);
    const wrongRes = await login(svc, user.username, 'wrong-password-1');

    const unknownBody = await expectError(svc, unknownRes, 401, LOGIN_FAILED);
    const wrongBody = await expectError(svc, wrongRes, 401, LOGIN_FAILED);
    expect(wrongBody).toStrictEqual(unknownBody);
    expect(wrongRes.headers.get('retry-after')).toBeNull();
  });

  it('login: when a bad credential is sent with it, answers 401 (every credential sent is checked, even where none is needed)', async () => {
    expect((await login(svc, ADMIN.username, ADMIN.password, bearer('a.b'))).status).toBe(401);
  });
});

describe('login throttling over HTTP', () => {
  const MAX_FAILURES = 3;
  const BLOCK_SECONDS = 60;
  // Its own Redis database: the per-address counter of 127.0.0.1 must not see other suites' failures.
  const REDIS_DB = 11;
  let svc: TestService;
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis({ host: '127.0.0.1', port: inject('redisPort'), db: REDIS_DB, lazyConnect: true });
    await redis.connect();
    // Failures of earlier runs of this file would still count against 127.0.0.1 for BLOCK_SECONDS.
    await redis.del('mds:v1:throttle:ip:127.0.0.1');
    svc = await startTestService(
      {
        API_KEYS,
        CACHE_URL: `redis://127.0.0.1:${inject('redisPort')}/${REDIS_DB}`,
        LOGIN_MAX_FAILURES: String(MAX_FAILURES),
        LOGIN_BLOCK_SECONDS: String(BLOCK_SECONDS),
      },
      { init: true },
    );
  });

  afterAll(async () => {
    await svc.close();
    await redis.quit();
  });

  // Every failure also counts against 127.0.0.1, whose limit is 4 x MAX_FAILURES = 12: this block stays at 6.
  it('login: after LOGIN_MAX_FAILURES wrong passwords, answers 429 with Retry-After even to the right password, while another user logs in', async () => {
    const victim = await newUser(svc, 'victim');
    const bystander = await newUser(svc, 'bystander');

    for (let i = 0; i < MAX_FAILURES; i++) {
      await expectError(svc, await login(svc, victim.username, `wrong-password-${i}`), 401, LOGIN_FAILED);
    }
    const blocked = await login(svc, victim.username, victim.password);

    const retryAfter = blocked.headers.get('retry-after');
    expect(retryAfter).toMatch(/^\d+$/);
    const seconds = Number(retryAfter);
    expect(seconds).toBeGreaterThanOrEqual(1);
    expect(seconds).toBeLessThanOrEqual(BLOCK_SECONDS);
    await expectError(svc, blocked, 429, `Too many failed login attempts: retry in ${seconds} seconds`);
    expect((await login(svc, victim.username, 'yet-another-wrong-one')).status).toBe(429);

    const other = await jsonOf<{ username: string }>(svc, await login(svc, bystander.username, bystander.password), 200);
    expect(other.username).toBe(bystander.username);

    expect(await redis.exists(`mds:v1:throttle:user:${victim.username}`)).toBe(1);
    expect(await redis.exists('mds:v1:throttle:ip:127.0.0.1')).toBe(1);
    const ttlMs = await redis.pttl(`mds:v1:throttle:user:${victim.username}`);
    expect(ttlMs).toBeGreaterThan(0);
    expect(ttlMs).toBeLessThanOrEqual(BLOCK_SECONDS * 1000);
  });

  it('login: when a correct login comes before the limit, the username failures from that address start over', async () => {
    const user = await newUser(svc, 'typo');

    for (let i = 0; i < MAX_FAILURES - 1; i++) expect((await login(svc, user.username, 'typo-password')).status).toBe(401);
    expect((await login(svc, user.username, user.password)).status).toBe(200);
    expect(await redis.exists(`mds:v1:throttle:pair:127.0.0.1:${user.username}`)).toBe(0);
    expect((await login(svc, user.username, 'typo-password')).status).toBe(401);

    expect((await login(svc, user.username, user.password)).status).toBe(200);
  });
});

describe('login throttling per address over HTTP', () => {
  it('login: after LOGIN_MAX_FAILURES_PER_ADDRESS failures from one address, whatever the usernames, answers 429 even to a correct login from it', async () => {
    // In memory (a Redis that is not there): any shared Redis holds other tests' failures from 127.0.0.1.
    const nowhere = `redis://127.0.0.1:${await freePort()}/0`;
    const svc = await startTestService({ CACHE_URL: nowhere, LOGIN_MAX_FAILURES: '5', LOGIN_MAX_FAILURES_PER_ADDRESS: '2' }, { init: true });
    try {
      await expectError(svc, await login(svc, 'nobody-1', 'wrong-password'), 401, LOGIN_FAILED);
      await expectError(svc, await login(svc, 'nobody-2', 'wrong-password'), 401, LOGIN_FAILED);
      const blocked = await login(svc, ADMIN.username, ADMIN.password);
      expect(blocked.status).toBe(429);
      expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await svc.close();
    }
  });
});

describe('admin users API', () => {
  let svc: TestService;
  let adminToken: string;
  const admin = () => bearer(adminToken);

  beforeAll(async () => {
    svc = await startTestService({ API_KEYS }, { init: true });
    adminToken = await svc.login(ADMIN.username, ADMIN.password);
  });

  afterAll(async () => {
    await svc.close();
  });

  it('list users: answers every user as exactly {username, is_admin, created_at}, never a password hash', async () => {
    await newUser(svc, 'listed');

    const res = await svc.fetch('/api/admin/users', { headers: admin() });

    const body = await jsonOf<{ success: boolean; data: Array<Record<string, unknown>> }>(svc, res, 200);
    expect(Object.keys(body).sort()).toEqual(['data', 'success']);
    expect(body.success).toBe(true);
    const users = body.data;
    expect(users.length).toBeGreaterThanOrEqual(2);
    for (const user of users) {
      expect(Object.keys(user).sort()).toEqual(['created_at', 'is_admin', 'username']);
      expect(new Date(user.created_at as string).toISOString()).toBe(user.created_at);
    }
    expect(users.map((u) => u.username)).toEqual([...users.map((u) => u.username as string)].sort());
    expect(users.find((u) => u.username === ADMIN.username)).toMatchObject({ is_admin: true });
  });

  it('create user: answers 201 with the user, and the user can log in', async () => {
    const username = unique('analyst');

    const res = await createUser(svc, admin(), { username, password: 'analyst-password', is_admin: false });

    const created = await jsonOf<Record<string, unknown>>(svc, res, 201);
    expect(created).toStrictEqual({ success: true, data: { username, is_admin: false, created_at: expect.any(String) as string } });
    const loggedIn = await jsonOf<Record<string, unknown>>(svc, await login(svc, username, 'analyst-password'), 200);
    expect(loggedIn).toMatchObject({ username, is_admin: false });
  });

  it('create user: when is_admin is true, the new user can call admin endpoints', async () => {
    const username = unique('second-admin');
    expect((await createUser(svc, admin(), { username, password: 'second-admin-pw', is_admin: true })).status).toBe(201);

    const token = await svc.login(username, 'second-admin-pw');

    expect((await adminStatus(svc, bearer(token))).status).toBe(200);
    expect((await deleteUser(svc, admin(), username)).status).toBe(204);
  });

  it('create user: when the username is taken, answers 409 and the first account is untouched', async () => {
    const user = await newUser(svc, 'taken');

    await expectError(svc, await createUser(svc, admin(), { username: user.username, password: 'other-password-1' }), 409, `Username '${user.username}' is already taken`);

    expect((await login(svc, user.username, user.password)).status).toBe(200);
    expect((await login(svc, user.username, 'other-password-1')).status).toBe(401);
  });

  it('create user: when the password is 7 bytes, answers 422 and creates nobody', async () => {
    const username = unique('short');
    const message = 'must NOT have fewer than 8 characters';

    await expectError(svc, await createUser(svc, admin(), { username, password: 'seven77' }), 422, `Invalid request parameters: body.password ${message}`, [
      { path: 'body.password', message },
    ]);

    expect(await usernames(svc)).not.toContain(username);
  });

  it('create user: when the password is 73 bytes of UTF-8, answers 422 and creates nobody', async () => {
    const username = unique('toolong');
    const message = 'must be at most 72 bytes in UTF-8 (got 73)';

    await expectError(svc, await createUser(svc, admin(), { username, password: multibytePassword(73) }), 422, `Invalid request parameters: body.password ${message}`, [
      { path: 'body.password', message },
    ]);

    expect(await usernames(svc)).not.toContain(username);
  });

  it('delete user: answers 204, then 404 on repeat, and the user can no longer log in', async () => {
    const user = await newUser(svc, 'leaving');

    const first = await deleteUser(svc, admin(), user.username);
    expect(first.status).toBe(204);
    expect(await first.text()).toBe('');

    await expectError(svc, await deleteUser(svc, admin(), user.username), 404, `User '${user.username}' not found`);
    await expectError(svc, await login(svc, user.username, user.password), 401, LOGIN_FAILED);
  });

  it('delete user: when it is the last administrator, answers 400 and the administrator still exists', async () => {
    const res = await deleteUser(svc, admin(), ADMIN.username);

    await expectError(svc, res, 400, `Cannot delete '${ADMIN.username}': it is the last administrator`);
    expect(await usernames(svc)).toContain(ADMIN.username);
    expect((await adminStatus(svc, admin())).status).toBe(200);
    expect((await login(svc, ADMIN.username, ADMIN.password)).status).toBe(200);
  });

  it("delete user: when the username in the path has a space ('a%20b'), answers 422", async () => {
    const message = 'must match pattern "^[A-Za-z0-9._-]+$"';

    await expectError(svc, await deleteUser(svc, admin(), 'a%20b'), 422, `Invalid request parameters: path.username ${message}`, [
      { path: 'path.username', message },
    ]);
  });

  it('delete user: when the username in the path is 65 characters, answers 422', async () => {
    const message = 'must NOT have more than 64 characters';

    await expectError(svc, await deleteUser(svc, admin(), 'u'.repeat(65)), 422, `Invalid request parameters: path.username ${message}`, [
      { path: 'path.username', message },
    ]);
  });

  it('admin status: answers success, and at data the version of openapi.yaml and the number of users', async () => {
    const contract = parse(readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8')) as { info: { version: string } };
    const count = (await usernames(svc)).length;

    const body = await jsonOf<{ success: boolean; data: { version: string; users: { count: number } } }>(svc, await adminStatus(svc, admin()), 200);

    expect(body.success).toBe(true);
    expect(body.data.version).toBe(contract.info.version);
    expect(body.data.users).toStrictEqual({ count });
  });

  it('admin status: users.count follows creations and deletions', async () => {
    const countOf = async () => (await jsonOf<{ data: { users: { count: number } } }>(svc, await adminStatus(svc, admin()), 200)).data.users.count;
    const before = await countOf();

    const user = await newUser(svc, 'counted');
    expect(await countOf()).toBe(before + 1);
    expect((await deleteUser(svc, admin(), user.username)).status).toBe(204);

    expect(await countOf()).toBe(before);
  });
});
