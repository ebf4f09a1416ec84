/**
 * The price basis of a history answer. Bars are kept split-adjusted (as Yahoo and Polygon give OHLC):
 * `splits` returns them as they are, `none` undoes every split after each bar (the prices printed on
 * that day), `all` also takes dividends out by scaling OHLC by adj_close / close.
 */
import type { CorporateAction, StoredCandle } from './ports/history-store.js';

export const ADJUSTMENTS = ['none', 'splits', 'all'] as const;
export type Adjustment = (typeof ADJUSTMENTS)[number];

/** Significant digits kept after scaling: enough for any price, few enough to drop float noise (0.1 * 3). */
const PRECISION = 12;

function clean(value: number): number {
  return Number(value.toPrecision(PRECISION));
}

/** `candles` (oldest first, split-adjusted) on the basis `mode`; the input is not changed. */
export function adjustCandles(candles: readonly StoredCandle[], actions: readonly CorporateAction[], mode: Adjustment): StoredCandle[] {
  if (mode === 'splits') return [...candles];
  if (mode === 'all') {
    return candles.map((c) => {
      if (c.adjClose === null || c.close === 0) return c;
      const f = c.adjClose / c.close;
      return { ...c, open: clean(c.open * f), high: clean(c.high * f), low: clean(c.low * f), close: clean(c.adjClose) };
    });
  }
  const splits = actions.filter((a): a is Extract<CorporateAction, { kind: 'split' }> => a.kind === 'split' && a.denominator > 0 && a.numerator > 0);
  if (splits.length === 0) return [...candles];
  // Walk backwards: a bar carries the product of the ratios of every split after it.
  const sorted = [...splits].sort((a, b) => a.timeMs - b.timeMs);
  const out: StoredCandle[] = new Array(candles.length);
  let factor = 1;
  let next = sorted.length - 1;
  for (let i = candles.length - 1; i >= 0; i--) {
    const c = candles[i]!;
    while (next >= 0 && sorted[next]!.timeMs > c.timeMs) {
      factor *= sorted[next]!.numerator / sorted[next]!.denominator;
      next--;
    }
    out[i] =
      factor === 1
        ? c
        : {
            ...c,
            open: clean(c.open * factor),
            high: clean(c.high * factor),
            low: clean(c.low * factor),
            close: clean(c.close * factor),
            volume: c.volume === null ? null : Math.round(c.volume / factor),
          };
  }
  return out;
}
