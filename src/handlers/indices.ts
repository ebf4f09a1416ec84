import type { MarketDataService } from '../services/market-data.js';
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

export function indicesHandlers(market: MarketDataService): { getIndices: Handler<'getIndices'> } {
  return {
    async getIndices(req, res) {
      const rep = await market.getIndices();
      res.setHeader('X-Cache', rep.cacheStatus);
      res.setHeader('ETag', rep.etag);
      res.setHeader('Cache-Control', `public, max-age=${rep.maxAgeSeconds}`);
      if (etagMatches(req.headers['if-none-match'], rep.etag)) {
        res.status(304).end();
        return;
      }
      res.status(200).type('application/json').send(rep.body);
    },
  };
}
