import type { Request, Response } from 'express';
import type { HistoryParams, MarketDataService } from '../../services/market-data.js';
import type { CachedRepresentation } from '../../services/representation-cache.js';
import { representationReply } from './representation.js';
import type { Handler, JsonResponse } from './types.js';

/** Tells the fast path that this request target was validated and answered from `key`. */
export type RememberTarget = (req: Request, key: string) => void;

function send(req: Request, res: Response, rep: CachedRepresentation, remember: RememberTarget | undefined): void {
  const reply = representationReply(rep, req.headers['if-none-match']);
  res.status(reply.status).set(reply.headers);
  if (reply.body) res.end(reply.body);
  else res.end();
  if (rep.cacheStatus !== 'STALE') remember?.(req, rep.key);
}

export function marketDataHandlers(
  market: MarketDataService,
  remember?: RememberTarget,
): {
  getIndices: Handler<'getIndices'>;
  getQuotes: Handler<'getQuotes'>;
  getQuote: Handler<'getQuote'>;
  getHistory: Handler<'getHistory'>;
  searchSymbols: Handler<'searchSymbols'>;
  getMarkets: Handler<'getMarkets'>;
} {
  return {
    async getIndices(req, res) {
      send(req, res, await market.getIndices(), remember);
    },
    async getQuotes(req, res) {
      const { symbols } = req.query as unknown as { symbols: string };
      send(req, res, await market.getQuotes(symbols), remember);
    },
    async getQuote(req, res) {
      send(req, res, await market.getQuote(req.params.symbol), remember);
    },
    async getHistory(req, res) {
      const query = req.query as unknown as Omit<HistoryParams, 'symbol'>;
      send(req, res, await market.getHistory({ ...query, symbol: req.params.symbol }), remember);
    },
    async searchSymbols(req, res) {
      const { q, limit } = req.query as unknown as { q: string; limit?: number };
      send(req, res, await market.search(q, limit === undefined ? undefined : Number(limit)), remember);
    },
    getMarkets(_req, res) {
      const { body, maxAgeSeconds } = market.markets();
      const typed: JsonResponse<'getMarkets', 200> = body;
      res.status(200).set('Cache-Control', `public, max-age=${maxAgeSeconds}`).json(typed);
    },
  };
}
