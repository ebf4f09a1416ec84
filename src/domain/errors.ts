/**
 * The errors the service raises on purpose. Each carries a stable `code` and a `cause`, never an HTTP
 * status: `http/envelope.ts` maps every failure to its status and the error envelope.
 */
import type { Principal } from './ports/accounts.js';

/** Base class of every error the service raises on purpose. */
export class AppError extends Error {
  /** Stable machine-readable code, SCREAMING_SNAKE. */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A business rule was broken (wrong old password, same new password, ...). */
export class BusinessRuleError extends AppError {
  constructor(code: string, message: string) {
    super(code, message);
  }
}

/** Deleting would leave no administrator. */
export class LastAdminError extends BusinessRuleError {
  constructor(username: string) {
    super('LAST_ADMIN', `Cannot delete '${username}': it is the last administrator`);
  }
}

/** One or more request values break the contract. */
export class InvalidRequestError extends AppError {
  readonly violations: Violation[];

  constructor(violations: Violation[]) {
    super('INVALID_REQUEST', `Invalid request parameters: ${violations.map((v) => `${v.path} ${v.message}`).join('; ')}`);
    this.violations = violations;
  }
}

/**
 * No configured provider can serve the symbol (a market none of them covers, `^FTSE` with Polygon
 * alone): not an unknown symbol, and never remembered as one. A 422 naming what each provider covers.
 */
export class SymbolNotServedError extends InvalidRequestError {
  constructor(symbol: string, what: string, coverage: ReadonlyArray<{ provider: string; covers: string }>, path = 'path.symbol') {
    super([
      {
        path,
        message: `no configured provider serves ${what} of '${symbol}' (${coverage.map((c) => `${c.provider}: ${c.covers}`).join('; ')}): add a provider that serves it to MARKET_DATA_PROVIDERS`,
      },
    ]);
  }
}

/**
 * The window starts before every configured provider's reach for its interval: a 422 naming each
 * provider's reach and the variable that extends it (`POLYGON_PLAN or POLYGON_HISTORY_DAYS`).
 */
export class BeyondReachError extends InvalidRequestError {
  constructor(interval: string, reaches: ReadonlyArray<{ provider: string; days: number; plan: string | undefined; variables: string }>) {
    super([
      {
        path: 'query.start',
        message: `${interval} bars this old are beyond every configured provider's reach (${reaches
          .map((r) => `${r.provider} reaches ${r.days} days${r.plan === undefined ? '' : ` on its ${r.plan} plan`}: ${r.variables} extends it`)
          .join('; ')})`,
      },
    ]);
  }
}

/** A protected endpoint was called without credentials. */
export class NotAuthenticatedError extends AppError {
  /** `hint`: what the caller sent that this operation does not take, said after the standard words. */
  constructor(hint?: string) {
    super('NOT_AUTHENTICATED', hint === undefined ? 'Not authenticated: please log in first' : `Not authenticated: please log in first (${hint})`);
  }
}

/** Credentials were given but are not valid (bad, expired or revoked token, unknown API key, failed login). */
export class InvalidCredentialsError extends AppError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('INVALID_CREDENTIALS', message, options);
  }
}

/** The caller is authenticated but lacks the required role. */
export class ForbiddenError extends AppError {
  constructor(
    message = 'Administrator rights required',
    /** Who was refused, when known: the refusal still counts against their quota. */
    readonly principal?: Principal,
  ) {
    super('FORBIDDEN', message);
  }
}

export class UserNotFoundError extends AppError {
  constructor(username: string) {
    super('USER_NOT_FOUND', `User '${username}' not found`);
  }
}

export class UsernameTakenError extends AppError {
  constructor(username: string) {
    super('USERNAME_TAKEN', `Username '${username}' is already taken`);
  }
}

/** The provider does not know a symbol (or, for a batch, any of the symbols asked for). */
export class UnknownSymbolError extends AppError {
  constructor(symbols: readonly string[]) {
    super(
      'UNKNOWN_SYMBOL',
      symbols.length === 1 ? `Unknown symbol '${symbols[0]}'` : `None of the symbols is known: ${symbols.join(', ')}`,
    );
  }
}

/** No market has this code (the markets are those of /api/markets). */
export class UnknownMarketError extends AppError {
  constructor(market: string) {
    super('UNKNOWN_MARKET', `Unknown market '${market}'`);
  }
}

/** No managed API key has this id (never existed, or already revoked). */
export class ApiKeyNotFoundError extends AppError {
  constructor(id: string) {
    super('API_KEY_NOT_FOUND', `API key '${id}' not found`);
  }
}

