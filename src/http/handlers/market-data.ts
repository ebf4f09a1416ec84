import type { Request, Response } from 'express';
import type { components } from '../../generated/api.js';
import type { MarketDataService } from '../../services/market-data.js';
import { TooManyCandlesError, type HistoryParams } from '../../services/market-data/history-rules.js';
import { EXPORT_PAGE_CANDLES } from '../../services/market-data/exports.js';
import type { IndicatorService } from '../../services/indicators.js';
import { InvalidRequestError } from '../../domain/errors.js';
import type { CachedRepresentation } from '../../services/cache/cache-types.js';
import { textOf } from '../../services/cache/representation-cache.js';
import type { ComputePool, ExportStudies } from '../../domain/ports/compute.js';
import { abortOnClose, ARROW_CONTENT_TYPE, CSV_CONTENT_TYPE, writeExport } from '../history-export.js';
import { cacheScopeOf, setCacheControl } from '../cache-policy.js';
import { acceptedFormat, etagMatches, varyByAccept, writeRepresentation, type Format } from './representation.js';
import type { Handler, JsonResponse } from './types.js';

/** Tells the fast path that this request target was validated and answered from `rep` (its key and kind). */
export type RememberTarget = (req: Request, rep: Pick<CachedRepresentation, 'key' | 'kind'>) => void;

/** Sends a cached JSON representation (200 or 304) and lets the fast path answer its target for a second. */
export function send(req: Request, res: Response, rep: CachedRepresentation, remember: RememberTarget | undefined): void {
  writeRepresentation(res, rep, req.headers['if-none-match'], undefined, cacheScopeOf(req));
  if (rep.cacheStatus !== 'STALE') remember?.(req, rep);
}

type HistoryFormat = Format;
type HistoryResponse = components['schemas']['HistoryResponse'];

/** The format asked for by `format`, or by `Accept` when no `format` is given (JSON wins a tie). */
function historyFormat(req: Request, format: HistoryFormat | undefined): HistoryFormat {
  return format ?? acceptedFormat(req);
}

/** What formats an export: the compute pool (DESIGN 24). */
export type ExportFormatter = Pick<ComputePool, 'exportAnswer' | 'exportPage' | 'reserve'>;

/**
 * History as CSV or Arrow, made from the cached JSON answer (and the cached indicators answer for
 * study columns) by the compute pool: same cache status and lifetime, its own ETag (one per
 * representation, derived from the JSON's so it changes with it), `Vary: Accept` for HTTP caches.
 * Never handed to the fast path, which answers JSON.
 */
