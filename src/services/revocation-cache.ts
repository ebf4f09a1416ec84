/**
 * What the bearer check needs to know about a token's user (does it still exist, is it an
 * administrator, which password hash is current), kept in memory for a few seconds so a bearer
 * request costs no database read. Every write to a user (password change, deletion, creation) drops
 * the entry here at once and announces the fleet-wide "identity changed" event (`user:<name>`, see
 * domain/identity.ts) through the Broadcast port, so every other instance drops its entry and closes
 * that user's open streams; the CLI announces its writes the same way. The short lifetime bounds how
 * long a lost message (Redis away when the change was made) can matter. While the
 * broadcast is not live (Redis away: messages from other instances may be lost) a user is trusted for
 * `UNCONFIRMED_MAX_AGE_MS` at most, and everything is dropped when it is live again (the one
 * in-process memory, `LocalMemory`, does both).
 *
 * While the user store is unavailable (DESIGN 27), a user read from it within the outage grace
 * (`outageGraceMs`, AUTH_OUTAGE_GRACE_SECONDS) is still answered from a second memory that the same
 * announcements empty, so tokens keep working; a user not read meanwhile fails as the store does (503).
 *
 * The number of users (the admin status reports it on every call) is kept the same way: dropped by
 * every write, here and on every instance, and read again after at most `ttlMs`. Checks that decide a
 * write (the last administrator cannot be deleted) ask the store itself, never this memory.
 */
import { lastAnswer, LocalMemory } from './local-memory.js';
import type { Broadcast } from '../domain/ports/cache.js';
import type { User, UserStore } from '../domain/ports/accounts.js';
import { channels } from '../domain/key-space.js';
import { userIdentity, usernameOf } from '../domain/identity.js';

/** The channel of the "identity changed" event; a user's change travels as its identity, `user:<name>`. */
export const IDENTITY_CHANGED_CHANNEL = channels.identityChanged;

export interface RevocationCacheOptions {
  /** Where users really live. */
  store: UserStore;
  /** How long a looked-up user is trusted, in milliseconds; 0 reads the store every time. */
  ttlMs: number;
  /** Most users kept (quick-lru may hold up to twice this briefly). Default 10,000. */
  maxEntries?: number;
  /**
   * Tells the other instances; without it, invalidation is local and other instances wait out `ttlMs`.
   * While it is not live, a user is trusted for at most `UNCONFIRMED_MAX_AGE_MS` (a change made on an
   * instance we cannot hear is seen by reading the store again).
   */
  broadcast?: Broadcast;
  /**
   * While the store is unavailable, a user read from it less than this many ms ago is answered from
   * memory (changes announced meanwhile still drop it); 0 answers none. Default 600000.
   */
  outageGraceMs?: number | undefined;
  /** Clock in milliseconds; tests move it. Default `Date.now`. */
  now?: () => number;
}

/** A read-through, invalidated-on-write memory of users for the revocation check. */
export class RevocationCache {
  readonly #store: UserStore;
  readonly #ttlMs: number;
  readonly #broadcast: Broadcast | undefined;
  readonly #users: LocalMemory<string, User | undefined>;
  /** The number of users, under one key; dropped by any write to any user. */
  readonly #count: LocalMemory<'count', number>;
  /** What the store last answered for each user and for the count, for the outage grace only. */
  readonly #lastRead: LocalMemory<string, User>;
  readonly #lastCount: LocalMemory<'count', number>;

  constructor(options: RevocationCacheOptions) {
    this.#store = options.store;
    this.#ttlMs = options.ttlMs;
    this.#broadcast = options.broadcast;
    const now = options.now;
    // The event also carries API keys' identities: only users' concern this memory.
    const invalidation = (onUser: (username: string) => void) =>
      options.broadcast === undefined
        ? undefined
        : {
            broadcast: options.broadcast,
            channel: IDENTITY_CHANGED_CHANNEL,
            onMessage: (identity: string) => {
              const username = usernameOf(identity);
              if (username !== undefined) onUser(username);
            },
          };
    this.#users = new LocalMemory({
      maxEntries: options.maxEntries ?? 10_000,
      maxAgeMs: this.#ttlMs,
      invalidation: invalidation((username) => this.#users.delete(username)),
      ...(now ? { now } : {}),
    });
    this.#count = new LocalMemory({ maxEntries: 1, maxAgeMs: this.#ttlMs, invalidation: invalidation(() => this.#count.clear()), ...(now ? { now } : {}) });
    const graceMs = Math.max(0, options.outageGraceMs ?? 600_000);
    this.#lastRead = new LocalMemory({
      maxEntries: options.maxEntries ?? 10_000,
      maxAgeMs: graceMs,
      invalidation: invalidation((username) => this.#lastRead.delete(username)),
      ...(now ? { now } : {}),
    });
    // The count is only shown (admin status): a write elsewhere makes it a little old, never wrong for a decision.
    this.#lastCount = new LocalMemory({ maxEntries: 1, maxAgeMs: graceMs, ...(now ? { now } : {}) });
  }

  /**
   * The user named `username` (or `undefined` when there is none): at once from memory when it was
   * read less than `ttlMs` ago and has not changed since, else a promise of the store's answer
   * (concurrent misses share one store read; it rejects as the store does).
   */
  lookup(username: string): User | undefined | Promise<User | undefined> {
    if (this.#ttlMs <= 0) return this.#read(username);
    return this.#users.load(username, () => this.#read(username));
  }

  /** The store's answer for `username`, or what it answered within the outage grace when it is unavailable. */
  #read(username: string): Promise<User | undefined> {
    return lastAnswer(this.#lastRead, username, () => this.#store.findByUsername(username));
  }

  /** The store's count, or the last one it gave within the outage grace when it is unavailable. */
  #readCount(): Promise<number> {
    return lastAnswer(this.#lastCount, 'count', () => this.#store.count());
  }

  /**
   * How many users exist: the store's answer of less than `ttlMs` ago with no write to any user since
   * (on this instance or, through the broadcast, on another); concurrent callers share one store read.
   */
  count(): Promise<number> {
    if (this.#ttlMs <= 0) return this.#readCount();
    return Promise.resolve(this.#count.load('count', () => this.#readCount()));
  }

  /**
   * Drops `username` here at once and announces the change of its identity to every instance, this
   * one included (its open streams close): best effort, never throws.
   */
  async invalidate(username: string): Promise<void> {
    this.#forget(username);
    await this.#broadcast?.publish(IDENTITY_CHANGED_CHANNEL, userIdentity(username)).catch(() => undefined);
  }

  /**
   * `store` with every write followed by `invalidate` of the user written: give this to whatever
   * changes users, so no change can skip the cache.
   */
  watching(store: UserStore = this.#store): UserStore {
    const after = async <T>(username: string, write: Promise<T>): Promise<T> => {
      try {
        return await write;
      } finally {
        // Also after a failed write: it may have committed before failing to answer.
        await this.invalidate(username);
      }
    };
    return {
      findByUsername: (username) => store.findByUsername(username),
      list: () => store.list(),
      count: (filter) => store.count(filter),
      ping: () => store.ping(),
      create: (input) => after(input.username, store.create(input)),
      updatePasswordHash: (username, passwordHash) => after(username, store.updatePasswordHash(username, passwordHash)),
      delete: (username) => after(username, store.delete(username)),
    };
  }

  /** Stops listening to other instances. */
  close(): void {
    this.#users.close();
    this.#count.close();
    this.#lastRead.close();
    this.#lastCount.close();
  }

  #forget(username: string): void {
    this.#users.delete(username);
    this.#lastRead.delete(username);
    this.#count.clear();
  }
}
