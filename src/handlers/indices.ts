import type { CachedRepresentation, MarketDataService } from '../services/market-data.js';
import type { Handler } from './types.js';

/** True when an `If-None-Match` header names `etag` (or `*`); weak comparison, as RFC 9110 asks for GET. */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((candidate) => {
    const c = candidate.trim();
    return c === '*' || c.replace(/^W\//, '') === bare;
  });
}

export interface IndicesReply {
  status: 200 | 304;
  headers: Record<string, string>;
  /** The exact cached bytes; absent on 304. */
  body?: Buffer;
}

/**
 * The status, headers and body of a GET /api/indices answer. Shared by the Express handler and the
 * fast path in front of Express, so both send the same bytes and headers.
 */
export function indicesReply(rep: CachedRepresentation, ifNoneMatch: string | undefined): IndicesReply {
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

export function indicesHandlers(market: MarketDataService): { getIndices: Handler<'getIndices'> } {
  return {
    async getIndices(req, res) {
      const reply = indicesReply(await market.getIndices(), req.headers['if-none-match']);
      res.status(reply.status).set(reply.headers);
      if (reply.body) res.end(reply.body);
      else res.end();
    },
  };
}
