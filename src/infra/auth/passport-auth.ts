/**
 * Bearer-token and API-key authentication through passport, on a Passport instance of our own (no
 * global singleton, no sessions). Each call resolves to the caller's `Principal` or rejects with the
 * error the envelope reports: `NotAuthenticatedError` without the header, `InvalidCredentialsError`
 * saying what was wrong otherwise.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';
import passport from 'passport';
import { HeaderAPIKeyStrategy } from 'passport-headerapikey';
import { ExtractJwt, Strategy as JwtStrategy, type VerifiedCallback } from 'passport-jwt';
import { InvalidCredentialsError, NotAuthenticatedError } from '../../errors.js';
import type { Principal, UserStore } from '../../ports.js';
import { claimsOf, TOKEN_MESSAGES, type TokenService } from './tokens.js';

/** The header carrying API keys. */
export const API_KEY_HEADER = 'X-API-Key';

/** What rejected credentials are told, one message per reason (token messages: `TOKEN_MESSAGES`). */
export const AUTH_MESSAGES = {
  ...TOKEN_MESSAGES,
  badAuthorizationHeader: 'Invalid Authorization header: expected "Bearer <token>"',
  invalidApiKey: 'Invalid API key',
} as const;

/** The service account an API key acts as. Every protected endpoint is an admin endpoint, so it is one. */
export const API_KEY_PRINCIPAL: Readonly<Principal> = Object.freeze({ username: 'api-key', isAdmin: true, kind: 'api-key' });

const JWT_STRATEGY = 'jwt';
const API_KEY_STRATEGY = 'api-key';

export interface PassportAuthOptions {
  userStore: UserStore;
  tokens: TokenService;
  /** API_KEYS; blank entries are ignored, none means every key is refused. */
  apiKeys: readonly string[];
}

/** Authenticates one request per call; the caller puts the principal on the request. */
export interface PassportAuth {
  /**
   * Checks `Authorization: Bearer <jwt>`: signature (HS256 only), expiry, that the user still exists and
   * that the token was issued under the current password. Rejects with `NotAuthenticatedError` when the
   * header is absent and `InvalidCredentialsError` when it is malformed, invalid, expired or revoked.
   */
  authenticateBearer(req: Request): Promise<Principal>;
  /**
   * Checks `X-API-Key` against API_KEYS in constant time. Rejects with `NotAuthenticatedError` when the
   * header is absent and `InvalidCredentialsError('Invalid API key')` when it matches none.
   */
  authenticateApiKey(req: Request): Promise<Principal>;
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * A matcher over the configured keys' digests: equal-length inputs for timingSafeEqual, whatever the key
 * lengths. Resolves a match to the key's quota identity, `key:static:<first 8 hex of its SHA-256>`
 * (the digest, never the key, so logs and Redis keys reveal nothing usable), else `undefined`.
 */
function apiKeyMatcher(apiKeys: readonly string[]): (candidate: string) => string | undefined {
  const digests = apiKeys.map((k) => k.trim()).filter((k) => k.length > 0).map(sha256);
  return (candidate) => {
    const given = sha256(candidate);
    let matched = false;
    // No early exit: every configured key is compared, so timing says nothing about which one matched.
    for (const digest of digests) matched = timingSafeEqual(given, digest) || matched;
    return matched ? `key:static:${given.toString('hex').slice(0, 8)}` : undefined;
  };
}

function bearerFailureMessage(info: unknown): string {
  if (info instanceof Error) {
    if (info.name === 'TokenExpiredError') return AUTH_MESSAGES.expired;
    // passport-jwt's word for "no Bearer token could be extracted" while the header is present.
    if (info.message === 'No auth token') return AUTH_MESSAGES.badAuthorizationHeader;
    return AUTH_MESSAGES.invalid;
  }
  if (typeof info === 'object' && info !== null && typeof (info as { message?: unknown }).message === 'string') {
    return (info as { message: string }).message;
  }
  return AUTH_MESSAGES.invalid;
}

/** Builds the strategies on a fresh Passport instance and returns the two authenticators. */
export function createPassportAuth(options: PassportAuthOptions): PassportAuth {
  const { userStore, tokens } = options;
  const authenticator = new passport.Passport();

  authenticator.use(
    JWT_STRATEGY,
    new JwtStrategy(
      { jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(), ...tokens.verificationOptions() },
      (payload: unknown, done: VerifiedCallback) => {
        const claims = claimsOf(payload);
        if (!claims) {
          done(null, false, { message: AUTH_MESSAGES.invalid });
          return;
        }
        userStore.findByUsername(claims.sub).then(
          (user) => {
            // A deleted user's tokens die with it; a changed password changes the hash they were tied to.
            if (!user || !tokens.isCurrent(claims, user.passwordHash)) {
              done(null, false, { message: AUTH_MESSAGES.revoked });
              return;
            }
            // Rights come from the database, not the token: a demoted administrator loses them at once.
            const principal: Principal = { username: user.username, isAdmin: user.isAdmin, kind: 'user', id: `user:${user.username}` };
            done(null, principal);
          },
          (err: unknown) => done(err, false),
        );
      },
    ),
  );

  const matches = apiKeyMatcher(options.apiKeys);
  authenticator.use(
    API_KEY_STRATEGY,
    new HeaderAPIKeyStrategy({ header: API_KEY_HEADER, prefix: '' }, false, (apiKey, done) => {
      const id = matches(apiKey);
      if (id) done(null, { ...API_KEY_PRINCIPAL, id });
      else done(null, undefined);
    }),
  );

  const run = (strategy: string, req: Request, describeFailure: (info: unknown) => string) =>
    new Promise<Principal>((resolve, reject) => {
      const callback = (err: unknown, user: Principal | false | undefined, info: unknown) => {
        if (err) reject(err);
        else if (user) resolve(user);
        else reject(new InvalidCredentialsError(describeFailure(info)));
      };
      // With a callback, these strategies never write to the response; express still hands one over.
      const res = req.res ?? ({} as Response);
      authenticator.authenticate(strategy, { session: false }, callback)(req, res, (err: unknown) => reject(err ?? new InvalidCredentialsError(describeFailure(undefined))));
    });

  return {
    authenticateBearer(req) {
      if (req.headers.authorization === undefined) return Promise.reject(new NotAuthenticatedError());
      return run(JWT_STRATEGY, req, bearerFailureMessage);
    },
    authenticateApiKey(req) {
      if (req.headers[API_KEY_HEADER.toLowerCase()] === undefined) return Promise.reject(new NotAuthenticatedError());
      // Empty or unknown, the answer is the same: nothing about the configured keys is revealed.
      return run(API_KEY_STRATEGY, req, () => AUTH_MESSAGES.invalidApiKey);
    },
  };
}
