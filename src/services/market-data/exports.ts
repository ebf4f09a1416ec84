/**
 * History exports (CSV, Arrow): windows too large for one JSON answer, up to 200,000 candles read
 * from the history store page by page and written as they are read.
 */
import { InvalidRequestError, UnknownSymbolError } from '../../domain/errors.js';
import type { HistoryInterval } from '../../domain/ports/market-data.js';
import type { CandleColumns, CorporateAction, TimeSpan } from '../../domain/ports/history-store.js';
import type { Adjustment } from '../../domain/history-adjustment.js';
import type { MarketDataContext } from './context.js';
import type { HistoryReads } from './history.js';
import { spanOf, TooManyCandlesError, type HistoryParams } from './history-rules.js';
import { overTheLimit, tooManyCandles, tooManyCandlesMessage } from '../../domain/candle-limits.js';
import { afterFirstRate, convertibleFrom, FIRST_RATE_DAY, MAX_CARRY_DAYS, needsConversion, targetCurrency } from '../../domain/currencies.js';
import { convertColumns } from '../../domain/history-conversion.js';
import { INTERVAL_MS } from '../history-store.js';
import { DAY_MS } from '../../domain/durations.js';

/** Candles read from the store at a time while an export is written. */
export const EXPORT_PAGE_CANDLES = 10_000;

/**
 * A history export: the instrument, the window's stored bars page by page, as columns (split-adjusted as stored:
 * the writer puts them on the basis `adjust` with `actions`, off the event loop), and what is missing.
 */
export interface HistoryExport {
  symbol: string;
  interval: HistoryInterval;
  pages: AsyncIterable<CandleColumns>;
  actions: readonly CorporateAction[];
  adjust: Adjustment;
  missing: TimeSpan[];
}

/**
 * The same window as `getHistory`, as an export, up to 200,000 candles read from the store page by
 * page. Throws as `getHistory` does, and `InvalidRequestError` past 200,000 candles.
 */
export async function exportHistory(ctx: MarketDataContext, reads: HistoryReads, params: HistoryParams): Promise<HistoryExport> {
  const history = ctx.history;
  // Without a store there is nothing to export from: the answer's refusal stands.
  if (history === undefined) throw new TooManyCandlesError(overTheLimit('answer'));
  const query = await reads.query(params);
  const span = spanOf(query, ctx.now());
  const read = await history.read(query.symbol, query.interval, span, 1);
  if (read.info === undefined) throw new UnknownSymbolError([query.symbol]);
  const count = await history.count(query.symbol, query.interval, span);
  const refusal = tooManyCandles(count, 'export');
  if (refusal !== undefined) throw new InvalidRequestError([{ path: 'query.interval', message: tooManyCandlesMessage(refusal) }]);
  const pages = history.pages(query.symbol, query.interval, span, EXPORT_PAGE_CANDLES);
  const target = params.currency === undefined ? undefined : targetCurrency(params.currency);
  const info = read.info;
  if (target === undefined || !needsConversion(info.currency, target)) {
    return { symbol: query.symbol, interval: query.interval, missing: read.missing, pages, actions: read.actions, adjust: params.adjust ?? 'splits' };
  }
  convertibleFrom(info.currency, query.symbol);
  afterFirstRate(span);
  const table = await ctx.rates.table();
  // Bars before the first rate, and past the last rate and its carry, are left out; the rates have no longer gap between.
  const last = table.lastDay;
  const uncovered = last === undefined ? span.startMs : (last + MAX_CARRY_DAYS + 1) * DAY_MS;
  const first = (table.firstDay ?? FIRST_RATE_DAY) * DAY_MS;
  const missing = [
    ...(span.startMs < first ? [{ startMs: span.startMs, endMs: Math.min(first, span.endMs) }] : []),
    ...read.missing,
    ...(uncovered < span.endMs ? [{ startMs: Math.max(uncovered, span.startMs), endMs: span.endMs }] : []),
  ];
  return {
    symbol: query.symbol,
    interval: query.interval,
    missing,
    pages: convertedPages(pages, (columns) => convertColumns(table, columns, query.interval, INTERVAL_MS[query.interval], info.timezone, info.currency, target).columns),
    actions: read.actions,
    adjust: params.adjust ?? 'splits',
  };
}

async function* convertedPages(pages: AsyncIterable<CandleColumns>, convert: (columns: CandleColumns) => CandleColumns): AsyncIterable<CandleColumns> {
  for await (const page of pages) yield convert(page);
}
