/**
 * How long stored candles are kept, per interval (HISTORY_KEEP_<INTERVAL>, DESIGN 27). A keep is a
 * whole number of days, weeks or years (`90d`, `12w`, `2y`; a year is 365 days) or `forever`.
 *
 * Defaults: daily and longer forever (a series is a few thousand rows a decade). One-minute bars 2
 * years: they are the bulk of a store (about 100,000 rows a year for a stock, 525,000 for a coin) and
 * upstreams keep only their last weeks, so what is kept is what an operator decides to keep. The other
 * intraday intervals are kept as long as costs no more rows than the one-minute bars' 2 years: five-minute
 * bars 10 years, and 15 minutes and longer forever (30 years of 15-minute bars is 2 years of 1-minute ones).
 */
import type { HistoryInterval } from './ports/market-data.js';
import { DAY_MS } from './durations.js';

/** Every interval the store keeps, in the order the variables are documented. */
export const KEPT_INTERVALS: readonly HistoryInterval[] = ['1m', '5m', '15m', '30m', '1h', '1d', '1wk', '1mo'];

/** The variable that sets the keep of `interval`: `HISTORY_KEEP_1M`, ..., `HISTORY_KEEP_1MO`. */
export function keepVariable(interval: HistoryInterval): string {
  return `HISTORY_KEEP_${interval.toUpperCase()}`;
}

/** The keep of each interval when its variable is unset. */
export const DEFAULT_KEEP: Readonly<Record<HistoryInterval, string>> = {
  '1m': '2y',
  '5m': '10y',
  '15m': 'forever',
  '30m': 'forever',
  '1h': 'forever',
  '1d': 'forever',
  '1wk': 'forever',
  '1mo': 'forever',
};

const UNIT_DAYS = { d: 1, w: 7, y: 365 } as const;
/** The longest finite keep: anything longer is `forever`. */
const MAX_DAYS = 1000 * 365;

/** What a keep is not, said as config errors say it. */
export const KEEP_FORMAT = 'must be a whole number of days, weeks or years (90d, 12w, 2y) or forever';

/** A keep in milliseconds, `null` for `forever`, or `undefined` when `text` is not a keep. */
export function parseKeep(text: string): number | null | undefined {
  const value = text.trim().toLowerCase();
  if (value === 'forever') return null;
  const match = /^(\d{1,6})\s*([dwy])$/.exec(value);
  if (match === null) return undefined;
  const days = Number(match[1]) * UNIT_DAYS[match[2] as keyof typeof UNIT_DAYS];
  return days >= 1 && days <= MAX_DAYS ? days * DAY_MS : undefined;
}

/** A keep as an operator writes it: `730 days`, or `forever`. */
export function describeKeep(keepMs: number | null): string {
  return keepMs === null ? 'forever' : `${Math.round(keepMs / DAY_MS)} days`;
}
