/**
 * The rules of a history query: defaults, what an upstream cannot serve (each violation names its
 * rule), the most candles one answer or export carries, and the window as instants.
 */
import { rangeStartMs } from '../../domain/history-ranges.js';
import { snapWindow } from '../../domain/history-grid.js';
import { marketOfSymbol } from '../../domain/provider-symbols.js';
import { parseInstant } from '../../domain/instant.js';
import { InvalidRequestError, type Violation } from '../../domain/errors.js';
import { canonicalSymbol } from '../../domain/symbols.js';
import type { components } from '../../generated/api.js';
import type { History, HistoryInterval, HistoryQuery, HistoryRange } from '../../domain/ports/market-data.js';
import type { CorporateAction, TimeSpan } from '../../domain/ports/history-store.js';
import type { Adjustment } from '../../domain/history-adjustment.js';
import { INTERVAL_MS } from '../history-store.js';
import { INTRADAY } from './lifetimes.js';
import { DAY_MS } from '../../domain/durations.js';
import { tooManyCandlesMessage, type TooManyCandles } from '../../domain/candle-limits.js';

/** A window with more candles than one JSON answer carries (an export may carry it). */
export class TooManyCandlesError extends InvalidRequestError {
  readonly refusal: TooManyCandles;

  constructor(refusal: TooManyCandles) {
    super([{ path: 'query.interval', message: tooManyCandlesMessage(refusal) }]);
    this.refusal = refusal;
  }
}

/** The raw history query as validated by the contract. */
export interface HistoryParams {
  symbol: string;
  interval?: HistoryInterval;
  range?: HistoryRange;
  start?: string;
  end?: string;
  /** The basis of open/high/low/close; default `splits`. */
  adjust?: Adjustment;
  /** The currency to convert prices to (`currency=`), as asked. */
  currency?: string;
}

/**
 * Applies the defaults and the rules an upstream cannot serve (each violation names its rule); the
 * rules of how far back and how wide an upstream serves intraday bars hold only where the history
 * store does not already hold the window (`holds`).
 */
export async function historyQuery(
  params: HistoryParams,
  now: number,
  holds: (symbol: string, interval: HistoryInterval, span: TimeSpan) => Promise<boolean | undefined>,
): Promise<HistoryQuery> {
  const symbol = canonicalSymbol(params.symbol, 'path.symbol');
  const interval = params.interval ?? '1d';
  const violations: Violation[] = [];
  if (params.range !== undefined && (params.start !== undefined || params.end !== undefined)) {
    violations.push({ path: 'query.range', message: 'cannot be combined with start/end: give either a range or a start (and optional end)' });
  }
  if (params.end !== undefined && params.start === undefined) {
    violations.push({ path: 'query.end', message: 'needs a start' });
  }
  const startMs = params.start === undefined ? undefined : parseInstant(params.start);
  const endMs = params.end === undefined ? undefined : parseInstant(params.end);
  if (params.start !== undefined && startMs === undefined) violations.push({ path: 'query.start', message: 'is not a valid date or date-time' });
  if (params.end !== undefined && endMs === undefined) violations.push({ path: 'query.end', message: 'is not a valid date or date-time' });
  if (startMs !== undefined && endMs !== undefined && endMs <= startMs) {
    violations.push({ path: 'query.end', message: 'must be after start' });
  }
  if (startMs !== undefined && startMs > now) violations.push({ path: 'query.start', message: 'must not be in the future' });
  if (violations.length > 0) throw new InvalidRequestError(violations);

  const range = startMs === undefined ? (params.range ?? '1mo') : undefined;
  const spanMs = range !== undefined ? now - rangeStartMs(range, now) : Math.min(endMs ?? now, now) - (startMs ?? now);
  if (interval === '1m' && spanMs > 7 * DAY_MS) {
    violations.push({ path: 'query.interval', message: '1m candles cover at most 7 days: choose a shorter range (1d, 5d) or window' });
  } else if (INTRADAY.has(interval) && spanMs > 60 * DAY_MS) {
    violations.push({ path: 'query.interval', message: `intraday candles (${interval}) cover at most 60 days: choose a shorter range (up to 1mo) or window, or a daily interval` });
  } else if (startMs !== undefined && INTRADAY.has(interval)) {
    // How far back upstreams keep intraday bars (Yahoo refuses older windows with a 422 of its own).
    const backDays = interval === '1m' ? 30 : 60;
    if (startMs < now - backDays * DAY_MS) {
      violations.push({ path: 'query.start', message: `${interval} candles reach back ${backDays} days at most: start after ${new Date(now - backDays * DAY_MS).toISOString().slice(0, 10)}, or choose a daily interval` });
    }
  }
  // The window's bounds snapped to the interval's grid: the cache key and the store query name bars, not milliseconds.
  const query: HistoryQuery = range !== undefined ? { symbol, interval, range } : { symbol, interval, ...snapWindow(marketOfSymbol(symbol), interval, { startMs: startMs as number, endMs }) };
  if (violations.length > 0 && !(await holds(symbol, interval, spanOf(query, now)))) throw new InvalidRequestError(violations);
  return query;
}

/** The window of a query as instants: a named range ends now. */
export function spanOf(query: HistoryQuery, now: number): TimeSpan {
  if (query.range === undefined) return { startMs: query.startMs!, endMs: Math.min(query.endMs ?? now + INTERVAL_MS[query.interval], now + INTERVAL_MS[query.interval]) };
  return { startMs: rangeStartMs(query.range, now), endMs: now + INTERVAL_MS[query.interval] };
}

/** The dividends and splits of `span`, as the contract spells them. */
export function eventsOf(actions: readonly CorporateAction[], span: TimeSpan): History['events'] {
  const events: History['events'] = { dividends: [], splits: [] };
  for (const a of actions) {
    if (a.timeMs < span.startMs || a.timeMs >= span.endMs) continue;
    const time = new Date(a.timeMs).toISOString();
    if (a.kind === 'dividend') events.dividends.push({ time, amount: a.amount });
    else events.splits.push({ time, numerator: a.numerator, denominator: a.denominator });
  }
  return events;
}
