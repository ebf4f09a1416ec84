/**
 * The one in-process memory of the service: values read from somewhere slower (the user store, the
 * API-key store, the cache store, a validation) kept for a short while, so the next caller does not
 * read again. Every cache of the process is a configuration of it: how many entries, how long one is
 * trusted, and which channel of the `Broadcast` port tells it that another instance changed the truth.
 *
 * What it guarantees, once for all of them:
 * - an entry is served only within `maxAgeMs` of being read and before its own expiry;
 * - a read that started before an invalidation never stores what it read (the version counter);
 * - concurrent misses of one key share one read (`load`), and a failed read is never kept;
 * - while the broadcast is not live (messages from other instances may be lost), an entry is served
 *   only within `unconfirmedMaxAgeMs` of being read, whatever `maxAgeMs` says: a change made on
 *   another instance (a revoked token, a flush) is seen by reading the truth again, not trusted away;
 *   an entry stored while it was not live keeps that short bound even once it is (the first
 *   connection after a start without Redis announces no resync);
 * - when the broadcast resyncs after a gap, everything is dropped, since any message may have been missed.
 *
 * No I/O: reads are handed in by the caller.
 */
import QuickLRU from 'quick-lru';
import { DatabaseUnavailableError } from '../domain/errors.js';
import type { Broadcast } from '../domain/ports/cache.js';

/**
 * How long an entry is served while the broadcast is not live, by default: long enough that a burst of
 * requests from one caller shares one read of the truth, short enough that a change made on another
 * instance is seen about as soon as a read that raced it would be.
 */
export const UNCONFIRMED_MAX_AGE_MS = 100;

/**
 * How many of the oldest entries each `set` looks at, dropping those that may no longer be served:
 * an expired value (a cached history body of a few hundred KB) goes soon after its age, not only
 * when the LRU bound pushes it out. Stops at the first entry still good; a few per write keep up.
 */
const SWEEP_PER_SET = 4;

/** One remembered value. The memory hands out the stored object itself (no copy per read). */
export interface MemoryEntry<V> {
  readonly value: V;
  /** When the value was read (or last confirmed) from its source, epoch ms. */
  readonly storedAt: number;
  /** When the value stops being true whatever its age, epoch ms (`Infinity` when only the age bounds it). */
  readonly expiresAt: number;
  /** Whether messages from other instances were arriving when it was stored (always, without invalidation). */
  readonly heard: boolean;
}

/** Where changes made by other instances are heard. */
export interface MemoryInvalidation<K, V> {
  broadcast: Broadcast;
  /** The channel whose messages announce a change. */
  channel: string;
  /** What a message drops; by default, everything. */
  onMessage?: (message: string, memory: LocalMemory<K, V>) => void;
  /** How long an entry is served while the broadcast is not live, ms. Default `UNCONFIRMED_MAX_AGE_MS`. */
  unconfirmedMaxAgeMs?: number;
}

export interface LocalMemoryOptions<K, V> {
  /** Most entries kept (least recently used go first; quick-lru may briefly hold up to twice this). */
  maxEntries: number;
  /** How long an entry is served after it was read, ms; 0 keeps nothing. */
  maxAgeMs: number;
  /** Cross-instance invalidation; without it, entries depend on nothing but their age. */
  invalidation?: MemoryInvalidation<K, V> | undefined;
  /** Clock in epoch ms; `Date.now` by default. */
  now?: () => number;
}

/** A bounded, expiring, versioned memory, optionally invalidated from other instances. */
export class LocalMemory<K, V> {
  readonly #entries: QuickLRU<K, MemoryEntry<V>>;
  readonly #maxAgeMs: number;
  readonly #unconfirmedMaxAgeMs: number;
  readonly #broadcast: Broadcast | undefined;
  readonly #now: () => number;
  readonly #inFlight = new Map<K, Promise<V>>();
  readonly #stop: Array<() => void> = [];
  #version = 0;

