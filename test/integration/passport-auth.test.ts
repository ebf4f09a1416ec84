/**
 * Bearer and API-key authentication through the passport strategies, over real HTTP, against users in
 * a real SQLite file.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import jwt from 'jsonwebtoken';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTH_MESSAGES } from '../../src/domain/credentials.js';
import { API_KEY_PRINCIPAL, createPassportAuth } from '../../src/infra/auth/passport-auth.js';
import { TokenService } from '../../src/infra/auth/tokens.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import type { Principal } from '../../src/domain/ports/accounts.js';
import { startAuthProbe, type AuthProbe } from '../helpers/auth-probe.js';

const SECRET = 'passport-test-secret-0123456789';
const HOUR_MS = 3_600_000;
const API_KEYS = ['', '   ', 'key-one-0123456789', 'key-two-abcdefghij'];

describe('createPassportAuth', () => {
  let dir: string;
  let db: OpenedUserStore;
  let probe: AuthProbe;
  const tokens = new TokenService({ secret: SECRET, ttlMs: HOUR_MS });

  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
  const issueFor = async (username: string, claims: { isAdmin?: boolean } = {}) => {
    const user = await db.store.findByUsername(username);
    if (!user) throw new Error(`no user ${username}`);
    return tokens.sign({ ...user, ...claims });
  };
  const tokenFor = async (username: string, claims: { isAdmin?: boolean } = {}) => (await issueFor(username, claims)).token;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-passport-'));
    db = await openUserStore(`sqlite:${join(dir, 'users.sqlite')}`, { runMigrations: true });
    await db.store.create({ username: 'root', passwordHash: '$2b$04$rootrootrootrootrootroOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy', isAdmin: true });
    await db.store.create({ username: 'viewer', passwordHash: '$2b$04$viewerviewerviewervieOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy', isAdmin: false });
    probe = await startAuthProbe(createPassportAuth({ apiKeyHeader: 'X-API-Key', userStore: db.store, tokens, apiKeys: API_KEYS }));
  });

  afterAll(async () => {
    await probe.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('bearer', () => {
    it("when the token is valid, then resolves to the user principal, which carries the token's expiry", async () => {
      const issued = await issueFor('root');

      expect(await probe.bearer(bearer(issued.token))).toEqual({ ok: true, principal: { username: 'root', isAdmin: true, kind: 'user', id: 'user:root', expiresAtMs: issued.expiresAt.getTime(), passwordVersion: issued.claims.pwv } });
    });

    it('when a token claims admin for a user who is not one, then the principal has no admin rights', async () => {
      const issued = await issueFor('viewer', { isAdmin: true });
      const result = await probe.bearer(bearer(issued.token));

      expect(result).toEqual({ ok: true, principal: { username: 'viewer', isAdmin: false, kind: 'user', id: 'user:viewer', expiresAtMs: issued.expiresAt.getTime(), passwordVersion: issued.claims.pwv } });
    });

    it('when there is no Authorization header, then rejects with NotAuthenticatedError', async () => {
      expect(await probe.bearer()).toMatchObject({ ok: false, error: 'NotAuthenticatedError', code: 'NOT_AUTHENTICATED' });
    });

    it('when the scheme is not Bearer, or the token is missing, then rejects as a bad Authorization header', async () => {
      for (const value of ['Basic cm9vdDpwdw==', 'Bearer', 'Token abc.def.ghi']) {
        expect(await probe.bearer({ Authorization: value }), value).toMatchObject({
          ok: false,
          code: 'INVALID_CREDENTIALS',
          message: AUTH_MESSAGES.badAuthorizationHeader,
        });
      }
    });

    it('when the token is malformed, then rejects as an invalid token', async () => {
      expect(await probe.bearer(bearer('not.a.jwt'))).toMatchObject({ ok: false, code: 'INVALID_CREDENTIALS', message: AUTH_MESSAGES.invalid });
    });

    it('when the token is unsigned (alg none), then rejects as an invalid token', async () => {
      const { claims } = tokens.sign({ username: 'root', isAdmin: true, passwordHash: 'x' });
      const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

      const result = await probe.bearer(bearer(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`));

      expect(result).toMatchObject({ ok: false, code: 'INVALID_CREDENTIALS', message: AUTH_MESSAGES.invalid });
    });

    it('when the token is signed with HS512 or another secret, then rejects as an invalid token', async () => {
      const { claims } = tokens.sign((await db.store.findByUsername('root'))!);
      const hs512 = jwt.sign(claims, SECRET, { algorithm: 'HS512' });
      const otherSecret = new TokenService({ secret: 'not-our-secret', ttlMs: HOUR_MS }).sign((await db.store.findByUsername('root'))!).token;

      expect(await probe.bearer(bearer(hs512))).toMatchObject({ ok: false, message: AUTH_MESSAGES.invalid });
      expect(await probe.bearer(bearer(otherSecret))).toMatchObject({ ok: false, message: AUTH_MESSAGES.invalid });
    });

    it('when the token has expired, then rejects saying it expired', async () => {
      const past = new TokenService({ secret: SECRET, ttlMs: HOUR_MS, now: () => Date.now() - 2 * HOUR_MS });
      const expired = past.sign((await db.store.findByUsername('root'))!).token;

      expect(await probe.bearer(bearer(expired))).toMatchObject({ ok: false, code: 'INVALID_CREDENTIALS', message: AUTH_MESSAGES.expired });
    });

    it('when the password changed after the token was issued, then rejects it as revoked', async () => {
      await db.store.create({ username: 'changer', passwordHash: '$2b$04$firsthashfirsthashfirOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy', isAdmin: false });
      const token = await tokenFor('changer');
      expect(await probe.bearer(bearer(token))).toMatchObject({ ok: true });

      await db.store.updatePasswordHash('changer', '$2b$04$secondhashsecondhashsOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy');

      expect(await probe.bearer(bearer(token))).toMatchObject({ ok: false, code: 'INVALID_CREDENTIALS', message: AUTH_MESSAGES.revoked });
      expect(await probe.bearer(bearer(await tokenFor('changer')))).toMatchObject({ ok: true });
    });

    it('when the user was deleted after the token was issued, then rejects it as revoked', async () => {
      await db.store.create({ username: 'leaver', passwordHash: '$2b$04$leaverleaverleaverleaOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy', isAdmin: false });
      const token = await tokenFor('leaver');

      await db.store.delete('leaver');

      expect(await probe.bearer(bearer(token))).toMatchObject({ ok: false, message: AUTH_MESSAGES.revoked });
    });
  });

  describe('API key', () => {
    it('when the key is one of API_KEYS, then resolves to the api-key service account (an administrator) with that key\'s own id', async () => {
      const staticId = (key: string) => `key:static:${createHash('sha256').update(key).digest('hex').slice(0, 8)}`;

      expect(await probe.apiKey({ 'X-API-Key': 'key-two-abcdefghij' })).toEqual({ ok: true, principal: { ...API_KEY_PRINCIPAL, id: staticId('key-two-abcdefghij') } });
      expect(await probe.apiKey({ 'x-api-key': 'key-one-0123456789' })).toEqual({
        ok: true,
        principal: { username: 'api-key', isAdmin: true, kind: 'api-key', id: staticId('key-one-0123456789') },
      });
      expect(staticId('key-one-0123456789')).not.toBe(staticId('key-two-abcdefghij'));
    });

    it('when the header is absent, then rejects with NotAuthenticatedError', async () => {
      expect(await probe.apiKey()).toMatchObject({ ok: false, code: 'NOT_AUTHENTICATED' });
    });

    it('when the key is unknown, a prefix of a real key, or blank, then rejects as an invalid API key', async () => {
      for (const key of ['nope', 'key-one', 'key-one-01234567890', '', '   ']) {
        expect(await probe.apiKey({ 'X-API-Key': key }), JSON.stringify(key)).toMatchObject({
          ok: false,
          code: 'INVALID_CREDENTIALS',
          message: AUTH_MESSAGES.invalidApiKey,
        });
      }
    });

    it('when no API keys are configured, then every key is refused', async () => {
      const none = await startAuthProbe(createPassportAuth({ apiKeyHeader: 'X-API-Key', userStore: db.store, tokens, apiKeys: [] }));
      try {
        expect(await none.apiKey({ 'X-API-Key': 'key-one-0123456789' })).toMatchObject({ ok: false, message: AUTH_MESSAGES.invalidApiKey });
      } finally {
        await none.close();
      }
    });
  });

  describe('recheck (a connection checked again while it lives)', () => {
    /** The principal a bearer request with `token` gets now. */
    const principalOf = async (token: string) => {
      const result = await probe.bearer(bearer(token));
      if (!result.ok) throw new Error(`token refused: ${JSON.stringify(result)}`);
      return result.principal as Principal;
    };

    it('when nothing changed, then the principal of a token still passes', async () => {
      const auth = createPassportAuth({ apiKeyHeader: 'X-API-Key', userStore: db.store, tokens, apiKeys: API_KEYS });

      expect(await auth.recheck(await principalOf(await tokenFor('root')))).toBeUndefined();
    });

    it('when the password changed, the user was deleted or its rights changed, then it is refused as revoked', async () => {
      const auth = createPassportAuth({ apiKeyHeader: 'X-API-Key', userStore: db.store, tokens, apiKeys: API_KEYS });
      for (const username of ['re-pass', 're-gone', 're-rights']) await db.store.create({ username, passwordHash: '$2b$04$recheckrecheckrecheckrOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy', isAdmin: false });
      const [changed, gone, promoted] = await Promise.all(['re-pass', 're-gone', 're-rights'].map(async (u) => principalOf(await tokenFor(u))));

      await db.store.updatePasswordHash('re-pass', '$2b$04$recheckotherhashotherOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy');
      await db.store.delete('re-gone');

      expect(await auth.recheck(changed!)).toBe(AUTH_MESSAGES.revoked);
      expect(await auth.recheck(gone!)).toBe(AUTH_MESSAGES.revoked);
      expect(await auth.recheck({ ...promoted!, isAdmin: true })).toBe(AUTH_MESSAGES.revoked);
    });

    it('when the token or the managed key has expired, then it is refused as expired', async () => {
      let nowMs = Date.now();
      const auth = createPassportAuth({ apiKeyHeader: 'X-API-Key', userStore: db.store, tokens, apiKeys: API_KEYS, now: () => nowMs });
      const principal = await principalOf(await tokenFor('root'));

      nowMs = principal.expiresAtMs!;

      expect(await auth.recheck(principal)).toBe(AUTH_MESSAGES.expired);
      expect(await auth.recheck({ username: 'api-key:k', isAdmin: false, kind: 'api-key', id: 'key:k', expiresAtMs: nowMs })).toBe(AUTH_MESSAGES.apiKeyExpired);
    });

    it('when a managed key was revoked, then it is refused as revoked; a key from API_KEYS always passes', async () => {
      const live = new Set(['kept']);
      const managedKeys = { verify: async () => undefined, exists: async (id: string) => live.has(id) };
      const auth = createPassportAuth({ apiKeyHeader: 'X-API-Key', userStore: db.store, tokens, apiKeys: API_KEYS, managedKeys });
      const key = (id: string): Principal => ({ username: `api-key:${id}`, isAdmin: false, kind: 'api-key', id: `key:${id}` });

      expect(await auth.recheck(key('kept'))).toBeUndefined();
      expect(await auth.recheck(key('gone'))).toBe(AUTH_MESSAGES.apiKeyRevoked);
      expect(await auth.recheck({ ...API_KEY_PRINCIPAL, id: 'key:static:0123abcd' })).toBeUndefined();
    });
  });

  describe('a remembered token', () => {
    it('when a verified token is used again, then it passes until its expiry, and is refused once the clock passes it', async () => {
      let nowMs = Date.now();
      const auth = createPassportAuth({ apiKeyHeader: 'X-API-Key', userStore: db.store, tokens, apiKeys: [], now: () => nowMs });
      const remembering = await startAuthProbe(auth);
      try {
        const token = await tokenFor('root');
        const { exp } = tokens.verify(token);

        expect(await remembering.bearer(bearer(token))).toMatchObject({ ok: true });
        expect(await remembering.bearer(bearer(token))).toMatchObject({ ok: true });
        nowMs = exp * 1000;
        expect(await remembering.bearer(bearer(token))).toMatchObject({ ok: false, code: 'INVALID_CREDENTIALS', message: AUTH_MESSAGES.expired });
      } finally {
        await remembering.close();
      }
    });

    it('when the user of a remembered token changes password, then the token is refused as revoked', async () => {
      await db.store.create({ username: 'mover', passwordHash: '$2b$04$movermovermovermovermoOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy', isAdmin: true });
      const token = await tokenFor('mover');

      expect(await probe.bearer(bearer(token))).toMatchObject({ ok: true });
      await db.store.updatePasswordHash('mover', '$2b$04$changedchangedchangedcOe3fhd0Ip6l0H1Qk2X3J1m0N6w5bQ6uy');
      expect(await probe.bearer(bearer(token))).toMatchObject({ ok: false, code: 'INVALID_CREDENTIALS', message: AUTH_MESSAGES.revoked });
    });

    it('when a remembered token is altered by one character, then the altered one is verified afresh and refused', async () => {
      const token = await tokenFor('root');
      const last = token.at(-1) === 'A' ? 'B' : 'A';

      expect(await probe.bearer(bearer(token))).toMatchObject({ ok: true });
      expect(await probe.bearer(bearer(`${token.slice(0, -1)}${last}`))).toMatchObject({ ok: false, message: AUTH_MESSAGES.invalid });
    });
  });

  it('when a check needs no I/O (a configured key, a remembered token whose user is at hand), then it ends before the call returns', async () => {
    const root = (await db.store.findByUsername('root'))!;
    const auth = createPassportAuth({ apiKeyHeader: 'X-API-Key', userStore: db.store, tokens, apiKeys: API_KEYS, findUser: (username) => (username === 'root' ? root : undefined) });
    const token = tokens.sign(root).token;
    const request = (headers: Record<string, string>) => ({ headers }) as never;
    const ended: string[] = [];

    auth.authenticateApiKey(request({ 'x-api-key': 'key-two-abcdefghij' }), (err, principal) => ended.push(`key ${String(err)} ${principal?.username}`));
    auth.authenticateBearer(request({ authorization: `Bearer ${token}` }), (err, principal) => ended.push(`first ${String(err)} ${principal?.username}`));
    auth.authenticateBearer(request({ authorization: `Bearer ${token}` }), (err, principal) => ended.push(`again ${String(err)} ${principal?.username}`));

    expect(ended).toEqual(['key null api-key', 'first null root', 'again null root']);
  });
});
