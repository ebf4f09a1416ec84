/**
 * Currencies and the rules of converting prices between them (DESIGN 25): which codes can be asked
 * for, what a sub-unit listing (GBp, ZAc, ILA) is worth, and the reference rate that converts a bar
 * of a given time. Rates are the ECB's euro reference rates (units of a currency per euro, one set per
 * business day); a pair without EUR is crossed through the euro. Rates and crosses are used exactly
 * as published and computed: nothing here rounds.
 */
import { isoDateOf, parseIsoDate, type DayNumber } from './civil-date.js';
import { InvalidRequestError } from './errors.js';
import type { components } from '../generated/api.js';
import type { HistoryInterval, Quote } from './ports/market-data.js';
import type { RateDay } from './ports/fx-rates.js';
import { DAY_MS } from './durations.js';

export type { RateDay };

/** The currencies the ECB publishes reference rates for (besides EUR itself), as it lists them. */
export const ECB_CURRENCIES: ReadonlySet<string> = new Set([
  'USD', 'JPY', 'BGN', 'CZK', 'DKK', 'GBP', 'HUF', 'PLN', 'RON', 'SEK', 'CHF', 'ISK', 'NOK', 'TRY', 'AUD', 'BRL', 'CAD', 'CNY', 'HKD', 'IDR',
  'ILS', 'INR', 'KRW', 'MXN', 'MYR', 'NZD', 'PHP', 'SGD', 'THB', 'ZAR',
]);

/** Every code `currency=` takes, sorted: EUR and the published ones. */
export const SUPPORTED_CURRENCIES: readonly string[] = ['EUR', ...ECB_CURRENCIES].sort();

/** The first business day of the reference rates. */
export const FIRST_RATE_DATE = '1999-01-04';
export const FIRST_RATE_DAY: DayNumber = parseIsoDate(FIRST_RATE_DATE)!;

/** How many calendar days back a date without a published rate may take the last published one. */
export const MAX_CARRY_DAYS = 4;

/** Listings quoted in a hundredth of a currency, as exchanges and Yahoo spell them. */
const SUB_UNITS: Readonly<Record<string, string>> = { GBp: 'GBP', GBX: 'GBP', ZAc: 'ZAR', ZAC: 'ZAR', ILA: 'ILS' };

/** A price currency as a whole currency and the factor to it (`GBp` is GBP × 0.01). */
export interface CurrencyUnit {
  code: string;
  scale: number;
}

/** The whole currency of `currency` (a sub-unit is its unit / 100); other codes are upper-cased as given. */
export function unitOf(currency: string): CurrencyUnit {
  const whole = SUB_UNITS[currency];
  return whole === undefined ? { code: currency.toUpperCase(), scale: 1 } : { code: whole, scale: 0.01 };
}

/** True for a code rates exist for (EUR or a published currency). */
export function isSupportedCurrency(code: string): boolean {
  return code === 'EUR' || ECB_CURRENCIES.has(code);
}

/** The asked `currency=` upper-cased; throws `InvalidRequestError` (422) naming the supported codes. */
export function targetCurrency(asked: string, path = 'query.currency'): string {
  const code = asked.toUpperCase();
  if (!isSupportedCurrency(code)) {
    throw new InvalidRequestError([{ path, message: `'${asked}' is not a supported currency: use one of ${SUPPORTED_CURRENCIES.join(', ')} (the ECB's euro reference rates)` }]);
  }
  return code;
}

/** The rate that converts one bar: units of the target per unit of the source, the day it was published, and whether it was carried. */
export interface DatedRate {
  rate: number;
  day: DayNumber;
  carried: boolean;
}

/**
 * The published reference rates, for lookups by day. Built once per set of days (a few thousand);
 * each lookup is a binary search.
 */
export class RateTable {
  readonly #days: Int32Array;
  readonly #rates: ReadonlyArray<ReadonlyMap<string, number>>;

  /** `days` in any order; a date that is not a real date is left out. */
  constructor(days: readonly RateDay[]) {
    const parsed = days.map((d) => ({ day: parseIsoDate(d.date), rates: d.rates })).filter((d): d is { day: number; rates: ReadonlyMap<string, number> } => d.day !== undefined);
    parsed.sort((a, b) => a.day - b.day);
    this.#days = Int32Array.from(parsed.map((d) => d.day));
    this.#rates = parsed.map((d) => d.rates);
  }

  get size(): number {
    return this.#days.length;
  }

  /** The first and last published day, or undefined when there is none. */
  get firstDay(): DayNumber | undefined {
    return this.#days[0];
  }

  get lastDay(): DayNumber | undefined {
    return this.#days[this.#days.length - 1];
  }