  constructor(options: LocalMemoryOptions<K, V>) {
    this.#entries = new QuickLRU({ maxSize: Math.max(1, options.maxEntries) });
    this.#maxAgeMs = Math.max(0, options.maxAgeMs);
    this.#now = options.now ?? Date.now;
    const invalidation = options.invalidation;
    this.#broadcast = invalidation?.broadcast;
    this.#unconfirmedMaxAgeMs = Math.min(this.#maxAgeMs, Math.max(0, invalidation?.unconfirmedMaxAgeMs ?? UNCONFIRMED_MAX_AGE_MS));
    if (invalidation !== undefined) {
      const onMessage = invalidation.onMessage;
      this.#stop.push(
        invalidation.broadcast.subscribe(invalidation.channel, onMessage === undefined ? () => this.clear() : (message) => onMessage(message, this)),
        invalidation.broadcast.onResync(() => this.clear()),
      );
    }
  }

  /** Bumped by every drop: a read that started at another version must not be stored. */
  get version(): number {
    return this.#version;
  }

  /** How long `entry` is served after it was read, ms: shorter while the broadcast is not live, or was not when it was stored. */
  maxAgeMs(entry: MemoryEntry<V>): number {
    return this.#broadcast === undefined || (entry.heard && this.#broadcast.live()) ? this.#maxAgeMs : this.#unconfirmedMaxAgeMs;
  }

  /**
   * The entry of `key` when it may be served at `now` (the caller's reading of the clock, so a hot
   * path reads it once), else `undefined`. Marks it recently used.
   */
  entry(key: K, now = this.#now()): MemoryEntry<V> | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined || this.#spent(entry, now)) return undefined;
    return entry;
  }

  /** Whether `entry` may no longer be served at `now`. */
  #spent(entry: MemoryEntry<V>, now: number): boolean {
    return now >= entry.expiresAt || now - entry.storedAt >= this.maxAgeMs(entry);
  }

  /** The value of `key` when it may be served now, else `undefined`. */
  get(key: K): V | undefined {
    return this.entry(key)?.value;
  }

  /** The entry of `key` whether or not it may be served (for a caller that renews or compares it). */
  peek(key: K): MemoryEntry<V> | undefined {
    return this.#entries.peek(key);
  }

  /**
   * Remembers `value`, read now, for `ttlMs` at most (and `maxAgeMs`). With `version`, only when no
   * drop happened since that version was taken; resolves to whether it was stored.
   */
  set(key: K, value: V, ttlMs = Infinity, version = this.#version): boolean {
    if (version !== this.#version || this.#maxAgeMs === 0) return false;
    const now = this.#now();
    this.#entries.set(key, { value, storedAt: now, expiresAt: now + ttlMs, heard: this.#broadcast === undefined || this.#broadcast.live() });
    let looked = 0;
    for (const [oldKey, old] of this.#entries.entriesAscending()) {
      if (looked++ === SWEEP_PER_SET || !this.#spent(old, now)) break;
      this.#entries.delete(oldKey);
    }
    return true;
  }

  /**
   * The value of `key`: at once when it may be served, else a promise of `read()` shared by every
   * concurrent caller of the key. The answer is remembered for `ttlOf(value)` ms (default: only
   * `maxAgeMs` bounds it) unless a drop came in between; a failure is passed on and never kept.
   */
  load(key: K, read: () => Promise<V>, ttlOf?: (value: V) => number): V | Promise<V> {
    const entry = this.entry(key);
    if (entry !== undefined) return entry.value;
    const pending = this.#inFlight.get(key);
    if (pending !== undefined) return pending;
    const version = this.#version;
    const loading = read().then(
      (value) => {
        if (this.#inFlight.get(key) === loading) this.#inFlight.delete(key);
        this.set(key, value, ttlOf === undefined ? Infinity : ttlOf(value), version);
        return value;
      },
      (err: unknown) => {
        if (this.#inFlight.get(key) === loading) this.#inFlight.delete(key);
        throw err;
      },
    );
    this.#inFlight.set(key, loading);
    return loading;
  }

  /** The first value that may be served now and matches, else `undefined` (a scan: for rare lookups by something other than the key). */
  find(matches: (value: V, key: K) => boolean): V | undefined {
    const now = this.#now();
    for (const [key, entry] of this.#entries) if (!this.#spent(entry, now) && matches(entry.value, key)) return entry.value;
    return undefined;
  }

  /** Drops `key` (and a read of it in flight: later callers read again). */
  delete(key: K): void {
    this.#version += 1;
    this.#entries.delete(key);
    this.#inFlight.delete(key);
  }

  /** Drops every entry whose value matches. */
  deleteWhere(matches: (value: V, key: K) => boolean): void {
    this.#version += 1;
    for (const [key, entry] of this.#entries) if (matches(entry.value, key)) this.#entries.delete(key);
    this.#inFlight.clear();
  }

  /** Drops everything, reads in flight included. */
  clear(): void {
    this.#version += 1;
    this.#entries.clear();
    this.#inFlight.clear();
  }

  /** Entries held, including expired ones not yet swept or pushed out. */
  get size(): number {
    return this.#entries.size;
  }

  /** Stops listening to other instances and drops everything. */
  close(): void {
    for (const stop of this.#stop.splice(0)) stop();
    this.clear();
  }
}

/**
 * The memory of last answers that outlives a database outage (DESIGN 27): `read()`'s answer, kept in
 * `memory` under `key` (an `undefined` answer drops the key); when `read` fails with
 * `DatabaseUnavailableError`, what `memory` may still serve of `key`, else that failure.
 */
export async function lastAnswer<K, V, R extends V | undefined>(memory: LocalMemory<K, V>, key: K, read: () => Promise<R>): Promise<R> {
  const version = memory.version;
  let answer: R;
  try {
    answer = await read();
  } catch (err) {
    const known = err instanceof DatabaseUnavailableError ? memory.get(key) : undefined;
    if (known === undefined) throw err;
    return known as R;
  }
  if (answer === undefined) memory.delete(key);
  else memory.set(key, answer, Infinity, version);
  return answer;
}
