/**
 * How a cached representation is sent: status, cache headers and the exact cached bytes. Shared by
 * the Express handlers and the fast path in front of Express, so both send the same bytes and headers.
 */
import type { CachedRepresentation } from '../../services/representation-cache.js';

/** True when an `If-None-Match` header names `etag` (or `*`); weak comparison, as RFC 9110 asks for GET. */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((candidate) => {
    const c = candidate.trim();
    return c === '*' || c.replace(/^W\//, '') === bare;
  });
}

export interface RepresentationReply {
  status: 200 | 304;
  headers: Record<string, string>;
  /** The exact cached bytes; absent on 304. */
  body?: Buffer;
}

/** The status, headers and body of an answer from the cache, honouring `If-None-Match`. */
export function representationReply(rep: CachedRepresentation, ifNoneMatch: string | undefined): RepresentationReply {
  const headers: Record<string, string> = {
    'X-Cache': rep.cacheStatus,
    ETag: rep.etag,
    'Cache-Control': `public, max-age=${rep.maxAgeSeconds}`,
  };
  if (etagMatches(ifNoneMatch, rep.etag)) return { status: 304, headers };
  headers['Content-Type'] = 'application/json; charset=utf-8';
  headers['Content-Length'] = String(rep.body.length);
  return { status: 200, headers, body: rep.body };
}
