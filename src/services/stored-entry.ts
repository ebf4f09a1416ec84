/**
 * What the representation cache stores under a key, as a type: a body found, or a refusal of what the
 * upstream answered. The outcome is a field of the entry, never a prefix of the body; reading it back
 * yields the same type (`decodeEntry`), or nothing for a string this release cannot read (a miss).
 *
 * One string per entry, so a read stays one GET:
 * - a body is stored as it is sent (every success body of the contract is a JSON object, `{...}`), so a
 *   hit is the stored string itself, with nothing parsed;
 * - a body with parts (where its `data` lies, and the `source` and `updated_at` it carries, for the
 *   answers assembled from others: batches, the indices, the stream) is a small JSON header
 *   `["found",{parts}]`, a newline (which JSON.stringify never writes) and the body: only the header is
 *   parsed, never the body (a body that is no JSON object gets the header `["found",null]`);
 * - a refusal is `["refused",{refusal}]`, with no body;
 * - `!unknown` is what the release before stored for an unknown symbol: still read as unknown until
 *   those entries expire. Any other string (the release before's `!too-many:` refusals among them) is a
 *   miss, and the next read loads it again.
 *
 * Versions: entries live under `mds:v<FORMATS.representation>:` (domain/key-space.ts), and a fleet
 * upgraded one instance at a time runs two releases on one Redis. A release must read the entries of
 * the release before it, or take them for misses, and never misread them:
 * - a change this decoder's release before reads alike (a new optional field of `BodyParts` it ignores,
 *   say) keeps the version;
 * - any other change (a new outcome, another header, another body encoding) bumps
 *   `FORMATS.representation`: each release then reads and fills its own keys, never the other's, and
 *   the release before's entries expire by their TTL once its last instance is gone (a flush removes
 *   them at once). The stale copies and fill locks move with them (same family).
 * What else shares the Redis, and why the quota counters and revocations are never versioned: the
 * table in docs/operations.md ("Upgrading one instance at a time"). test/e2e/rolling-upgrade.test.ts
 * runs the release before beside this one under load and fails on a misread body.
 */
import { isTooManyCandles, type TooManyCandles } from '../domain/candle-limits.js';

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

export type StoredEntry =
  | { outcome: 'found'; body: string; parts?: BodyParts | undefined }
  | { outcome: 'refused'; refusal: Refusal }
  /** Only read, never written: the release before's unknown symbol. */
  | { outcome: 'unknown' };

const OPEN_BRACE = 0x7b; // {
const OPEN_BRACKET = 0x5b; // [
const HEADER_END = '\n';
const LEGACY_UNKNOWN = '!unknown';

/** The stored string of `entry`. */
export function encodeEntry(entry: Exclude<StoredEntry, { outcome: 'unknown' }>): string {
  if (entry.outcome === 'refused') return JSON.stringify(['refused', entry.refusal]);
  // A body that is not a JSON object (none of the contract's) gets a header too, so it is never taken for one.
  if (entry.parts === undefined && entry.body.charCodeAt(0) === OPEN_BRACE) return entry.body;
  return `${JSON.stringify(['found', entry.parts ?? null])}${HEADER_END}${entry.body}`;
}

/** The entry a stored string holds; `undefined` for a string this release did not write (read as a miss). */
/**
 * `encodeEntry` of a found entry as UTF-8 bytes, from its body's bytes as sent (the body UTF-8
 * encoded): the body is not encoded again, and not copied at all when it needs no header.
 */
export function encodeFoundEntryBytes(parts: BodyParts | undefined, bodyBytes: Uint8Array): Uint8Array {
  if (parts === undefined && bodyBytes[0] === OPEN_BRACE) return bodyBytes;
  return Buffer.concat([Buffer.from(`${JSON.stringify(['found', parts ?? null])}${HEADER_END}`), bodyBytes]);
}

export function decodeEntry(stored: string): StoredEntry | undefined {
  const first = stored.charCodeAt(0);
  if (first === OPEN_BRACE) return { outcome: 'found', body: stored };
  if (first === OPEN_BRACKET) return decodeTagged(stored);
  if (stored === LEGACY_UNKNOWN) return { outcome: 'unknown' };
  return undefined;
}

function decodeTagged(stored: string): StoredEntry | undefined {
  const end = stored.indexOf(HEADER_END);
  let header: unknown;
  try {
    header = JSON.parse(end < 0 ? stored : stored.slice(0, end));
  } catch {
    return undefined;
  }
  if (!Array.isArray(header) || header.length !== 2) return undefined;
  const [outcome, fields] = header as [unknown, unknown];
  if (outcome === 'refused' && end < 0) return isTooManyCandles(fields) ? { outcome: 'refused', refusal: fields } : undefined;
  if (outcome !== 'found' || end < 0) return undefined;
  const body = stored.slice(end + HEADER_END.length);
  if (fields === null) return { outcome: 'found', body };
  return isBodyParts(fields, body.length) ? { outcome: 'found', body, parts: fields } : undefined;
}

function isBodyParts(value: unknown, bodyLength: number): value is BodyParts {
  if (typeof value !== 'object' || value === null) return false;
  const { data, source, updatedAt } = value as Record<string, unknown>;
  if (typeof source !== 'string' || typeof updatedAt !== 'string' || typeof data !== 'object' || data === null) return false;
  const { from, to } = data as Record<string, unknown>;
  return Number.isSafeInteger(from) && Number.isSafeInteger(to) && (from as number) > 0 && (from as number) < (to as number) && (to as number) < bodyLength;
}
