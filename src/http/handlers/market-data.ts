import type { Request, Response } from 'express';
import type { components } from '../../generated/api.js';
import type { MarketDataService } from '../../services/market-data.js';
import { TooManyCandlesError, type HistoryParams } from '../../services/market-data/history-rules.js';
import type { CachedRepresentation } from '../../services/representation-cache.js';
import { ARROW_CONTENT_TYPE, CSV_CONTENT_TYPE, csvHeader, csvRows, writeArrow, writeCsv } from '../history-export.js';
import { cacheScopeOf, setCacheControl, varyByCredentials } from '../cache-policy.js';
import { etagMatches, representationReply, varyByAccept } from './representation.js';
import type { Handler, JsonResponse } from './types.js';

/** Tells the fast path that this request target was validated and answered from `key`. */
export type RememberTarget = (req: Request, key: string) => void;

function send(req: Request, res: Response, rep: CachedRepresentation, remember: RememberTarget | undefined): void {
  const scope = cacheScopeOf(req);
  const reply = representationReply(rep, req.headers['if-none-match'], scope);
  varyByAccept(res, rep.kind);
  if (scope === 'private') varyByCredentials(res);
  res.status(reply.status).set(reply.headers);
  if (reply.body) res.end(reply.body);
  else res.end();
  if (rep.cacheStatus !== 'STALE') remember?.(req, rep.key);
}

type HistoryFormat = 'json' | 'csv' | 'arrow';
type HistoryResponse = components['schemas']['HistoryResponse'];

/** The format asked for by `format`, or by `Accept` when no `format` is given (JSON wins a tie). */
function historyFormat(req: Request, format: HistoryFormat | undefined): HistoryFormat {
  if (format !== undefined) return format;
  if (req.headers.accept === undefined) return 'json';
  const chosen = req.accepts(['application/json', 'text/csv', ARROW_CONTENT_TYPE]);
  return chosen === 'text/csv' ? 'csv' : chosen === ARROW_CONTENT_TYPE ? 'arrow' : 'json';
}

/**
 * History as CSV or Arrow, made from the cached JSON answer: same cache status and lifetime, its own
 * ETag (one per representation, derived from the JSON's so it changes with it), `Vary: Accept` for
 * HTTP caches. Never handed to the fast path, which answers JSON.
 */
async function sendExport(req: Request, res: Response, rep: CachedRepresentation, format: 'csv' | 'arrow'): Promise<void> {
  const etag = rep.etag.replace(/"$/, `-${format}"`);
  res.set({ 'X-Cache': rep.cacheStatus, ETag: etag });
  setCacheControl(req, res, rep.maxAgeSeconds);
  varyByAccept(res);
  if (etagMatches(req.headers['if-none-match'], etag)) {
    res.status(304).end();
    return;
  }
  const { candles } = (JSON.parse(rep.value) as HistoryResponse).data;
  if (format === 'csv') {
    res.status(200).type(CSV_CONTENT_TYPE).send(csvHeader() + csvRows(candles));
    return;
  }
  res.status(200).type(ARROW_CONTENT_TYPE);
  await writeArrow(res, (async function* () {
    yield candles;
  })());
}

/**
 * A window too large for one JSON answer, exported from the history store as it is read (up to
 * 200,000 candles): not cached as a whole, so no ETag; `X-History-Missing` lists the parts the
 * upstream could not give, as ISO 8601 intervals.
 */
async function streamExport(res: Response, market: MarketDataService, params: HistoryParams, format: 'csv' | 'arrow'): Promise<void> {
  const exported = await market.exportHistory(params);
  res.status(200).set({ 'Cache-Control': 'no-store' });
  varyByAccept(res);
  if (exported.missing.length > 0) res.set('X-History-Missing', exported.missing.map((m) => `${new Date(m.startMs).toISOString()}/${new Date(m.endMs).toISOString()}`).join(', '));
  if (format === 'csv') {
    res.type(CSV_CONTENT_TYPE);
    await writeCsv(res, exported.candles);
  } else {
    res.type(ARROW_CONTENT_TYPE);
    await writeArrow(res, exported.candles);
  }
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
      const { format: asked, ...query } = req.query as unknown as Omit<HistoryParams, 'symbol'> & { format?: HistoryFormat };
      const params = { ...query, symbol: req.params.symbol };
      const format = historyFormat(req, asked);
      if (format === 'json') {
        send(req, res, await market.getHistory(params), remember);
        return;
      }
      let rep: CachedRepresentation;
      try {
        rep = await market.getHistory(params);
      } catch (err) {
        // Too many candles for one JSON answer is what an export is for.
        if (err instanceof TooManyCandlesError) return streamExport(res, market, params, format);
        throw err;
      }
      await sendExport(req, res, rep, format);
    },
    async searchSymbols(req, res) {
      const { q, limit } = req.query as unknown as { q: string; limit?: number };
      send(req, res, await market.search(q, limit === undefined ? undefined : Number(limit)), remember);
    },
    getMarkets(req, res) {
      const { body, maxAgeSeconds } = market.markets();
      const typed: JsonResponse<'getMarkets', 200> = body;
      setCacheControl(req, res, maxAgeSeconds);
      res.status(200).json(typed);
    },
  };
}
