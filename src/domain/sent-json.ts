/**
 * A JSON answer as it is sent: its UTF-8 bytes and its ETag (a SHA-1 of the bytes), made once where
 * the answer is written. The compute pool makes them on its thread, so a large answer (an indicators
 * answer of 2.5 MB) is neither encoded nor hashed on the event loop; the representation cache makes
 * them for every other body.
 */
import { createHash } from 'node:crypto';
import type { SentBody } from './ports/compute.js';

export type { SentBody };

/** The strong ETag of `bytes`, as every answer of the service spells it. */
export function etagOf(bytes: Uint8Array): string {
  return `"${createHash('sha1').update(bytes).digest('base64url')}"`;
}

/** The bytes and ETag of `json`. */
export function sentBodyOf(json: string): SentBody {
  const body = Buffer.from(json, 'utf8');
  return { body, etag: etagOf(body) };
}
