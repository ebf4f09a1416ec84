/**
 * Access tokens: HS256 JWTs signed with SECRET_KEY. Besides `sub`, `iat` and `exp` they carry `adm`
 * (administrator at issue time) and `pwv`, a short keyed digest of the password hash they were issued
 * under, so changing the password revokes every older token without a revocation list.
 */
import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import QuickLRU from 'quick-lru';
import { AUTH_MESSAGES } from '../../domain/credentials.js';
import { InvalidCredentialsError } from '../../domain/errors.js';
import type { TokenIssuer } from '../../domain/ports/accounts.js';

/** The only signing algorithm issued or accepted. */
export const TOKEN_ALGORITHM = 'HS256';

const PWV_LENGTH = 16;
// Keeps the password-version digest apart from anything else that might ever be derived from SECRET_KEY.
const PWV_CONTEXT = 'mds:pwv:v1:';

/** The claims of a verified token. Times are seconds since the epoch, as JWT spells them. */
export interface TokenClaims {
  /** Username. */
  sub: string;
  /** Administrator when the token was issued. */
  adm: boolean;
  /** Password version: ties the token to the password hash it was issued under. */
  pwv: string;
  iat: number;
  exp: number;
}

/** A freshly signed token. */
export interface IssuedToken {
  token: string;
  /** Seconds from issue to expiry. */
  expiresInSeconds: number;
  expiresAt: Date;
  claims: TokenClaims;
}

/** Who a token is issued to. Only a digest of `passwordHash` goes into the token. */
export interface TokenSubject {
  username: string;
  isAdmin: boolean;
  passwordHash: string;
}

export interface TokenServiceOptions {
  /** SECRET_KEY; never empty. */
  secret: string;
  /** Token lifetime in milliseconds (whole seconds are used, at least one). */
  ttlMs: number;
  /** Clock in milliseconds since the epoch; tests move it. Default `Date.now`. */
  now?: () => number;
}

/** The claims of `payload` when it has the shape this service issues, else `undefined`. */
export function claimsOf(payload: unknown): TokenClaims | undefined {
  if (typeof payload !== 'object' || payload === null) return undefined;
  const p = payload as Record<string, unknown>;
  if (typeof p.sub !== 'string' || p.sub.length === 0) return undefined;
  if (typeof p.adm !== 'boolean' || typeof p.pwv !== 'string') return undefined;
  if (typeof p.iat !== 'number' || typeof p.exp !== 'number') return undefined;
  return { sub: p.sub, adm: p.adm, pwv: p.pwv, iat: p.iat, exp: p.exp };
}

/** Signs and verifies access tokens. */
export class TokenService implements TokenIssuer {
  readonly #secret: string;
  /**
   * The secret as a KeyObject, made once. Given a string, jsonwebtoken first tries to parse it as a
   * PEM public key (and fails) on every sign and verify: that was most of an authenticated request.
   */
  readonly #key: KeyObject;
  readonly #ttlSeconds: number;
  readonly #now: () => number;
  readonly #versions = new QuickLRU<string, string>({ maxSize: 1000 });

  constructor(options: TokenServiceOptions) {
    if (!options.secret) throw new RangeError('TokenService needs a non-empty signing secret');
    this.#secret = options.secret;
    this.#key = createSecretKey(Buffer.from(options.secret, 'utf8'));
    this.#ttlSeconds = TokenService.#seconds(options.ttlMs);
    this.#now = options.now ?? Date.now;
  }

  static #seconds(ms: number): number {
    return Math.max(1, Math.floor(ms / 1000));
  }

  /** Default lifetime of issued tokens, in seconds. */
  get ttlSeconds(): number {
    return this.#ttlSeconds;
  }

  /** Signs a token for `subject`, valid from now for `options.ttlMs` (default: the service's TTL). */
  sign(subject: TokenSubject, options: { ttlMs?: number } = {}): IssuedToken {
    const expiresInSeconds = options.ttlMs === undefined ? this.#ttlSeconds : TokenService.#seconds(options.ttlMs);
    const iat = Math.floor(this.#now() / 1000);
    const claims: TokenClaims = {
      sub: subject.username,
      adm: subject.isAdmin,
      pwv: this.passwordVersion(subject.passwordHash),
      iat,
      exp: iat + expiresInSeconds,
    };
    const token = jwt.sign(claims, this.#key, { algorithm: TOKEN_ALGORITHM });
    return { token, expiresInSeconds, expiresAt: new Date(claims.exp * 1000), claims };
  }

  /**
   * The claims of `token` when it is an unexpired HS256 token signed with this secret and shaped as
   * issued here. Throws `InvalidCredentialsError` ('Token has expired' or 'Invalid token') otherwise.
   * Does not check `pwv`: see `isCurrent`.
   */
  verify(token: string): TokenClaims {
    let payload: unknown;
    try {
      payload = jwt.verify(token, this.#key, {
        algorithms: [TOKEN_ALGORITHM],
        clockTimestamp: Math.floor(this.#now() / 1000),
      });
    } catch (err) {
      if (err instanceof jwt.TokenExpiredError) throw new InvalidCredentialsError(AUTH_MESSAGES.expired, { cause: err });
      throw new InvalidCredentialsError(AUTH_MESSAGES.invalid, { cause: err });
    }
    const claims = claimsOf(payload);
    if (!claims) throw new InvalidCredentialsError(AUTH_MESSAGES.invalid);
    return claims;
  }

  /**
   * The `pwv` claim for a password hash: a keyed digest that reveals nothing about the hash. Every
   * bearer request asks for its user's, so the latest few are remembered.
   */
  passwordVersion(passwordHash: string): string {
    let version = this.#versions.get(passwordHash);
    if (version === undefined) {
      version = createHmac('sha256', this.#secret).update(PWV_CONTEXT).update(passwordHash).digest('base64url').slice(0, PWV_LENGTH);
      this.#versions.set(passwordHash, version);
    }
    return version;
  }

  /** True when `claims` were issued under `passwordHash` (compared in constant time). */
  isCurrent(claims: Pick<TokenClaims, 'pwv'>, passwordHash: string): boolean {
    const expected = Buffer.from(this.passwordVersion(passwordHash));
    const given = Buffer.from(claims.pwv);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  /** What passport-jwt needs to check signatures exactly as `verify` does. */
  verificationOptions(): { secretOrKey: Buffer; algorithms: [typeof TOKEN_ALGORITHM] } {
    // passport-jwt hands secretOrKey to jsonwebtoken, which takes a KeyObject since v9; the
    // @types of passport-jwt still say string | Buffer.
    return { secretOrKey: this.#key as unknown as Buffer, algorithms: [TOKEN_ALGORITHM] };
  }
}
