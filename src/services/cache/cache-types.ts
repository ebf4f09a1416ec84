/**
 * The vocabulary of the representation cache: what a read names, what a loader produces, and what a
 * read answers. Types only (and the list of kinds): every file of the cache and its callers share them.
 */
import type { SentBody } from '../../domain/sent-json.js';
import type { BodyParts, Refusal } from './cache-entry.js';

/** The `X-Cache` value: from the cache, fetched upstream now, or an expired copy standing in for a failed upstream. */
export type CacheStatusHeader = 'HIT' | 'MISS' | 'STALE';

/** The kinds of cached data, each under its own key prefix. */
// `quote_in` is a quote converted to another currency (`currency=`): its own kind, so the stream, which
// follows `quote` fills by symbol, never mistakes one for a symbol's price.
export const CACHE_KINDS = ['indices', 'quote', 'quote_in', 'quotes', 'history', 'search', 'indicators'] as const;
export type CacheKind = (typeof CACHE_KINDS)[number];

/**
 * What a loader found: the serialized body to cache and send, and how long it lives.
 */
export type Found = FoundFields &
  (
    | {
        /** The exact string to store and send (a JSON body). */
        value: string;
        sent?: undefined;
      }
    | {
        value?: undefined;
        /** The value as its bytes and ETag, made by the loader (the compute pool does, off the event loop): stored and sent as they are. */
        sent: SentBody;
      }
  );

interface FoundFields {
  outcome: 'found';
  /** Lifetime in milliseconds (at least 1000). */
  ttlMs: number;
  /**
   * True when the value was assembled from expired copies standing in for a failed upstream (a
   * batch of stale quotes): it is answered as STALE and never stored.
   */
  stale?: boolean;
  /**
   * False when the value was assembled from entries already in the cache, without asking the
   * upstream (a batch of cached quotes): it is stored as any, and answered as a HIT.
   */
  fetched?: boolean;
  /** Where the body's data lies and what it says of it, for answers assembled from this one (a quote in a batch). */
  parts?: BodyParts | undefined;
}

/**
 * The upstream does not know what was asked (an unknown symbol). Never stored under the read's key:
 * the caller keeps negative answers in its own bounded memory and hands them back through
 * `CacheRead.remembered`, so junk asked for does not grow the store by one key each.
 */
export interface Unknown {
  outcome: 'unknown';
  /** False when the caller answered from its own memory of negative answers (counted as a hit). */
  fetched?: boolean;
}

/**
 * The upstream answered, but what it answered cannot be served (a history window with more candles
 * than one answer carries). Stored like a body, so the next read does not ask the upstream again.
 */
export interface Refused {
  outcome: 'refused';
  /** Why, as a type (a window of too many candles, with its count). */
  refusal: Refusal;
  ttlMs: number;
  fetched?: boolean;
}

/**
 * What a loader produced. A failed upstream is the fourth outcome: the loader rejects with
 * `DataSourceError`, and the engine answers with an expired copy (stale-if-error) or passes it on.
 */
export type Loaded = Found | Unknown | Refused;

/** One read: what it is, how to name it, and how to produce it on a miss. */
export interface CacheRead {
  kind: CacheKind;
  /** Canonical parameters (already normalised: upper-cased symbols, defaults filled in). */
  params: string;
  /** Fetches the value upstream. Throws `DataSourceError` when the upstream fails. */
  load: () => Promise<Loaded>;
  /**
   * An answer the caller already holds in its own memory (a remembered unknown symbol), asked after
   * this process's copy and before the store; `undefined` when it holds none. Must not do I/O.
   */
  remembered?: () => Unknown | undefined;
}

/** A ready-to-send value: the exact cached bytes and their validators. */
export interface CachedRepresentation {
  outcome: 'found';
  /** What kind of data it is (the read named it; never parsed back from the key). */
  kind: CacheKind;
  /** The full cache key, e.g. `mds:v2:quote:yahoo:AAPL`. */
  key: string;
  /**
   * The cached value as UTF-8, byte-identical for every answer from one cache fill (`textOf` gives it
   * as a string). A body made on a compute thread stays bytes: it is never decoded on the event loop
   * unless a caller asks for its text.
   */
  body: Buffer;
  /** Strong, quoted ETag of `body`. */
  etag: string;
  cacheStatus: CacheStatusHeader;
  /** Milliseconds the entry has left (0 for STALE). */
  ttlMs: number;
  /** Whole seconds the entry has left (0 for STALE): the `Cache-Control` max-age. */
  maxAgeSeconds: number;
  /** Where the body's data lies, when the loader said (see `Found.parts`). */
  parts?: BodyParts | undefined;
}

/** How a read ended when the upstream does not know the thing asked for. */
export interface UnknownAnswer {
  outcome: 'unknown';
  cacheStatus: CacheStatusHeader;
}

/** How a read ended when the upstream's answer cannot be served. */
export interface RefusedAnswer {
  outcome: 'refused';
  refusal: Refusal;
  cacheStatus: CacheStatusHeader;
}

/** What a read answers: a representation to send, or why there is none. A failed upstream rejects. */
export type ReadOutcome = CachedRepresentation | UnknownAnswer | RefusedAnswer;

/** Reads of one kind since the process started. */
export interface KindStats {
  hits: number;
  misses: number;
  stale: number;
}

/** What the cache reports about itself (the `cache` object of the admin status). */
export interface CacheStats {
  mode: 'redis' | 'memory';
  connected: boolean;
  hits: number;
  misses: number;
  kinds: Record<string, KindStats>;
}

/**
 * What a fill listener hears after a body was fetched upstream and stored (a miss or a refresh) on
 * this instance: the body's text is decoded only for a listener that asks (`text()`), so a large body
 * made as bytes stays bytes.
 */
export type FillListener = (fill: { kind: CacheKind; params: string; text: () => string; parts?: BodyParts | undefined }) => void;
