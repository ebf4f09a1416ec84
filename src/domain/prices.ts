/**
 * What an action costs, in quota points, computed from its shape before any work is done (DESIGN 24).
 * The contract names each operation's rule (`x-mds-cost` in openapi.yaml); this module is the one
 * place that turns a rule and an action's input into points. A cached small read is 1 point; a read
 * whose work grows with its input (symbols, bars, studies and their periods) costs in proportion, so
 * a caller pays for what the service will spend, whatever door it came through.
 *
 * Bars are estimated from the window and the interval alone (an upper bound for the symbol's market:
 * crypto and currencies trade around the clock, anything else about a third of the calendar for
 * intraday bars and five days of seven for daily ones), never by reading the store.
 */
import { SHORTEST_BAR_MS } from './bar-intervals.js';
import { parseStudies, warmupOf } from './indicators/catalogue.js';
import { marketOfSymbol } from './provider-symbols.js';
import { RANGE_DAYS } from './history-ranges.js';
import type { HistoryInterval, HistoryRange } from './ports/market-data.js';
import { DAY_MS } from './durations.js';

/** The rules an operation's `x-mds-cost` may name. */
export const COST_RULES = ['fixed', 'symbols', 'bars', 'studies'] as const;
export type CostRule = (typeof COST_RULES)[number];

/** Symbols one point pays for (`symbols` rule). */
export const SYMBOLS_PER_POINT = 10;
/** Bars one point pays for (`bars` rule): a history read of up to this many bars is 1 point. */
export const BARS_PER_POINT = 5000;
/** Study-bars one point pays for (`studies` rule): each study over the window and its own warm-up. */
export const STUDY_BARS_PER_POINT = 8000;

/** The input an action's price is read from: query parameters and path parameters, as strings. */
export type PriceInput = Readonly<Record<string, unknown>>;

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** How many symbols a `symbols` list (or array) names. */
function symbolCount(input: PriceInput): number {
  const value = input.symbols;
  if (Array.isArray(value)) return value.length;
  const list = text(value);
  return list === undefined || list === '' ? 1 : list.split(',').length;
}

/** The share of calendar time the symbol's market has bars of `interval` for (an upper bound). */
function tradingShare(symbol: string | undefined, interval: HistoryInterval): number {
  const market = symbol === undefined ? 'US' : marketOfSymbol(symbol);
  if (market === 'CRYPTO' || market === 'FX') return 1;
  return SHORTEST_BAR_MS[interval] >= DAY_MS ? 5 / 7 : 1 / 3;
}

/** The window's length in ms, from `range` or `start`/`end` (dates or instants); a year when it cannot tell. */
function windowMs(input: PriceInput, nowMs: number): number {
  const range = text(input.range) as HistoryRange | undefined;
  if (range !== undefined) {
    if (range === 'max') return 50 * 365 * DAY_MS;
    if (range === 'ytd') return nowMs - Date.UTC(new Date(nowMs).getUTCFullYear(), 0, 1);
    const days = RANGE_DAYS[range as keyof typeof RANGE_DAYS];
    if (days !== undefined) return days * DAY_MS;
  }
  const start = text(input.start);
  if (start === undefined) return 366 * DAY_MS;
  const startMs = Date.parse(start);
  const endText = text(input.end);
  const endMs = endText === undefined ? nowMs : Date.parse(endText) + (endText.length <= 10 ? DAY_MS : 0);
  if (!Number.isFinite(startMs) || !Number.isFinite(endMs)) return 366 * DAY_MS;
  return Math.max(0, endMs - startMs);
}

/** The most bars a history window of `input` may hold (see the module comment). */
export function estimatedBars(input: PriceInput, nowMs: number): number {
  const interval = (text(input.interval) ?? '1d') as HistoryInterval;
  const step = SHORTEST_BAR_MS[interval] ?? DAY_MS;
  const symbol = text(input.symbol);
  return Math.ceil((windowMs(input, nowMs) / step) * tradingShare(symbol, interval)) + 1;
}

/** The study-bars of a `studies` list over `bars` bars: each study over the window and its own warm-up. */
function studyBars(input: PriceInput, bars: number): number {
  const list = text(input.studies);
  if (list === undefined) return bars;
  const interval = text(input.interval) ?? '1d';
  let studies;
  try {
    studies = parseStudies(list, !['1d', '1wk', '1mo'].includes(interval));
  } catch {
    // Refused later by the input's own rules; until then it is priced as one study per entry.
    return bars * Math.max(1, list.split(',').length);
  }
  let total = 0;
  for (const study of studies) total += bars + warmupOf([study]);
  return Math.max(total, bars);
}

/**
 * The points an action of `rule` costs with `input` (at least 1). `fixed` is 1; `symbols` one per
 * started ten symbols; `bars` one per started 5,000 bars of the window; `studies` one per started
 * 8,000 study-bars (each study over the window plus its warm-up).
 */
export function priceOf(rule: CostRule, input: PriceInput, nowMs = Date.now()): number {
  switch (rule) {
    case 'fixed':
      return 1;
    case 'symbols':
      return Math.max(1, Math.ceil(symbolCount(input) / SYMBOLS_PER_POINT));
    case 'bars':
      return Math.max(1, Math.ceil(estimatedBars(input, nowMs) / BARS_PER_POINT));
    case 'studies':
      return Math.max(1, Math.ceil(studyBars(input, estimatedBars(input, nowMs)) / STUDY_BARS_PER_POINT));
  }
}

/** True for a name `x-mds-cost` may carry. */
export function isCostRule(value: unknown): value is CostRule {
  return typeof value === 'string' && (COST_RULES as readonly string[]).includes(value);
}
