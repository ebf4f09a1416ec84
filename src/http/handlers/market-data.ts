import type { Request, Response } from 'express';
import { historyCsv } from '../../services/history-csv.js';
import type { HistoryParams, MarketDataService } from '../../services/market-data.js';
import type { CachedRepresentation } from '../../services/representation-cache.js';
import { etagMatches, representationReply } from './representation.js';
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

/** CSV when asked for by `format=csv`, or by `Accept` when no `format` is given (JSON wins a tie). */
function wantsCsv(req: Request, format: 'json' | 'csv' | undefined): boolean {
  if (format !== undefined) return format === 'csv';
  return req.headers.accept !== undefined && req.accepts(['application/json', 'text/csv']) === 'text/csv';
}

/**
 * History as CSV, made from the cached JSON answer: same cache status and lifetime, its own ETag (one
 * per representation, derived from the JSON's so it changes with it), `Vary: Accept` for HTTP caches.
 * Never handed to the fast path, which answers JSON.
 */
function sendCsv(req: Request, res: Response, rep: CachedRepresentation): void {
  const etag = rep.etag.replace(/"$/, '-csv"');
  res.set({ 'X-Cache': rep.cacheStatus, ETag: etag, 'Cache-Control': `public, max-age=${rep.maxAgeSeconds}`, Vary: 'Accept' });
  if (etagMatches(req.headers['if-none-match'], etag)) {
    res.status(304).end();
    return;
  }
  res.status(200).type('text/csv; charset=utf-8').send(historyCsv(rep.value));
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
      const { format, ...query } = req.query as unknown as Omit<HistoryParams, 'symbol'> & { format?: 'json' | 'csv' };
      const rep = await market.getHistory({ ...query, symbol: req.params.symbol });
      if (wantsCsv(req, format)) sendCsv(req, res, rep);
      else send(req, res, rep, remember);
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
