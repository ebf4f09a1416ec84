/**
 * AccountService over a real SQLite file, real bcrypt (cost 4), real tokens checked by the real
 * passport strategies over HTTP, the login throttle (memory counters) and the audit log (a real pino logger).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  BusinessRuleError,
  ConfigError,
  InvalidCredentialsError,
  InvalidRequestError,
  LastAdminError,
  TooManyRequestsError,
  UserNotFoundError,
  UsernameTakenError,
} from '../../src/domain/errors.js';
import { PinoAuditLog } from '../../src/infra/audit/pino-audit-log.js';
import { LoginThrottle } from '../../src/infra/auth/login-throttle.js';
import { AUTH_MESSAGES } from '../../src/domain/credentials.js';
import { createPassportAuth } from '../../src/infra/auth/passport-auth.js';
import { PasswordHasher } from '../../src/infra/auth/passwords.js';
import { TokenService } from '../../src/infra/auth/tokens.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { createLogger } from '../../src/infra/logger.js';
import type { Principal } from '../../src/domain/ports/accounts.js';
import { AccountService, LOGIN_FAILED_MESSAGE, unknownUserTarget } from '../../src/services/accounts.js';
import { startAuthProbe, type AuthProbe } from '../helpers/auth-probe.js';
import { captureLogs, type LogLine } from '../helpers/log-capture.js';

const BCRYPT_ROUNDS = 4;
const MAX_FAILURES = 3;
const BLOCK_MS = 300_000;
const DEFAULT_ADMIN = { username: 'admin', password: 'admin123456' };
const TOKEN_TTL_MS = 7 * 24 * 3_600_000;

async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

describe('AccountService', () => {
  let dir: string;
  let db: OpenedUserStore;
  let tokens: TokenService;
  let accounts: AccountService;
  let probe: AuthProbe;
  let auditLines: LogLine[];
  let audit: PinoAuditLog;

  const bearer = (token: string) => probe.bearer({ Authorization: `Bearer ${token}` });
  const userPrincipal = (username: string, isAdmin = false): Principal => ({ username, isAdmin, kind: 'user', id: `user:${username}` });

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-accounts-'));
    db = await openUserStore(`sqlite:${join(dir, 'mds.sqlite')}`, { runMigrations: true });
    tokens = new TokenService({ secret: 'accounts-test-secret-0123456789', ttlMs: TOKEN_TTL_MS });
    const captured = captureLogs('info');
    auditLines = captured.lines;
    audit = new PinoAuditLog(captured.logger);
    accounts = new AccountService({
      userStore: db.store,
      tokens,
      throttle: new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS }),
      passwords: new PasswordHasher({ rounds: BCRYPT_ROUNDS }),
      audit,
      defaultAdmin: DEFAULT_ADMIN,
      logger: createLogger({ level: 'silent' }),
    });
    probe = await startAuthProbe(createPassportAuth({ apiKeyHeader: 'X-API-Key', userStore: db.store, tokens, apiKeys: [] }));
    await accounts.createUser({ username: 'alice', password: 'alice-password', is_admin: false });
    await accounts.createUser({ username: 'bob', password: 'bob-password', is_admin: true });
  });

  afterEach(async () => {
    await probe.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('login', () => {
    it('when the password is right, then returns a bearer token that passport accepts', async () => {
      const result = await accounts.login('alice', 'alice-password', '10.0.0.1');

      expect(result).toEqual({
        ok: true,
        access_token: expect.any(String),
        token_type: 'bearer',
        username: 'alice',
        is_admin: false,
        expires_in: TOKEN_TTL_MS / 1000,
        must_change_password: false,
      });
      expect(await bearer(result.access_token)).toEqual({ ok: true, principal: { ...userPrincipal('alice'), expiresAtMs: expect.any(Number), passwordVersion: expect.any(String) } });
    });

    it('when the password is wrong or the user unknown, then both fail with the same InvalidCredentialsError', async () => {
      const wrong = await rejectionOf(accounts.login('alice', 'not-her-password', '10.0.0.1'));
      const unknown = await rejectionOf(accounts.login('mallory', 'alice-password', '10.0.0.2'));

      for (const err of [wrong, unknown]) {
        expect(err).toBeInstanceOf(InvalidCredentialsError);
        expect(err).toMatchObject({ code: 'INVALID_CREDENTIALS', message: LOGIN_FAILED_MESSAGE });
      }
      expect(unknown.message).toBe(wrong.message);
    });

    it('when a tokenTtlMs is given, then the token and expires_in follow it', async () => {
      const shortLived = new AccountService({
        userStore: db.store,
        tokens,
        throttle: new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS }),
        passwords: new PasswordHasher({ rounds: BCRYPT_ROUNDS }),
        audit,
        defaultAdmin: DEFAULT_ADMIN,
        tokenTtlMs: 120_000,
        logger: createLogger({ level: 'silent' }),
      });

      const result = await shortLived.login('alice', 'alice-password', '10.0.0.1');

      expect(result.expires_in).toBe(120);
      const claims = tokens.verify(result.access_token);
      expect(claims.exp - claims.iat).toBe(120);
    });
  });

  describe('throttling', () => {
    it(`when a username has failed ${MAX_FAILURES} times, then even the right password gets TooManyRequestsError with a retry delay`, async () => {
      for (let i = 0; i < MAX_FAILURES; i++) {
        await expect(accounts.login('alice', `guess-${i}`, '10.0.0.66')).rejects.toBeInstanceOf(InvalidCredentialsError);
      }

      const blocked = await rejectionOf(accounts.login('alice', 'alice-password', '10.0.0.66'));

      expect(blocked).toBeInstanceOf(TooManyRequestsError);
      expect(blocked).toMatchObject({ code: 'TOO_MANY_REQUESTS' });
      const retryAfter = (blocked as TooManyRequestsError).retryAfterSeconds;
      expect(retryAfter).toBeGreaterThan(BLOCK_MS / 1000 - 30);
      expect(retryAfter).toBeLessThanOrEqual(BLOCK_MS / 1000);
      // The block is on the name from that address: the owner, elsewhere, still logs in (after a delay).
      await expect(accounts.login('alice', 'alice-password', '10.0.0.1')).resolves.toMatchObject({ ok: true, username: 'alice' });
    });

    it('when one username is blocked, then another user from another address still logs in', async () => {
      for (let i = 0; i < MAX_FAILURES; i++) {
        await accounts.login('alice', `guess-${i}`, '10.0.0.66').catch(() => undefined);
      }
      await expect(accounts.login('alice', 'alice-password', '10.0.0.66')).rejects.toBeInstanceOf(TooManyRequestsError);

      const result = await accounts.login('bob', 'bob-password', '10.0.0.7');

      expect(result).toMatchObject({ ok: true, username: 'bob', is_admin: true });
    });

    it('when failures hit unknown usernames, then they count too and block that name from that address', async () => {
      for (let i = 0; i < MAX_FAILURES; i++) {
        await accounts.login('ghost', `guess-${i}`, '10.0.1.1').catch(() => undefined);
      }

      await expect(accounts.login('ghost', 'anything', '10.0.1.1')).rejects.toBeInstanceOf(TooManyRequestsError);
    });

    it('when one address sprays many usernames, then the address is blocked for everyone', async () => {
      const perIpLimit = MAX_FAILURES * 4;
      for (let i = 0; i < perIpLimit; i++) {
        await accounts.login(`user${i}`, 'wrong-password', '10.0.0.99').catch(() => undefined);
      }

      await expect(accounts.login('alice', 'alice-password', '10.0.0.99')).rejects.toBeInstanceOf(TooManyRequestsError);
      expect((await accounts.login('alice', 'alice-password', '10.0.0.100')).ok).toBe(true);
    });

    it('when the spraying addresses are IPv6 ones of one /64, then they count as one address', async () => {
      const perIpLimit = MAX_FAILURES * 4;
      for (let i = 0; i < perIpLimit; i++) {
        await accounts.login(`user${i}`, 'wrong-password', `2001:db8:7:7::${(i + 1).toString(16)}`).catch(() => undefined);
      }

      await expect(accounts.login('alice', 'alice-password', '2001:db8:7:7:ffff::1')).rejects.toBeInstanceOf(TooManyRequestsError);
      expect((await accounts.login('alice', 'alice-password', '2001:db8:7:8::1')).ok).toBe(true);
    });

    it('when a login succeeds, then the username failure count starts again', async () => {
      for (let i = 0; i < MAX_FAILURES - 1; i++) {
        await accounts.login('alice', `guess-${i}`, '10.0.0.5').catch(() => undefined);
      }
      await accounts.login('alice', 'alice-password', '10.0.0.5');
      for (let i = 0; i < MAX_FAILURES - 1; i++) {
        await accounts.login('alice', `guess-${i}`, '10.0.0.5').catch(() => undefined);
      }

      expect((await accounts.login('alice', 'alice-password', '10.0.0.5')).ok).toBe(true);
    });
  });

  describe('changePassword', () => {
    it('when the old password is right, then the old token is revoked, the old password fails and the new token works', async () => {
      const before = await accounts.login('alice', 'alice-password', '10.0.0.1');

      const after = await accounts.changePassword(userPrincipal('alice'), 'alice-password', 'alice-new-password');

      expect(after).toStrictEqual({ access_token: expect.any(String), token_type: 'bearer', username: 'alice', is_admin: false, expires_in: expect.any(Number), must_change_password: false });
      expect(await bearer(before.access_token)).toMatchObject({ ok: false, code: 'INVALID_CREDENTIALS', message: AUTH_MESSAGES.revoked });
      expect(await bearer(after.access_token)).toEqual({ ok: true, principal: { ...userPrincipal('alice'), expiresAtMs: expect.any(Number), passwordVersion: expect.any(String) } });
      await expect(accounts.login('alice', 'alice-password', '10.0.0.1')).rejects.toThrow(LOGIN_FAILED_MESSAGE);
      const again = await accounts.login('alice', 'alice-new-password', '10.0.0.1');
      expect(await bearer(again.access_token)).toMatchObject({ ok: true });
    });

    it('when the old password is wrong, then BusinessRuleError and nothing changes', async () => {
      const err = await rejectionOf(accounts.changePassword(userPrincipal('alice'), 'wrong-old', 'alice-new-password'));

      expect(err).toBeInstanceOf(BusinessRuleError);
      expect(err.message).toBe('Old password is incorrect');
      expect((await accounts.login('alice', 'alice-password', '10.0.0.1')).ok).toBe(true);
    });

    it('when the new password equals the old one, then BusinessRuleError', async () => {
      const err = await rejectionOf(accounts.changePassword(userPrincipal('alice'), 'alice-password', 'alice-password'));

      expect(err).toBeInstanceOf(BusinessRuleError);
      expect(err.message).toBe('New password must differ from the old one');
    });

    it('when the new password is over 72 bytes, then InvalidRequestError on new_password', async () => {
      const err = await rejectionOf(accounts.changePassword(userPrincipal('alice'), 'alice-password', 'é'.repeat(37)));

      expect(err).toBeInstanceOf(InvalidRequestError);
      expect((err as InvalidRequestError).violations[0]?.path).toBe('body.new_password');
    });

    it('when the caller is an API key, then BusinessRuleError (it has no password)', async () => {
      const err = await rejectionOf(accounts.changePassword({ username: 'api-key', isAdmin: true, kind: 'api-key' }, 'x', 'new-password-1'));

      expect(err).toBeInstanceOf(BusinessRuleError);
      expect(err.message).toMatch(/API key/);
    });
  });

  describe('default administrator', () => {
    it('ensureDefaultAdmin: when run twice, then creates it once, then reports it exists', async () => {
      expect(await accounts.defaultAdminExists()).toBe(false);

      expect(await accounts.ensureDefaultAdmin()).toBe('created');
      expect(await accounts.ensureDefaultAdmin()).toBe('exists');

      expect(await accounts.defaultAdminExists()).toBe(true);
      const admins = (await accounts.listUsers()).filter((u) => u.username === DEFAULT_ADMIN.username);
      expect(admins).toEqual([{ username: 'admin', is_admin: true, created_at: expect.any(String) }]);
    });

    it('ensureDefaultAdmin: when two processes race, then one creates it and the other sees it exists', async () => {
      const results = await Promise.all([accounts.ensureDefaultAdmin(), accounts.ensureDefaultAdmin()]);

      expect(results.sort()).toEqual(['created', 'exists']);
    });

    it('must_change_password: when the default admin logs in with DEFAULT_ADMIN_PASSWORD, then true; after a change, then false', async () => {
      await accounts.ensureDefaultAdmin();

      const first = await accounts.login('admin', DEFAULT_ADMIN.password, '10.0.0.1');
      expect(first).toMatchObject({ username: 'admin', is_admin: true, must_change_password: true });

      const changed = await accounts.changePassword(userPrincipal('admin', true), DEFAULT_ADMIN.password, 'a-much-better-password');
      expect(changed.must_change_password).toBe(false);
      expect((await accounts.login('admin', 'a-much-better-password', '10.0.0.1')).must_change_password).toBe(false);
    });

    it('ensureDefaultAdmin: when DEFAULT_ADMIN_PASSWORD is too short, then ConfigError naming it', async () => {
      const misconfigured = new AccountService({
        userStore: db.store,
        tokens,
        throttle: new LoginThrottle({ maxFailures: MAX_FAILURES, blockMs: BLOCK_MS }),
        passwords: new PasswordHasher({ rounds: BCRYPT_ROUNDS }),
        audit,
        defaultAdmin: { username: 'admin', password: 'short' },
        logger: createLogger({ level: 'silent' }),
      });

      const err = await rejectionOf(misconfigured.ensureDefaultAdmin());

      expect(err).toBeInstanceOf(ConfigError);
      expect(err.message).toContain('DEFAULT_ADMIN_PASSWORD');
      expect(await accounts.defaultAdminExists()).toBe(false);
    });
  });

  describe('user administration', () => {
    it('listUsers: when users exist, then returns the API shape ordered by username, never a hash', async () => {
      const users = await accounts.listUsers();

      expect(users.map((u) => u.username)).toEqual(['alice', 'bob']);
      for (const user of users) {
        expect(Object.keys(user).sort()).toEqual(['created_at', 'is_admin', 'username']);
        expect(new Date(user.created_at).toISOString()).toBe(user.created_at);
      }
      expect(JSON.stringify(users)).not.toContain('$2');
    });

    it('createUser: when the name is taken, then UsernameTakenError; when the name or password is bad, then InvalidRequestError', async () => {
      await expect(accounts.createUser({ username: 'alice', password: 'whatever-pw', is_admin: false })).rejects.toBeInstanceOf(UsernameTakenError);
      await expect(accounts.createUser({ username: 'bad name', password: 'whatever-pw', is_admin: false })).rejects.toBeInstanceOf(InvalidRequestError);
      await expect(accounts.createUser({ username: 'carol', password: 'short', is_admin: false })).rejects.toBeInstanceOf(InvalidRequestError);
      await expect(accounts.createUser({ username: 'carol', password: 'é'.repeat(37), is_admin: false })).rejects.toBeInstanceOf(InvalidRequestError);
    });

    it('deleteUser: when deleting users, then the last administrator is refused and unknown users are not found', async () => {
      await accounts.deleteUser('alice');

      await expect(accounts.deleteUser('bob')).rejects.toBeInstanceOf(LastAdminError);
      await expect(accounts.deleteUser('alice')).rejects.toBeInstanceOf(UserNotFoundError);
      expect((await accounts.listUsers()).map((u) => u.username)).toEqual(['bob']);
    });

    it('setPassword: when an operator sets a password, then the new one logs in and older tokens are revoked', async () => {
      const before = await accounts.login('alice', 'alice-password', '10.0.0.1');

      const user = await accounts.setPassword('alice', 'operator-chosen-pw');

      expect(user).toEqual({ username: 'alice', is_admin: false, created_at: expect.any(String) });
      expect(await bearer(before.access_token)).toMatchObject({ ok: false, message: AUTH_MESSAGES.revoked });
      expect((await accounts.login('alice', 'operator-chosen-pw', '10.0.0.1')).ok).toBe(true);
      await expect(accounts.setPassword('ghost', 'operator-chosen-pw')).rejects.toBeInstanceOf(UserNotFoundError);
      await expect(accounts.setPassword('alice', 'short')).rejects.toBeInstanceOf(InvalidRequestError);
    });
  });

  describe('audit log', () => {
    const audited = () => auditLines.filter((l) => l.audit === true).map(({ actor, action, target, ip, reqId }) => ({ actor, action, target, ip, reqId }));

    it('when logins fail and succeed, a password changes and users are created, deleted and reset, then each is one audit line without a secret', async () => {
      auditLines.length = 0;

      await accounts.login('alice', 'not-her-password', '10.0.0.5', 'req-1').catch(() => undefined);
      await accounts.login('mallory', 'alice-password', '10.0.0.6', 'req-2').catch(() => undefined);
      const session = await accounts.login('alice', 'alice-password', '10.0.0.5', 'req-3');
      await accounts.changePassword(userPrincipal('alice'), 'alice-password', 'alice-second-pw', { ip: '10.0.0.5', requestId: 'req-4' });
      await accounts.createUser({ username: 'carol', password: 'carol-password', is_admin: false }, { actor: 'user:bob', ip: '10.0.0.7', requestId: 'req-5' });
      await accounts.setPassword('carol', 'carol-second-pw');
      await accounts.deleteUser('carol', { actor: 'key:static:0123abcd', ip: '10.0.0.8', requestId: 'req-6' });

      expect(audited()).toEqual([
        { actor: 'anonymous', action: 'login.failed', target: 'user:alice', ip: '10.0.0.5', reqId: 'req-1' },
        // What was typed as an unknown username is logged as a digest: it may be a password in the wrong field.
        { actor: 'anonymous', action: 'login.failed', target: unknownUserTarget('mallory'), ip: '10.0.0.6', reqId: 'req-2' },
        { actor: 'user:alice', action: 'login.succeeded', target: 'user:alice', ip: '10.0.0.5', reqId: 'req-3' },
        { actor: 'user:alice', action: 'password.changed', target: 'user:alice', ip: '10.0.0.5', reqId: 'req-4' },
        { actor: 'user:bob', action: 'user.created', target: 'user:carol', ip: '10.0.0.7', reqId: 'req-5' },
        { actor: 'cli', action: 'user.password_set', target: 'user:carol', ip: null, reqId: null },
        { actor: 'key:static:0123abcd', action: 'user.deleted', target: 'user:carol', ip: '10.0.0.8', reqId: 'req-6' },
      ]);
      expect(auditLines.filter((l) => l.action === 'login.failed').map((l) => l.reason)).toEqual(['wrong password', 'unknown user']);
      const text = JSON.stringify(auditLines);
      for (const secret of ['not-her-password', 'alice-password', 'alice-second-pw', 'carol-password', 'carol-second-pw', session.access_token]) {
        expect(text).not.toContain(secret);
      }
      expect(text).not.toMatch(/\$2[aby]\$/);
      expect(text).not.toContain('mallory');
      expect(unknownUserTarget('mallory')).toMatch(/^unknown-user:[0-9a-f]{12}$/);
    });

    it('when a login is throttled, then the refusal is audited as a failed login', async () => {
      for (let i = 0; i < MAX_FAILURES; i++) await accounts.login('alice', `guess-${i}`, '10.0.9.1').catch(() => undefined);
      auditLines.length = 0;

      await expect(accounts.login('alice', 'alice-password', '10.0.9.1')).rejects.toBeInstanceOf(TooManyRequestsError);

      expect(auditLines).toEqual([expect.objectContaining({ audit: true, actor: 'anonymous', action: 'login.failed', target: 'user:alice', reason: 'throttled' })]);
    });
  });
});
