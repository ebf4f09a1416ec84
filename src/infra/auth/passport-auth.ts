/**
 * Bearer-token and API-key authentication with passport strategies (passport-jwt, passport-headerapikey).
 * Each call ends in its callback, once, with the caller's `Principal` or the error the envelope reports:
 * `NotAuthenticatedError` without the header, `InvalidCredentialsError` saying what was wrong otherwise.
 *
 * The strategies run through passport's Strategy interface (`authenticate(req)` on an instance given
 * `success`, `fail`, `error`, `pass` and `redirect`), here in `attempt`, rather than through passport's
 * `authenticate` middleware: that one also assigns session helpers to every request and builds its
 * closures per call, for nothing without sessions, and it was the largest single cost of an admin call.
 * A check that needs no I/O (a configured API key, a remembered token whose user is in memory)
 * answers before `authenticate...` returns, without a promise.
 *
 * A token whose signature and expiry were verified is remembered (by its exact text, until it
 * expires, at most `VERIFIED_TOKENS` of them), so its next request skips the HMAC and the parsing. What
 * can change while a token is valid (its user deleted, the password changed, the role) is checked on
 * every request against the user, never remembered with the token.
 */
import { hash, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import QuickLRU from 'quick-lru';
import { HeaderAPIKeyStrategy } from 'passport-headerapikey';
import { Strategy as JwtStrategy } from 'passport-jwt';
import { AUTH_MESSAGES, readBearer } from '../../domain/credentials.js';
import { InvalidCredentialsError, NotAuthenticatedError } from '../../domain/errors.js';
import { apiKeyIdOf, identityOf, userIdentity } from '../../domain/identity.js';
import type { ApiKeyVerifier } from '../../domain/ports/api-keys.js';
import type { AuthCallback, CredentialRecheck, Principal, User, UserStore } from '../../domain/ports/accounts.js';
import { claimsOf, type TokenClaims, type TokenService } from './tokens.js';

/** The service account an API key acts as. Every protected endpoint is an admin endpoint, so it is one. */
export const API_KEY_PRINCIPAL: Readonly<Principal> = Object.freeze({ username: 'api-key', isAdmin: true, kind: 'api-key' });

/** How many verified tokens are remembered (quick-lru may hold up to twice this briefly). */
export const VERIFIED_TOKENS = 10_000;

export interface PassportAuthOptions {
  userStore: UserStore;
  tokens: TokenService;
  /**
   * The header that carries API keys, as the contract's API-key security scheme names it (`X-API-Key`);
   * undefined when the contract declares none, and then no request carries an API key.
   */
  apiKeyHeader: string | undefined;
  /** API_KEYS; blank entries are ignored, none means every key is refused. */
  apiKeys: readonly string[];
  /** Managed keys (`mds_...`), asked when a key is not one of API_KEYS. */
  managedKeys?: ApiKeyVerifier | undefined;
  /**
   * How the bearer check reads a token's user: the user, or a promise of it when it must be read;
   * default `userStore.findByUsername`. Production hands in a `RevocationCache`'s lookup, so a bearer
   * request costs no database read.
   */
  findUser?: (username: string) => User | undefined | Promise<User | undefined>;
  /** Clock in milliseconds, for the expiry of remembered tokens; default `Date.now`. */
  now?: () => number;
}

/**
 * Authenticates one request per call; the caller puts the principal on the request. Checks again,
 * while a connection lives, the credential that opened it (`recheck`): the same rules as a request.
 */
export interface PassportAuth extends CredentialRecheck {
  /**
   * Checks `Authorization: Bearer <jwt>`: signature (HS256 only), expiry, that the user still exists and
   * that the token was issued under the current password. Ends with `NotAuthenticatedError` when the
   * header is absent and `InvalidCredentialsError` when it is malformed, invalid, expired or revoked.
   */
  authenticateBearer(req: Request, done: AuthCallback): void;
  /**
   * Checks the API-key header against API_KEYS in constant time, then against the managed keys. Ends with
   * `NotAuthenticatedError` when the header is absent and `InvalidCredentialsError('Invalid API key')`
   * when it matches none.
   */
  authenticateApiKey(req: Request, done: AuthCallback): void;
}

/** How a strategy's attempt or verify callback ends: an error, a user, or `false` with why not. */
type StrategyDone = (err: unknown, user: Principal | false, info?: unknown) => void;

/** A passport strategy as its interface defines it, with the hooks one attempt is given. */
interface StrategyAttempt {
  authenticate(req: Request, options?: unknown): void;
  success(user: unknown, info?: unknown): void;
  fail(challenge?: unknown, status?: number): void;
  error(err: unknown): void;
  pass(): void;
  redirect(url: string, status?: number): void;
}

/**
 * Runs `strategy` on `req` once: `done(null, user)` on success, `done(null, false, challenge)` on a
 * failure, `done(err, false)` on an error. Only the first outcome counts.
 */
function attempt(strategy: Pick<StrategyAttempt, 'authenticate'>, req: Request, done: StrategyDone): void {
  let ended = false;
  const end: StrategyDone = (err, user, challenge) => {
    if (ended) return;
    ended = true;
    done(err, user, challenge);
  };
  const run = Object.create(strategy) as StrategyAttempt;
  run.success = (user) => end(null, user as Principal);
  run.fail = (challenge) => end(null, false, challenge);
  run.error = (err) => end(err, false);
  run.pass = () => end(null, false);
  // Neither strategy redirects; one that did would be a programming error, not a refusal.
  run.redirect = () => end(new Error('an authentication strategy asked for a redirect'), false);
  try {
    run.authenticate(req, { session: false });
  } catch (err) {
    end(err, false);
  }
}

function sha256(value: string): Buffer {
  // The one-shot form: half the time of createHash's object per call.
  return hash('sha256', value, 'buffer');
}

/**
 * A matcher over the configured keys' digests: equal-length inputs for timingSafeEqual, whatever the key
 * lengths. Resolves a match to the key's principal id, `key:static:<first 8 hex of its SHA-256>`.
 */
function apiKeyMatcher(apiKeys: readonly string[]): (candidate: string) => string | undefined {
  const digests = apiKeys.map((k) => k.trim()).filter((k) => k.length > 0).map(sha256);
  return (candidate) => {
    const given = sha256(candidate);
    let matched: Buffer | undefined;
    // No early exit: every configured key is compared, so timing says nothing about which one matched.
    for (const digest of digests) if (timingSafeEqual(given, digest)) matched ??= digest;
    return matched && `key:static:${matched.toString('hex').slice(0, 8)}`;
  };
}

/**
 * The token of a request's `Authorization` header, or null when the header is not exactly `Bearer <token>`.
 * passport-jwt's own extractor took the first word after the scheme and ignored whatever followed it.
 */
function bearerTokenOf(req: Request): string | null {
  const header = readBearer(req.headers.authorization);
  return header.kind === 'token' ? header.token : null;
}

function bearerFailureMessage(info: unknown): string {
  if (info instanceof Error) return info.name === 'TokenExpiredError' ? AUTH_MESSAGES.expired : AUTH_MESSAGES.invalid;
  if (typeof info === 'object' && info !== null && typeof (info as { message?: unknown }).message === 'string') {
    return (info as { message: string }).message;
  }
  return AUTH_MESSAGES.invalid;
}

/** Builds the two strategies and returns the two checks. */
export function createPassportAuth(options: PassportAuthOptions): PassportAuth {
  const { userStore, tokens } = options;
  const findUser = options.findUser ?? ((username: string) => userStore.findByUsername(username));
  const now = options.now ?? Date.now;
  const verified = new QuickLRU<string, TokenClaims>({ maxSize: VERIFIED_TOKENS });

  /** The principal of verified `claims` when their user still exists under the same password. */
  const admit = (claims: TokenClaims, done: StrategyDone) => {
    const decide = (user: User | undefined) => {
      // A deleted user's tokens die with it; a changed password changes the hash they were tied to.
      if (!user || !tokens.isCurrent(claims, user.passwordHash)) done(null, false, { message: AUTH_MESSAGES.revoked });
      // Rights come from the database, not the token: a demoted administrator loses them at once.
      else done(null, { username: user.username, isAdmin: user.isAdmin, kind: 'user', id: userIdentity(user.username), expiresAtMs: claims.exp * 1000, passwordVersion: claims.pwv });
    };
    let found: ReturnType<typeof findUser>;
    try {
      found = findUser(claims.sub);
    } catch (err) {
      done(err, false);
      return;
    }
    if (found instanceof Promise) found.then(decide, (err: unknown) => done(err, false));
    else decide(found);
  };

  const jwtStrategy = new JwtStrategy({ jwtFromRequest: bearerTokenOf, ...tokens.verificationOptions(), passReqToCallback: true }, (req: Request, payload: unknown, done: StrategyDone) => {
    const claims = claimsOf(payload);
    if (!claims) {
      done(null, false, { message: AUTH_MESSAGES.invalid });
      return;
    }
    const token = bearerTokenOf(req);
    if (token) verified.set(token, claims);
    admit(claims, done);
  });

  const matches = apiKeyMatcher(options.apiKeys);
  const apiKeyHeader = options.apiKeyHeader?.toLowerCase();
  const apiKeyStrategy = new HeaderAPIKeyStrategy({ header: apiKeyHeader ?? '', prefix: '' }, false, (apiKey, done) => {
    const staticId = matches(apiKey);
    if (staticId) done(null, { ...API_KEY_PRINCIPAL, id: staticId });
    else if (!options.managedKeys) done(null, undefined);
    else options.managedKeys.verify(apiKey).then((principal) => done(null, principal), (err: unknown) => done(err as Error));
  });

  /** Ends `done` with the strategy's outcome; a failure is an InvalidCredentialsError saying why. */
  const outcome = (done: AuthCallback, describeFailure: (info: unknown) => string): StrategyDone => (err, user, info) => {
    if (err) done(err);
    else if (user) done(null, user);
    else done(new InvalidCredentialsError(describeFailure(info)));
  };

  return {
    authenticateBearer(req, done) {
      const header = readBearer(req.headers.authorization);
      if (header.kind === 'absent') {
        done(new NotAuthenticatedError());
        return;
      }
      // Another scheme is refused here too: this check may be called without the contract's step.
      if (header.kind !== 'token') {
        done(new InvalidCredentialsError(AUTH_MESSAGES.badAuthorizationHeader));
        return;
      }
      const remembered = verified.get(header.token);
      if (remembered === undefined) {
        attempt(jwtStrategy, req, outcome(done, bearerFailureMessage));
      } else if (remembered.exp * 1000 <= now()) {
        verified.delete(header.token);
        done(new InvalidCredentialsError(AUTH_MESSAGES.expired));
      } else {
        admit(remembered, outcome(done, bearerFailureMessage));
      }
    },
    async recheck(principal) {
      if (principal.expiresAtMs !== undefined && principal.expiresAtMs <= now()) return principal.kind === 'user' ? AUTH_MESSAGES.expired : AUTH_MESSAGES.apiKeyExpired;
      if (principal.kind === 'user') {
        const user = await findUser(principal.username);
        if (!user || user.isAdmin !== principal.isAdmin) return AUTH_MESSAGES.revoked;
        if (principal.passwordVersion !== undefined && !tokens.isCurrent({ pwv: principal.passwordVersion }, user.passwordHash)) return AUTH_MESSAGES.revoked;
        return undefined;
      }
      // A key from API_KEYS lives as long as the configuration does.
      const id = apiKeyIdOf(identityOf(principal));
      if (id === undefined || !options.managedKeys) return undefined;
      return (await options.managedKeys.exists(id)) ? undefined : AUTH_MESSAGES.apiKeyRevoked;
    },
    authenticateApiKey(req, done) {
      if (apiKeyHeader === undefined || req.headers[apiKeyHeader] === undefined) {
        done(new NotAuthenticatedError());
        return;
      }
      // Empty or unknown, the answer is the same: nothing about the configured keys is revealed.
      attempt(apiKeyStrategy, req, outcome(done, () => AUTH_MESSAGES.invalidApiKey));
    },
  };
}
