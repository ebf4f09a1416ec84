import jwt from 'jsonwebtoken';
import { describe, expect, it } from 'vitest';
import { InvalidCredentialsError } from '../../src/domain/errors.js';
import { AUTH_MESSAGES } from '../../src/domain/credentials.js';
import { TokenService } from '../../src/infra/auth/tokens.js';

const SECRET = 'unit-test-secret-0123456789abcdef';
const HOUR_MS = 3_600_000;
const ALICE = { username: 'alice', isAdmin: true, passwordHash: '$2b$04$abcdefghijklmnopqrstuuOxsTk4nZpd8Zjw0cq4D.dFAbb3C0f0e' };

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

function rejection(fn: () => unknown): InvalidCredentialsError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidCredentialsError);
    return err as InvalidCredentialsError;
  }
  throw new Error('expected the call to throw');
}

describe('TokenService', () => {
  const tokens = new TokenService({ secret: SECRET, ttlMs: HOUR_MS });

  it('sign then verify: when the token is fresh, then returns sub, adm, pwv and exp = iat + ttl', () => {
    const issued = tokens.sign(ALICE);

    const claims = tokens.verify(issued.token);

    expect(claims).toEqual(issued.claims);
    expect(claims).toMatchObject({ sub: 'alice', adm: true });
    expect(claims.exp - claims.iat).toBe(3600);
    expect(issued.expiresInSeconds).toBe(3600);
    expect(issued.expiresAt.getTime()).toBe(claims.exp * 1000);
    expect(JSON.parse(Buffer.from(issued.token.split('.')[0] ?? '', 'base64url').toString())).toMatchObject({ alg: 'HS256' });
  });

  it('sign: when a ttl is given for one token, then that token expires after it', () => {
    const claims = tokens.sign(ALICE, { ttlMs: 90_000 }).claims;

    expect(claims.exp - claims.iat).toBe(90);
  });

  it('pwv: when issued, then is 16 url-safe characters that contain no part of the hash', () => {
    const { pwv } = tokens.sign(ALICE).claims;

    expect(pwv).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(ALICE.passwordHash).not.toContain(pwv);
    const payload = Buffer.from(tokens.sign(ALICE).token.split('.')[1] ?? '', 'base64url').toString();
    expect(payload).not.toContain(ALICE.passwordHash.slice(7, 29));
  });

  it('verify: when alg is none (unsigned), then rejects as invalid', () => {
    const { claims } = tokens.sign(ALICE);
    const unsigned = `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims)}.`;

    expect(rejection(() => tokens.verify(unsigned)).message).toBe(AUTH_MESSAGES.invalid);
  });

  it('verify: when signed with the right secret but another HMAC algorithm, then rejects', () => {
    const { claims } = tokens.sign(ALICE);

    for (const algorithm of ['HS384', 'HS512'] as const) {
      const other = jwt.sign(claims, SECRET, { algorithm });
      expect(rejection(() => tokens.verify(other)).message).toBe(AUTH_MESSAGES.invalid);
    }
  });

  it('verify: when signed with another secret, then rejects', () => {
    const forged = new TokenService({ secret: 'some-other-secret', ttlMs: HOUR_MS }).sign(ALICE).token;

    expect(rejection(() => tokens.verify(forged)).message).toBe(AUTH_MESSAGES.invalid);
  });

  it('verify: when the token has expired, then rejects saying so', () => {
    const twoHoursAgo = new TokenService({ secret: SECRET, ttlMs: HOUR_MS, now: () => Date.now() - 2 * HOUR_MS });
    const stale = twoHoursAgo.sign(ALICE).token;

    expect(rejection(() => tokens.verify(stale)).message).toBe(AUTH_MESSAGES.expired);
  });

  it('verify: when the clock is one second before exp, then accepts; at exp, then rejects', () => {
    const issuedAtMs = 1_700_000_000_000;
    const token = new TokenService({ secret: SECRET, ttlMs: HOUR_MS, now: () => issuedAtMs }).sign(ALICE).token;

    expect(new TokenService({ secret: SECRET, ttlMs: HOUR_MS, now: () => issuedAtMs + HOUR_MS - 1000 }).verify(token).sub).toBe('alice');
    const atExpiry = new TokenService({ secret: SECRET, ttlMs: HOUR_MS, now: () => issuedAtMs + HOUR_MS });
    expect(rejection(() => atExpiry.verify(token)).message).toBe(AUTH_MESSAGES.expired);
  });

  it('verify: when the payload was tampered with (adm flipped), then rejects', () => {
    const plain = tokens.sign({ ...ALICE, isAdmin: false });
    const [header, , signature] = plain.token.split('.');
    const tampered = `${header}.${b64url({ ...plain.claims, adm: true })}.${signature}`;

    expect(rejection(() => tokens.verify(tampered)).message).toBe(AUTH_MESSAGES.invalid);
  });

  it('verify: when a correctly signed token lacks the pwv claim, then rejects as invalid', () => {
    const now = Math.floor(Date.now() / 1000);
    const foreign = jwt.sign({ sub: 'alice', adm: true, iat: now, exp: now + 60 }, SECRET, { algorithm: 'HS256' });

    expect(rejection(() => tokens.verify(foreign)).message).toBe(AUTH_MESSAGES.invalid);
  });

  it('verify: when the token is not a JWT at all, then rejects as invalid', () => {
    expect(rejection(() => tokens.verify('not-a-jwt')).message).toBe(AUTH_MESSAGES.invalid);
  });

  it('isCurrent: when the password hash is the one the token was issued under, then true; after a change, then false', () => {
    const { claims } = tokens.sign(ALICE);

    expect(tokens.isCurrent(claims, ALICE.passwordHash)).toBe(true);
    expect(tokens.isCurrent(claims, `${ALICE.passwordHash.slice(0, -1)}f`)).toBe(false);
    expect(tokens.isCurrent({ pwv: 'short' }, ALICE.passwordHash)).toBe(false);
  });

  it('passwordVersion: when the secret differs, then the same hash gives a different pwv', () => {
    const other = new TokenService({ secret: 'another-secret', ttlMs: HOUR_MS });

    expect(other.passwordVersion(ALICE.passwordHash)).not.toBe(tokens.passwordVersion(ALICE.passwordHash));
  });

  it('constructor: when the secret is empty, then refuses to build', () => {
    expect(() => new TokenService({ secret: '', ttlMs: HOUR_MS })).toThrow(RangeError);
  });
});
