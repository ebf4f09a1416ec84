/**
 * What the bearer check needs to know about a token's user (does it still exist, is it an
 * administrator, which password hash is current), kept in memory for a few seconds so a bearer
 * request costs no database read. Every write to a user (password change, deletion, creation) drops
 * the entry here at once and, through the Broadcast port, on every other instance; the short lifetime
 * bounds how long a lost message (Redis away, a change made by the CLI in another process) can matter.
 *
 * The number of users (the admin status reports it on every call) is kept the same way: dropped by
 * every write, here and on every instance, and read again after at most `ttlMs`. Checks that decide a
 * write (the last administrator cannot be deleted) ask the store itself, never this memory.
 */
import QuickLRU from 'quick-lru';
import type { Broadcast, User, UserStore } from '../../domain/ports.js';
import { channels } from '../../domain/key-space.js';

/** The channel on which instances tell each other that a user changed; the message is the username. */
export const USER_CHANGED_CHANNEL = channels.userChanged;

export interface RevocationCacheOptions {
  /** Where users really live. */
  store: UserStore;
  /** How long a looked-up user is trusted, in milliseconds; 0 reads the store every time. */
  ttlMs: number;
  /** Most users kept (quick-lru may hold up to twice this briefly). Default 10,000. */
  maxEntries?: number;
  /** Tells the other instances; without it, invalidation is local and other instances wait out `ttlMs`. */
  broadcast?: Broadcast;
  /** Clock in milliseconds; tests move it. Default `Date.now`. */
  now?: () => number;
}

interface Entry {
  user: User | undefined;
  expiresAtMs: number;
}

/** A read-through, invalidated-on-write memory of users for the revocation check. */
export class RevocationCache {
  readonly #store: UserStore;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #broadcast: Broadcast | undefined;
  readonly #entries: QuickLRU<string, Entry>;
  readonly #inFlight = new Map<string, Promise<User | undefined>>();
  /** Bumped by every invalidation, so a read that started before one never stores what it read. */
  #generation = 0;
  /** The number of users, or the read of it in flight; `undefined` after any write. */
  #count: { value: Promise<number>; expiresAtMs: number; generation: number } | undefined;
  readonly #unsubscribe: (() => void) | undefined;

  constructor(options: RevocationCacheOptions) {
    this.#store = options.store;
    this.#ttlMs = options.ttlMs;
    this.#now = options.now ?? Date.now;
    this.#broadcast = options.broadcast;
    this.#entries = new QuickLRU({ maxSize: options.maxEntries ?? 10_000 });
    this.#unsubscribe = this.#broadcast?.subscribe(USER_CHANGED_CHANNEL, (username) => this.#forget(username));
  }

  /**
   * The user named `username` (or `undefined` when there is none): at once from memory when it was
   * read less than `ttlMs` ago and has not changed since, else a promise of the store's answer
   * (concurrent misses share one store read; it rejects as the store does).
   */
  lookup(username: string): User | undefined | Promise<User | undefined> {
    if (this.#ttlMs <= 0) return this.#store.findByUsername(username);
    const entry = this.#entries.get(username);
    if (entry && entry.expiresAtMs > this.#now()) return entry.user;
    const pending = this.#inFlight.get(username);
    if (pending) return pending;
    const generation = this.#generation;
    const read = this.#store.findByUsername(username).then(
      (user) => {
        if (this.#inFlight.get(username) === read) this.#inFlight.delete(username);
        if (generation === this.#generation) this.#entries.set(username, { user, expiresAtMs: this.#now() + this.#ttlMs });
        return user;
      },
      (err: unknown) => {
        if (this.#inFlight.get(username) === read) this.#inFlight.delete(username);
        throw err;
      },
    );
    this.#inFlight.set(username, read);
    return read;
  }

  /**
   * How many users exist: the store's answer of less than `ttlMs` ago with no write to any user since
   * (on this instance or, through the broadcast, on another); concurrent callers share one store read.
   */
  count(): Promise<number> {
    if (this.#ttlMs <= 0) return this.#store.count();
    const held = this.#count;
    if (held !== undefined && held.generation === this.#generation && (held.expiresAtMs === 0 || held.expiresAtMs > this.#now())) return held.value;
    const generation = this.#generation;
    // expiresAtMs 0: still reading; the lifetime starts when the answer arrives.
    const entry = { value: this.#store.count(), expiresAtMs: 0, generation };
    this.#count = entry;
    entry.value.then(
      () => {
        entry.expiresAtMs = this.#now() + this.#ttlMs;
      },
      () => {
        if (this.#count === entry) this.#count = undefined;
      },
    );
    return entry.value;
  }

  /** Drops `username` here at once and tells every other instance (best effort; never throws). */
  async invalidate(username: string): Promise<void> {
    this.#forget(username);
    await this.#broadcast?.publish(USER_CHANGED_CHANNEL, username).catch(() => undefined);
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
    this.#unsubscribe?.();
    this.#entries.clear();
  }

  #forget(username: string): void {
    this.#generation += 1;
    this.#count = undefined;
    this.#entries.delete(username);
    this.#inFlight.delete(username);
  }
}