/** No backfill job has this id. */
export class HistoryJobNotFoundError extends AppError {
  constructor(id: string) {
    super('HISTORY_JOB_NOT_FOUND', `Backfill job '${id}' not found`);
  }
}

/** A refusal or failure that tells the caller when to try again: whole seconds, at least 1 (`Retry-After`). */
export abstract class RetryLaterError extends AppError {
  readonly retryAfterSeconds: number;

  constructor(code: string, message: string, retryAfterSeconds: number, options?: { cause?: unknown }) {
    super(code, message, options);
    this.retryAfterSeconds = wholeSeconds(retryAfterSeconds);
  }
}

function wholeSeconds(seconds: number): number {
  return Math.max(1, Math.ceil(seconds));
}

/** Too many attempts; retry after `retryAfterSeconds`. */
export class TooManyRequestsError extends RetryLaterError {
  constructor(message: string, retryAfterSeconds: number) {
    super('TOO_MANY_REQUESTS', message, retryAfterSeconds);
  }
}

/** The caller used up its request quota (RATE_LIMIT_*); retry after `retryAfterSeconds`. */
export class RateLimitedError extends RetryLaterError {
  constructor(retryAfterSeconds: number) {
    super('RATE_LIMITED', `Rate limit exceeded: retry in ${wholeSeconds(retryAfterSeconds)} seconds`, retryAfterSeconds);
  }
}

/** The upstream market-data provider failed (error status, timeout, refused, unparsable). */
export class DataSourceError extends RetryLaterError {
  constructor(message: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super('DATA_SOURCE_UNAVAILABLE', message, options?.retryAfterSeconds ?? 5, options);
  }
}

/** One provider the router asked (or skipped) and why it gave no answer (`timeout`, `429`, `breaker open`, ...); never a key. */
export interface ProviderAttempt {
  provider: string;
  reason: string;
}

/**
 * No provider of the chain could answer: each was down, throttled, paused, out of budget or refused
 * our keys. `attempts` names each one and why, in chain order; `retryAfterSeconds` is the soonest
 * recovery among them.
 */
export class ProvidersUnavailableError extends DataSourceError {
  readonly attempts: readonly ProviderAttempt[];

  constructor(attempts: readonly ProviderAttempt[], retryAfterSeconds: number, options?: { cause?: unknown }) {
    super(`No market-data provider could answer (${describeAttempts(attempts)})`, { retryAfterSeconds, ...(options?.cause !== undefined ? { cause: options.cause } : {}) });
    this.attempts = attempts;
  }
}

/** `polygon: timeout, yahoo: 429`: the attempts as the 503 message names them. */
export function describeAttempts(attempts: readonly ProviderAttempt[]): string {
  return attempts.map((a) => `${a.provider}: ${a.reason}`).join(', ');
}

/** This instance is at capacity (or shutting down); another instance, or a later retry, can serve. */
export class ServiceBusyError extends RetryLaterError {
  constructor(message: string, retryAfterSeconds: number) {
    super('SERVICE_BUSY', message, retryAfterSeconds);
  }
}

/** What a caller is told while the database cannot be reached (503 with `Retry-After`). */
export const DATABASE_UNAVAILABLE_MESSAGE = 'The database is temporarily unavailable, please retry later';

/**
 * The database cannot be reached or used (PostgreSQL down or restarting, the SQLite file locked or
 * unreadable): nothing was done; the same call may succeed in `retryAfterSeconds`. Reads that can be
 * answered without the database (cached data, the upstream, recently verified credentials) are, and
 * never raise it.
 */
export class DatabaseUnavailableError extends RetryLaterError {
  constructor(message: string = DATABASE_UNAVAILABLE_MESSAGE, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super('DATABASE_UNAVAILABLE', message, options?.retryAfterSeconds ?? 5, options);
  }
}

/** The cache store cannot answer; callers fall back or carry on without it. */
export class CacheUnavailableError extends AppError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CACHE_UNAVAILABLE', message, options);
  }
}

/** Configuration is invalid; the message names every bad variable. */
export class ConfigError extends AppError {
  constructor(message: string) {
    super('CONFIG_INVALID', message);
  }
}

/** A contract problem at startup (an operation without a handler, ...). */
export class StartupError extends AppError {
  constructor(message: string) {
    super('STARTUP_FAILED', message);
  }
}

export interface Violation {
  path: string;
  message: string;
}
