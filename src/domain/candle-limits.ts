/**
 * How many candles one answer carries, and the one decision of "too many": a JSON history answer
 * carries at most 5,000 candles, an export (CSV, Arrow) at most 200,000. Every check of a window's size
 * (the provider's answer, the store's read, the export's count) asks `tooManyCandles`.
 */

/** The most candles one history answer carries. */
export const MAX_CANDLES = 5000;
/** The most candles one export (CSV, Arrow) carries; it is written as it is read, never held whole. */
export const MAX_EXPORT_CANDLES = 200_000;

/** What carries a window's candles: one JSON answer, or an export written page by page. */
export type CandleCarrier = 'answer' | 'export';

const LIMITS: Readonly<Record<CandleCarrier, number>> = { answer: MAX_CANDLES, export: MAX_EXPORT_CANDLES };

/** A window holding more candles than what carries it may. */
export interface TooManyCandles {
  reason: 'too-many-candles';
  carrier: CandleCarrier;
  /** How many candles the window holds; with `atLeast`, only that it holds more than this many. */
  candles: number;
  /** True when the count is a bound (a read that stopped once the limit was passed), not the count. */
  atLeast: boolean;
}

/** The most candles `carrier` carries. */
export function candleLimit(carrier: CandleCarrier): number {
  return LIMITS[carrier];
}

/**
 * `TooManyCandles` when `candles` exceed what `carrier` carries, `undefined` when they fit. With
 * `atLeast`, `candles` is what a read bounded at the limit (plus one) found: only "more than the limit" is known.
 */
export function tooManyCandles(candles: number, carrier: CandleCarrier, atLeast = false): TooManyCandles | undefined {
  if (candles <= LIMITS[carrier]) return undefined;
  return atLeast ? overTheLimit(carrier) : { reason: 'too-many-candles', carrier, candles, atLeast };
}

/** The refusal of a window known only to hold more than `carrier` carries. */
export function overTheLimit(carrier: CandleCarrier): TooManyCandles {
  return { reason: 'too-many-candles', carrier, candles: LIMITS[carrier], atLeast: true };
}

/** The violation message of a refusal, naming the count and what to do instead. */
export function tooManyCandlesMessage(refusal: TooManyCandles): string {
  const held = refusal.atLeast ? `over ${refusal.candles}` : String(refusal.candles);
  if (refusal.carrier === 'export') {
    return `the window holds ${held} candles, more than the ${MAX_EXPORT_CANDLES} one export carries: choose a larger interval or a shorter window`;
  }
  return `the window holds ${held} candles, more than the ${MAX_CANDLES} one answer carries: choose a larger interval or a shorter window, or format=csv or arrow (up to ${MAX_EXPORT_CANDLES})`;
}

/** True when `value` (read back from a store) is a `TooManyCandles`. */
export function isTooManyCandles(value: unknown): value is TooManyCandles {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return v.reason === 'too-many-candles' && (v.carrier === 'answer' || v.carrier === 'export') && Number.isSafeInteger(v.candles) && typeof v.atLeast === 'boolean';
}
