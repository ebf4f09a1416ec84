/**
 * What the representation cache stores under a key, as a type: a body found or a refusal of what the
 * upstream answered, with the time it is fresh until and the time it may still stand in for a failed
 * upstream until (its grace, stale-if-error). One key, one value, one SET per fill: the expired copy
 * is the same entry read past its fresh end, never a second key.
 *
 * The stored string is always a one-line JSON header, then (for a body) a newline and the body as it
 * is sent. JSON.stringify never writes a raw newline, so the first one ends the header; only the header
 * is parsed, never the body. Nothing is told apart by its first byte: a string whose header does not
 * parse as this release's is a miss.
 *
 * Times: the header carries the grace as a length (`graceMs`), and the store's own remaining TTL
 * (which ends with the grace) gives both ends on every read. Absolute times written by one instance
 * and compared by another would inherit the clock skew between them; the store's TTL has one clock.
 *
 * Versions: entries live under `mds:v<FORMATS.representation>:` (domain/key-space.ts). A change this
 * release's decoder and the one before read alike (a new optional field of `BodyParts`) keeps the
 * version; any other change bumps it, so each release reads and fills its own keys only and the
 * other's are misses, never misread (docs/operations.md, test/e2e/rolling-upgrade.test.ts).
 */
import { isTooManyCandles, type TooManyCandles } from '../../domain/candle-limits.js';

/** Why an upstream's answer cannot be served (stored, so the next read does not ask again). */
export type Refusal = TooManyCandles;

/** Where a body's `data` lies (`body.slice(from, to)`, the JSON of the data as it was serialized once), and what it says of it. */
export interface BodyParts {
  data: { from: number; to: number };
  /** The body's `source`: the provider that gave the data. */
  source: string;
  /** The body's `updated_at`. */
  updatedAt: string;
}

/** What an entry holds. */
export type EntryValue = { outcome: 'found'; body: string; parts?: BodyParts | undefined } | { outcome: 'refused'; refusal: Refusal };

/** An entry as read: its value, and until when it is fresh and may stand in for a failed upstream (epoch ms of the reader's clock). */
export interface CacheEntry {
  value: EntryValue;
  /** Until then the entry answers as a HIT. */
  freshUntilMs: number;
  /** Until then (at or after `freshUntilMs`) the entry may answer as STALE for a failed upstream; the store drops it then. */
  staleUntilMs: number;
}

/** The header of every stored entry (what is parsed on a read). */
type Header = { outcome: 'found'; graceMs: number; parts: BodyParts | null } | { outcome: 'refused'; graceMs: number; refusal: Refusal };

const HEADER_END = '\n';

/** The stored string of `value` with `graceMs` of stale-if-error after its fresh end. */
export function encodeEntry(value: EntryValue, graceMs: number): string {
  if (value.outcome === 'refused') return JSON.stringify({ outcome: 'refused', graceMs, refusal: value.refusal } satisfies Header);
  return `${foundHeader(value.parts, graceMs)}${value.body}`;
}

/**
 * `encodeEntry` of a found body given as its UTF-8 bytes (made on a compute thread): the body is
 * copied once behind the header, never decoded and encoded again on the event loop.
 */
export function encodeFoundEntryBytes(parts: BodyParts | undefined, bodyBytes: Uint8Array, graceMs: number): Uint8Array {
  return Buffer.concat([Buffer.from(foundHeader(parts, graceMs)), bodyBytes]);
}

function foundHeader(parts: BodyParts | undefined, graceMs: number): string {
  return `${JSON.stringify({ outcome: 'found', graceMs, parts: parts ?? null } satisfies Header)}${HEADER_END}`;
}

/**
 * The entry a stored string holds, read at `nowMs` with `ttlMs` left in the store; `undefined` for a
 * string this release did not write (a miss).
 */
export function decodeEntry(stored: string, ttlMs: number, nowMs: number): CacheEntry | undefined {
  const end = stored.indexOf(HEADER_END);
  let header: unknown;
  try {
    header = JSON.parse(end < 0 ? stored : stored.slice(0, end));
  } catch {
    return undefined;
  }
  if (typeof header !== 'object' || header === null) return undefined;
  const { outcome, graceMs, parts, refusal } = header as Record<string, unknown>;
  if (typeof graceMs !== 'number' || !Number.isSafeInteger(graceMs) || graceMs < 0) return undefined;
  const staleUntilMs = nowMs + ttlMs;
  const times = { freshUntilMs: staleUntilMs - graceMs, staleUntilMs };
  if (outcome === 'refused' && end < 0) return isTooManyCandles(refusal) ? { value: { outcome: 'refused', refusal }, ...times } : undefined;
  if (outcome !== 'found' || end < 0) return undefined;
  const body = stored.slice(end + HEADER_END.length);
  if (parts === null) return { value: { outcome: 'found', body }, ...times };
  return isBodyParts(parts, body.length) ? { value: { outcome: 'found', body, parts }, ...times } : undefined;
}

function isBodyParts(value: unknown, bodyLength: number): value is BodyParts {
  if (typeof value !== 'object' || value === null) return false;
  const { data, source, updatedAt } = value as Record<string, unknown>;
  if (typeof source !== 'string' || typeof updatedAt !== 'string' || typeof data !== 'object' || data === null) return false;
  const { from, to } = data as Record<string, unknown>;
  return Number.isSafeInteger(from) && Number.isSafeInteger(to) && (from as number) > 0 && (from as number) < (to as number) && (to as number) < bodyLength;
}
