import type { Request, Response } from 'express';
import type { components } from '../../generated/api.js';
import type { MarketDataService } from '../../services/market-data.js';
import { TooManyCandlesError, type HistoryParams } from '../../services/market-data/history-rules.js';
import type { IndicatorService } from '../../services/indicators.js';
import { InvalidRequestError } from '../../domain/errors.js';
import type { CachedRepresentation } from '../../services/representation-cache.js';
import { ARROW_CONTENT_TYPE, CSV_CONTENT_TYPE, csvHeader, csvRows, writeArrow, writeCsv, type ExtraColumns } from '../history-export.js';
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

/**
 * History as CSV or Arrow, made from the cached JSON answer: same cache status and lifetime, its own
 * ETag (one per representation, derived from the JSON's so it changes with it), `Vary: Accept` for
 * HTTP caches. Never handed to the fast path, which answers JSON.
 */
async function sendExport(req: Request, res: Response, rep: CachedRepresentation, format: 'csv' | 'arrow', studies?: { etag: string; columns: () => Promise<ExtraColumns & { times: readonly string[] }> }): Promise<void> {
  // With studies, the ETag changes with the history and with the studies' answer.
  const etag = rep.etag.replace(/"$/, `${studies === undefined ? '' : `-${studies.etag.replaceAll('"', '')}`}-${format}"`);
  res.set({ 'X-Cache': rep.cacheStatus, ETag: etag });
  setCacheControl(req, res, rep.maxAgeSeconds);
  varyByAccept(res);
  if (etagMatches(req.headers['if-none-match'], etag)) {
    res.status(304).end();
    return;
  }
  const { candles } = (JSON.parse(rep.value) as HistoryResponse).data;
  const extra = await studies?.columns();
  const aligned = extra === undefined ? undefined : alignTo(candles, extra);
  if (format === 'csv') {
    res.status(200).type(CSV_CONTENT_TYPE).send(csvHeader(aligned) + csvRows(candles, aligned));
    return;
  }
  res.status(200).type(ARROW_CONTENT_TYPE);
  await writeArrow(
    res,
    (async function* () {
      yield candles;
    })(),
    aligned,
  );
}

/** Study columns (aligned to their own bar times) re-aligned to `candles` by time; null where a candle has no study bar. */
function alignTo(candles: ReadonlyArray<{ time: string }>, extra: ExtraColumns & { times: readonly string[] }): ExtraColumns {
  const at = new Map(extra.times.map((t, i) => [t, i]));
  const rows = candles.map((c) => at.get(c.time));
  return { names: extra.names, values: extra.values.map((column) => rows.map((i) => (i === undefined ? null : (column[i] ?? null)))) };
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
  indicators?: IndicatorService,
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
      const { format: asked, studies, ...query } = req.query as unknown as Omit<HistoryParams, 'symbol'> & { format?: HistoryFormat; studies?: string };
      const params = { ...query, symbol: req.params.symbol };
      const format = historyFormat(req, asked);
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
          return streamExport(res, market, params, format);
        }
        throw err;
      }
      if (studies === undefined || indicators === undefined) {
        await sendExport(req, res, rep, format);
        return;
      }
      const { etag, times, columns } = await indicators.columns({ ...params, studies });
      await sendExport(req, res, rep, format, { etag, columns: () => Promise.resolve({ times, names: columns.map((c) => c.column), values: columns.map((c) => c.values) }) });
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
