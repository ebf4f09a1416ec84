/**
 * The ports: what the services need from the outside world. Adapters in `src/infra` implement them
 * and translate their technology's errors into the errors of `src/errors.ts` at their own boundary.
 */
import type { components } from './generated/api.js';

/** One market quote, exactly as the API spells it. */
export type Quote = components['schemas']['Quote'];

/** A cached value with the time it has left to live. */
export interface CacheEntry {
  /** The stored string, unchanged. */
  value: string;
  /** Milliseconds left before the entry expires (0 when it expires now). */
  ttlMs: number;
}

/**
 * A key-value store for strings with per-entry time to live.
 * Every method throws `CacheUnavailableError` when the store cannot answer; a miss is never an error.
 */
export interface CacheStore {
  /** The entry under `key` with its remaining TTL, or `undefined` on a miss or an expired entry. */
  get(key: string): Promise<CacheEntry | undefined>;
  /** Stores `value` under `key` for `ttlMs` milliseconds, replacing any previous entry. */
  set(key: string, value: string, ttlMs: number): Promise<void>;
  /** Removes `key`; resolves to true when something was removed. */
  delete(key: string): Promise<boolean>;
  /** Removes every key that starts with `prefix` (never anything else); resolves to how many were removed. */
  deleteByPrefix(prefix: string): Promise<number>;
  /**
   * Takes a lock named `key` for `ttlMs` milliseconds if nobody holds it.
   * Resolves to a token to pass to `releaseLock`, or `undefined` when the lock is held elsewhere.
   */
  acquireLock(key: string, ttlMs: number): Promise<string | undefined>;
  /** Releases a lock taken with `acquireLock`, only if `token` still owns it. */
  releaseLock(key: string, token: string): Promise<void>;
}

/**
 * Best-effort messages to every instance sharing the cache store (this one included). A message
 * may be lost while the store is away; subscribers must treat it as a hint, never as the only truth.
 */
export interface Broadcast {
  /** Delivers `message` to every subscriber of `channel`, here at once and elsewhere through the store. */
  publish(channel: string, message: string): Promise<void>;
  /** Calls `listener` for each message on `channel`; returns a function that stops it. */
  subscribe(channel: string, listener: (message: string) => void): () => void;
}

/** A stored user account. `passwordHash` never leaves the services layer. */
export interface User {
  username: string;
  isAdmin: boolean;
  /** bcrypt hash of the password. */
  passwordHash: string;
  createdAt: Date;
  updatedAt: Date;
}

/** Where user accounts live. Throws `UsernameTakenError` / `UserNotFoundError` as documented. */
export interface UserStore {
  /** The user named `username`, or `undefined` when there is none. */
  findByUsername(username: string): Promise<User | undefined>;
  /** Every user, ordered by username. */
  list(): Promise<User[]>;
  /** How many users exist; with `{ admins: true }` only administrators. */
  count(filter?: { admins?: boolean }): Promise<number>;
  /** Creates a user. Throws `UsernameTakenError` when the name exists. */
  create(input: { username: string; passwordHash: string; isAdmin: boolean }): Promise<User>;
  /** Replaces the password hash. Throws `UserNotFoundError` when there is no such user. */
  updatePasswordHash(username: string, passwordHash: string): Promise<User>;
  /**
   * Deletes a user. Throws `UserNotFoundError` when there is none, and `LastAdminError` when it is
   * the last administrator (checked in the same transaction as the delete).
   */
  delete(username: string): Promise<void>;
  /** True when the database answers a trivial query. */
  ping(): Promise<boolean>;
}

/** A source of market quotes. */
export interface MarketDataProvider {
  /** Short name reported as `source` (`simulated`, `yahoo`). */
  readonly name: string;
  /**
   * Current quotes of the configured indices. Symbols that fail are left out; when none can be had
   * it throws `DataSourceError`.
   */
  getIndices(): Promise<Quote[]>;
}

/** Who is calling: a user logged in with a token, or the service account of an API key. */
export interface Principal {
  username: string;
  isAdmin: boolean;
  kind: 'user' | 'api-key';
  /**
   * Stable identity for quotas: `user:<username>`, `key:<keyId>` for a managed key, or
   * `key:static:<first 8 hex of the key's SHA-256>` for a key from API_KEYS. Absent: `user:<username>`.
   */
  id?: string;
  /** A managed key's own requests per minute, in place of RATE_LIMIT_AUTHENTICATED_PER_MINUTE (0 = unlimited). */
  rateLimitPerMinute?: number;
}

/** Where one request stands against its caller's quota after it was counted. */
export interface QuotaUsage {
  /** False when this request is over the quota and must be refused. */
  allowed: boolean;
  /** Requests still allowed in the current window (0 once the quota is used up). */
  remaining: number;
  /** Milliseconds until the current window ends and the quota is whole again. */
  resetMs: number;
}

/**
 * Counts requests per caller in fixed windows, shared by every instance where the adapter can.
 * Never rejects for a failing store: it keeps counting somewhere (process memory at worst).
 */
export interface RequestCounter {
  /** The window length in milliseconds. */
  readonly windowMs: number;
  /** Counts `points` requests (default 1) of `key` against `limit` requests per window. */
  consume(key: string, limit: number, points?: number): Promise<QuotaUsage>;
}
