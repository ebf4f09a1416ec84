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
}

/** What a cache read answered with: the cached entry, a fresh fetch, or an expired copy standing in for a failed upstream. */
export type CacheResult = 'hit' | 'miss' | 'stale';

/**
 * How a call to the upstream provider ended: answered, failed, abandoned by the circuit breaker's
 * timeout, or refused by the open breaker without being sent.
 */
export type UpstreamOutcome = 'success' | 'failure' | 'timeout' | 'rejected';

/** The route of a request that matched no operation of the contract: one fixed label, never the raw URL. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * Operational measurements. Every method is cheap, synchronous and never throws, so callers on the
 * hot path record without awaiting or guarding. Label values must come from a small fixed set
 * (route templates, policy names): never a raw URL, a username or a key.
 */
export interface Metrics {
  /** One HTTP response: `route` is the contract's path template, or `UNMATCHED_ROUTE`, `seconds` from arrival to the last byte handed to the socket. */
  httpRequest(method: string, route: string, status: number, seconds: number): void;
  /** One read of a cached representation; `kind` names what was read (`indices`, ...). */
  cacheRequest(kind: string, result: CacheResult): void;
  /** One call to the upstream provider and how long it took, in seconds. */
  upstreamRequest(outcome: UpstreamOutcome, seconds: number): void;
  /** One request refused by the rate limit named `policy` (`login`, ...). */
  rateLimitRejected(policy: string): void;
  /** A stream client connected (`+1`) or went away (`-1`). */
  streamClients(delta: number): void;
  /** One event written to a stream client. */
  streamEvent(): void;
}

/** Metrics that record nothing: the default of every service, and what runs when metrics are off. */
export const NO_METRICS: Metrics = Object.freeze({
  httpRequest() {},
  cacheRequest() {},
  upstreamRequest() {},
  rateLimitRejected() {},
  streamClients() {},
  streamEvent() {},
});