  /** The days in order with their rates (for storing). */
  *entries(): Iterable<{ day: DayNumber; rates: ReadonlyMap<string, number> }> {
    for (let i = 0; i < this.#days.length; i++) yield { day: this.#days[i]!, rates: this.#rates[i]! };
  }

  /**
   * Units of `to` per unit of `from` (whole currencies) on `day`: that day's published rates, else the
   * last day before it that published both, at most `MAX_CARRY_DAYS` calendar days back (`carried`).
   * Undefined when there is none that close.
   */
  rate(from: string, to: string, day: DayNumber): DatedRate | undefined {
    // A sub-unit to its own unit (GBp to GBP) needs no rate.
    if (from === to) return { rate: 1, day, carried: false };
    let i = this.#lastIndexAtOrBefore(day);
    for (; i >= 0; i--) {
      const published = this.#days[i]!;
      if (day - published > MAX_CARRY_DAYS) return undefined;
      const rates = this.#rates[i]!;
      const base = from === 'EUR' ? 1 : rates.get(from);
      const quote = to === 'EUR' ? 1 : rates.get(to);
      if (base !== undefined && quote !== undefined) return { rate: quote / base, day: published, carried: published !== day };
    }
    return undefined;
  }

  #lastIndexAtOrBefore(day: DayNumber): number {
    let lo = 0;
    let hi = this.#days.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.#days[mid]! <= day) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }
}

/** What a conversion did, as the answer's `fx` block says it. */
export interface FxSummary {
  from: string;
  to: string;
  /** Whose rates: `ecb` for history; a live quote names the provider of its FX quote. */
  source: components['schemas']['Source'];
  /** The first and last publication dates of the rates used (`YYYY-MM-DD`); null when no bar was converted. */
  first_date: string | null;
  last_date: string | null;
  /** How many bars took an earlier day's rate. */
  carried: number;
}

/** Per bar: the factor from its price to the target (NaN when no rate is close enough) and whether its rate was carried. */
export interface BarFactors {
  factors: Float64Array;
  carried: Uint8Array;
  summary: FxSummary;
}

const DAILY: ReadonlySet<HistoryInterval> = new Set(['1d', '1wk', '1mo']);

/** How far an offset is assumed to hold once it is the same at both ends (see `ZoneOffsets`). */
const OFFSET_HORIZON_MS = 60 * 86_400_000;
/** How closely a change of offset is located. */
const TRANSITION_PRECISION_MS = 60_000;

/**
 * A zone's UTC offsets over spans of time, found as bars ask for them and kept for the process: formatting
 * an instant in a zone costs about 10 µs, so 10 years of daily bars would spend 25 ms asking bar by bar.
 * An offset the same at both ends of OFFSET_HORIZON_MS holds between them (zones change theirs months
 * apart; a zone with two changes closer than that, such as Casablanca's Ramadan hour, could be an hour off
 * in between, which moves the date only of a bar within an hour of midnight); where the ends differ, the
 * change is found by bisection.
 */
class ZoneOffsets {
  readonly #format: Intl.DateTimeFormat;
  /** Spans [fromMs, toMs] of one offset, sorted by start, not overlapping. */
  readonly #spans: Array<{ fromMs: number; toMs: number; offsetMs: number }> = [];
  #last = 0;

  constructor(timeZone: string) {
    const options: Intl.DateTimeFormatOptions = { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' };
    try {
      this.#format = new Intl.DateTimeFormat('en-CA', { ...options, timeZone });
    } catch {
      // A zone this runtime does not know: its bars are dated in UTC.
      this.#format = new Intl.DateTimeFormat('en-CA', { ...options, timeZone: 'UTC' });
    }
  }

  /** The offset from UTC at `timeMs`, in milliseconds. */
  at(timeMs: number): number {
    const spans = this.#spans;
    const last = spans[this.#last];
    if (last !== undefined && timeMs >= last.fromMs && timeMs <= last.toMs) return last.offsetMs;
    let lo = 0;
    let hi = spans.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const span = spans[mid]!;
      if (timeMs < span.fromMs) hi = mid - 1;
      else if (timeMs > span.toMs) lo = mid + 1;
      else {
        this.#last = mid;
        return span.offsetMs;
      }
    }
    const offsetMs = this.exact(timeMs);
    // The span ends before the next known one begins.
    const next = spans[lo];
    let toMs = Math.min(timeMs + OFFSET_HORIZON_MS, next === undefined ? Infinity : next.fromMs - 1);
    if (this.exact(toMs) !== offsetMs) {
      let good = timeMs;
      while (toMs - good > TRANSITION_PRECISION_MS) {
        const mid = good + Math.floor((toMs - good) / 2);
        if (this.exact(mid) === offsetMs) good = mid;
        else toMs = mid;
      }
      toMs = good;
    }
    spans.splice(lo, 0, { fromMs: timeMs, toMs, offsetMs });
    this.#last = lo;
    return offsetMs;
  }

  /** The offset at `timeMs`, asked of the zone database. */
  exact(timeMs: number): number {
    const parts: Record<string, number> = {};
    for (const p of this.#format.formatToParts(timeMs)) if (p.type !== 'literal') parts[p.type] = Number(p.value);
    const local = Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!);
    return local - Math.floor(timeMs / 1000) * 1000;
  }
}

const ZONES = new Map<string, ZoneOffsets>();

function zoneOf(timeZone: string): ZoneOffsets {
  let zone = ZONES.get(timeZone);
  if (zone === undefined) {
    zone = new ZoneOffsets(timeZone);
    ZONES.set(timeZone, zone);
  }
  return zone;
}

/** The local calendar day of an instant in a zone (a daily bar's session date). */
export class LocalDays {
  readonly #zone: ZoneOffsets;