async function sendExport(req: Request, res: Response, exporter: ExportFormatter, rep: CachedRepresentation, format: 'csv' | 'arrow', studies?: ExportStudies & { etag: string }): Promise<void> {
  // With studies, the ETag changes with the history and with the studies' answer.
  const etag = rep.etag.replace(/"$/, `${studies === undefined ? '' : `-${studies.etag.replaceAll('"', '')}`}-${format}"`);
  const headers = () => {
    res.set({ 'X-Cache': rep.cacheStatus, ETag: etag });
    setCacheControl(req, res, rep.maxAgeSeconds);
    varyByAccept(res);
  };
  if (etagMatches(req.headers['if-none-match'], etag)) {
    headers();
    res.status(304).end();
    return;
  }
  const { signal, stop } = abortOnClose(res);
  let file: string | Uint8Array;
  try {
    file = await exporter.exportAnswer({ format, history: textOf(rep), ...(studies === undefined ? {} : { studies: { body: studies.body, columns: studies.columns } }) }, { signal });
  } catch (err) {
    if (signal.aborted) return;
    throw err;
  } finally {
    stop();
  }
  headers();
  res.status(200).type(format === 'csv' ? CSV_CONTENT_TYPE : ARROW_CONTENT_TYPE);
  res.send(typeof file === 'string' ? file : Buffer.from(file.buffer, file.byteOffset, file.byteLength));
}

/**
 * A window too large for one JSON answer, exported from the history store as it is read (up to
 * 200,000 candles): not cached as a whole, so no ETag; `X-History-Missing` lists the parts the
 * upstream could not give, as ISO 8601 intervals.
 */
async function streamExport(res: Response, market: MarketDataService, exporter: ExportFormatter, params: HistoryParams, format: 'csv' | 'arrow'): Promise<void> {
  // A place in the compute pool before the store is read: a full pool answers 503 before the first page is read.
  const reservation = exporter.reserve(EXPORT_PAGE_CANDLES);
  try {
    const exported = await market.exportHistory(params);
    await writeExport(
      res,
      exporter,
      exported,
      format,
      () => {
        res.status(200).set({ 'Cache-Control': 'no-store' });
        varyByAccept(res);
        if (exported.missing.length > 0) res.set('X-History-Missing', exported.missing.map((m) => `${new Date(m.startMs).toISOString()}/${new Date(m.endMs).toISOString()}`).join(', '));
        res.type(format === 'csv' ? CSV_CONTENT_TYPE : ARROW_CONTENT_TYPE);
      },
      reservation,
    );
  } finally {
    reservation?.release();
  }
}

export function marketDataHandlers(
  market: MarketDataService,
  exporter: ExportFormatter,
  remember?: RememberTarget,
  indicators?: IndicatorService,
): {
  getIndices: Handler<'getIndices'>;
  getQuotes: Handler<'getQuotes'>;
  getQuote: Handler<'getQuote'>;
  getHistory: Handler<'getHistory'>;
  getHistoryCsv: Handler<'getHistoryCsv'>;
  getHistoryArrow: Handler<'getHistoryArrow'>;
  searchSymbols: Handler<'searchSymbols'>;
  getMarkets: Handler<'getMarkets'>;
} {
  /** History in `format` (getHistory's, or fixed by getHistoryCsv and getHistoryArrow, which take no `format`). */
  async function answerHistory(req: Request<{ symbol: string }>, res: Response, format: HistoryFormat): Promise<void> {
    const { format: _asked, studies, ...query } = req.query as unknown as Omit<HistoryParams, 'symbol'> & { format?: HistoryFormat; studies?: string };
    const params = { ...query, symbol: req.params.symbol };
    if (format === 'json') {
      // Studies are columns of the exports; in JSON they are GET /api/indicators.
      send(req, res, await market.getHistory(params), remember);
      return;
    }
    let rep: CachedRepresentation;
    try {
      rep = await market.getHistory(params);
    } catch (err) {
      // Too many candles for one JSON answer is what an export is for.
      if (err instanceof TooManyCandlesError) {
        if (studies !== undefined) {
          throw new InvalidRequestError([{ path: 'query.studies', message: `studies are added to exports of at most 5000 candles: choose a larger interval or a shorter window` }]);
        }
        return streamExport(res, market, exporter, params, format);
      }
      throw err;
    }
    if (studies === undefined || indicators === undefined) {
      await sendExport(req, res, exporter, rep, format);
      return;
    }
    await sendExport(req, res, exporter, rep, format, await indicators.columns({ ...params, studies }));
  }

  return {
    async getIndices(req, res) {
      send(req, res, await market.getIndices(), remember);
    },
    async getQuotes(req, res) {
      const { symbols, currency } = req.query as unknown as { symbols: string; currency?: string };
      send(req, res, await market.getQuotes(symbols, currency), remember);
    },
    async getQuote(req, res) {
      send(req, res, await market.getQuote(req.params.symbol, (req.query as { currency?: string }).currency), remember);
    },
    getHistory(req, res) {
      return answerHistory(req, res, historyFormat(req, (req.query as { format?: HistoryFormat }).format));
    },
    getHistoryCsv(req, res) {
      return answerHistory(req, res, 'csv');
    },
    getHistoryArrow(req, res) {
      return answerHistory(req, res, 'arrow');
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