  constructor(timeZone: string) {
    this.#zone = zoneOf(timeZone);
  }

  dayOf(timeMs: number): DayNumber {
    return Math.floor((timeMs + this.#zone.at(timeMs)) / DAY_MS);
  }

  /** The zone's offset from UTC at `timeMs`, in milliseconds. */
  offsetAt(timeMs: number): number {
    return this.#zone.at(timeMs);
  }
}

/** When a day's reference rates are published: 16:00 Central European time. */
export function publishedAtMs(day: DayNumber): number {
  const noonUtc = day * DAY_MS + 12 * 3_600_000;
  return day * DAY_MS + 16 * 3_600_000 - BERLIN.offsetAt(noonUtc);
}

const BERLIN = new LocalDays('Europe/Berlin');

/** The last day whose rates are published by `timeMs`. */
export function lastPublishedDay(timeMs: number): DayNumber {
  const today = Math.floor(timeMs / DAY_MS);
  return timeMs >= publishedAtMs(today) ? today : today - 1;
}

/**
 * The factor converting each bar of `times` from `from` (a price currency, sub-units included) to
 * `to`: a daily or longer bar at its session date's rate (its start's date in `timeZone`), an
 * intraday bar at the latest rate published by its start. NaN where no rate lies within
 * `MAX_CARRY_DAYS` of the bar's day.
 */
export function barFactors(table: RateTable, times: ArrayLike<number>, interval: HistoryInterval, timeZone: string, from: string, to: string): BarFactors {
  const unit = unitOf(from);
  const n = times.length;
  const factors = new Float64Array(n);
  const carried = new Uint8Array(n);
  const local = DAILY.has(interval) ? new LocalDays(timeZone) : undefined;
  let first: number | undefined;
  let last: number | undefined;
  let carriedCount = 0;
  for (let i = 0; i < n; i++) {
    const t = times[i]!;
    const day = local ? local.dayOf(t) : lastPublishedDay(t);
    const found = table.rate(unit.code, to, day);
    if (found === undefined) {
      factors[i] = NaN;
      continue;
    }
    factors[i] = unit.scale === 1 ? found.rate : found.rate * unit.scale;
    if (found.carried) {
      carried[i] = 1;
      carriedCount++;
    }
    if (first === undefined || found.day < first) first = found.day;
    if (last === undefined || found.day > last) last = found.day;
  }
  return {
    factors,
    carried,
    summary: { from, to, source: 'ecb', first_date: first === undefined ? null : isoDateOf(first), last_date: last === undefined ? null : isoDateOf(last), carried: carriedCount },
  };
}

/** True when prices in `from` need converting to be in `to` (a sub-unit always does). */
export function needsConversion(from: string, to: string): boolean {
  const unit = unitOf(from);
  return unit.scale !== 1 || unit.code !== to;
}

/** Throws `InvalidRequestError` (422) when prices in `from` cannot be converted: the ECB publishes no rate for it. */
export function convertibleFrom(from: string, symbol: string): void {
  if (!isSupportedCurrency(unitOf(from).code)) {
    throw new InvalidRequestError([{ path: 'query.currency', message: `${symbol} is priced in ${from}, which the ECB's reference rates do not cover: its prices cannot be converted` }]);
  }
}

/**
 * Throws `InvalidRequestError` (422) when a window lies wholly before the first reference rate; a window
 * that begins before it and ends after has its earlier candles listed as missing, as any without a rate.
 */
export function afterFirstRate(span: { startMs: number; endMs: number }): void {
  if (span.endMs <= FIRST_RATE_DAY * DAY_MS) {
    throw new InvalidRequestError([{ path: 'query.currency', message: `the reference rates begin on ${FIRST_RATE_DATE}: a converted window must reach past it` }]);
  }
}

/** A live rate: units of the target per unit of the source whole currency, who quoted it and when. */
export interface LiveRate {
  rate: number;
  source: string;
  timeMs: number;
}

/**
 * `quote` (in `quote.currency`, a sub-unit included) in `to` at `live`: prices and the change times
 * the rate, the change in percent and the volume unchanged, with the `fx` block naming the rate.
 */
export function convertQuote(quote: Quote, to: string, live: LiveRate): Quote {
  const f = live.rate * unitOf(quote.currency).scale;
  const times = (v: number | null) => (v === null ? null : v * f);
  const date = new Date(live.timeMs).toISOString();
  return {
    ...quote,
    price: quote.price * f,
    change: times(quote.change),
    open: times(quote.open),
    high: times(quote.high),
    low: times(quote.low),
    prev_close: times(quote.prev_close),
    currency: to,
    fx: { from: quote.currency, to, source: live.source as FxSummary['source'], first_date: date.slice(0, 10), last_date: date.slice(0, 10), carried: 0, rate: live.rate, rate_time: date },
  };
}
