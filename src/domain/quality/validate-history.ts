/**
 * The one validator every upstream history answer passes before it is cached or stored (DESIGN 20).
 * Pure: bars in, bars out, with a finding for each bar it repaired, dropped or suspects.
 *
 * Checks: finite, positive prices; low <= min(open, close) <= max(open, close) <= high; volume >= 0 or
 * null; intraday bars on the interval's grid; for a listed market, bars inside (or, for intraday
 * bars, around: pre- and post-market) a session of its calendar; no duplicate or out-of-order bars;
 * nothing in the future.
 *
 * Repairs, only where certain, each a named rule: sub-unit currencies (GBp, GBX, ZAc, ILA: prices / 100,
 * the currency becomes the major unit); a bar 100x (or 0.01x) off among neighbours that agree, scaled
 * back; high and low swapped back; a step at a split ratio re-based when a known split of that ratio
 * falls on it or a second provider's bars confirm it; a zero or non-finite price rebuilt from a second
 * provider's bar of the same session. Anything else that fails is dropped.
 */
import { calendarCoverage, sessionsBetween, type MarketCode } from '../market-calendar.js';
import type { StoredCandle } from '../ports/history-store.js';
import type { HistoryInterval } from '../ports/market-data.js';
import type { BarValues, QualityFlag, QualityIssue, QualityRule } from './data-issues.js';
import { MINUTE_MS, HOUR_MS, DAY_MS } from '../durations.js';

/** Sub-unit currency codes as upstreams spell them (case matters: GBp is pence, GBP pounds), and their major unit. */
export const SUB_UNIT_CURRENCIES: Readonly<Record<string, string>> = { GBp: 'GBP', GBX: 'GBP', ZAc: 'ZAR', ZAC: 'ZAR', ILA: 'ILS' };

/** Split ratios (old shares per new share, as price before over price after) the step rule looks for. */
const SPLIT_RATIOS = [2, 3, 4, 5, 8, 10, 20, 1 / 2, 1 / 3, 1 / 4, 1 / 5, 1 / 10];
/** How close a step must be to a split ratio (relative). */
const SPLIT_TOLERANCE = 0.06;
/** How close a second provider's price must be to count as the same price (relative). */
const SAME_PRICE = 0.03;
/** A price 100x off lies within this factor of 100 (or 1/100) of its neighbours. */
const UNIT_BAND = 1.5;
/** Neighbours agree when each lies within this fraction of their median. */
const NEIGHBOURS_AGREE = 0.2;
/** A close this far from agreeing neighbours (factor) is a suspect spike. */
const SPIKE_FACTOR = 1.5;
/** A bar's price may break the high/low envelope by this fraction (rounding) before it is judged. */
const ENVELOPE_SLACK = 1e-4;
/** How far (ms) a daily bar's stamp may lie from its session's open: local midnight, UTC midnight or the open itself. */
const DAILY_STAMP_REACH = 16 * HOUR_MS;
/** How far (ms) around the regular session intraday bars may lie (pre- and post-market). */
const EXTENDED_HOURS = 8 * HOUR_MS;

const INTRADAY_GRID_MS: Partial<Record<HistoryInterval, number>> = { '1m': MINUTE_MS, '5m': 5 * MINUTE_MS, '15m': 15 * MINUTE_MS, '30m': 30 * MINUTE_MS, '1h': 15 * MINUTE_MS };
const INTERVAL_MS: Record<HistoryInterval, number> = {
  '1m': MINUTE_MS,
  '5m': 5 * MINUTE_MS,
  '15m': 15 * MINUTE_MS,
  '30m': 30 * MINUTE_MS,
  '1h': HOUR_MS,
  '1d': DAY_MS,
  '1wk': 7 * DAY_MS,
  '1mo': 31 * DAY_MS,
};

/** What the validator is told about an answer. */
export interface ValidationInput {
  interval: HistoryInterval;
  /** The currency the upstream named. */
  currency: string;
  /** The listed market whose calendar the bars must fit; undefined (or CRYPTO, FX) for none. */
  market: MarketCode | undefined;
  /** The bars as the upstream gave them. */
  candles: readonly StoredCandle[];
  /** Splits known for the symbol (from this answer and the store). */
  splits: ReadonlyArray<{ timeMs: number; numerator: number; denominator: number }>;
  /** Who gave the bars. */
  provider: string;
  nowMs: number;
  /** The same window from a second provider, when one was asked: fills bad prices and confirms splits. */
  reference?: { provider: string; candles: readonly StoredCandle[]; currency: string } | undefined;
}

/** The bars to keep, the currency they are in, and what was found. */
export interface ValidationResult {
  candles: StoredCandle[];
  currency: string;
  issues: QualityIssue[];
  /** Sessions the calendar expects between the first and last bar that the answer lacks (and no second provider filled). */
  missingSessions: number;
}

/** A bar's prices without its time. */
function valuesOf(c: StoredCandle): BarValues {
  return { open: c.open, high: c.high, low: c.low, close: c.close, adjClose: c.adjClose, volume: c.volume };
}

function scaled(c: StoredCandle, priceFactor: number): StoredCandle {
  return {
    timeMs: c.timeMs,
    open: c.open * priceFactor,
    high: c.high * priceFactor,
    low: c.low * priceFactor,
    close: c.close * priceFactor,
    adjClose: c.adjClose === null ? null : c.adjClose * priceFactor,
    volume: c.volume === null ? null : c.volume / priceFactor,
  };
}

/** Rounds away the binary noise of a division (prices keep at most 8 decimals). */
function tidy(value: number): number {
  return Math.round(value * 1e8) / 1e8;
}

function tidied(c: StoredCandle): StoredCandle {
  return { ...c, open: tidy(c.open), high: tidy(c.high), low: tidy(c.low), close: tidy(c.close), adjClose: c.adjClose === null ? null : tidy(c.adjClose), volume: c.volume };
}

const goodPrice = (v: number) => Number.isFinite(v) && v > 0;
const pricesGood = (c: StoredCandle) => goodPrice(c.open) && goodPrice(c.high) && goodPrice(c.low) && goodPrice(c.close);
const near = (a: number, b: number, tolerance: number) => Math.abs(a / b - 1) <= tolerance;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/**
 * The session a bar belongs to, as a day number, or undefined when it lies outside every session
 * the calendar knows. `undefined` calendar: no listed market, every bar belongs to its UTC day.
 */
type SessionOf = (timeMs: number) => number | undefined;

/**
 * The sessions of a market's calendar over a span of years, as sorted arrays. Built for the years the
 * bars need and grown when a later answer reaches further (a session costs two zone look-ups: the whole
 * calendar, about 9,000 sessions, took 0.6 to 0.9 s of one request's event loop).
 */
interface SessionIndex {
  starts: Float64Array;
  ends: Float64Array;
  days: Int32Array;
  /** The calendar's own span: a bar outside it is not checked against sessions. */
  firstMs: number;
  lastMs: number;
  /** The span this index was built over (within the calendar's). */
  builtFromMs: number;
  builtToMs: number;
}

const sessionIndexes = new Map<MarketCode, SessionIndex>();
/** Built a year beyond what was asked on each side, so neighbouring reads reuse it. */
const INDEX_MARGIN_MS = 366 * DAY_MS;

function sessionIndex(market: MarketCode, fromMs: number, toMs: number): SessionIndex {
  const known = sessionIndexes.get(market);
  if (known !== undefined && known.builtFromMs <= fromMs && known.builtToMs >= toMs) return known;
  const coverage = calendarCoverage(market);
  const firstMs = Date.parse(`${coverage.first}T00:00:00Z`) + DAY_MS;
  const lastMs = Date.parse(`${coverage.last}T00:00:00Z`) - DAY_MS;
  const builtFromMs = Math.max(firstMs - DAY_MS, Math.min(known?.builtFromMs ?? Infinity, fromMs - INDEX_MARGIN_MS));
  const builtToMs = Math.min(lastMs + DAY_MS, Math.max(known?.builtToMs ?? -Infinity, toMs + INDEX_MARGIN_MS));
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  const sessions = builtFromMs <= builtToMs ? sessionsBetween(market, day(builtFromMs), day(builtToMs)) : [];
  const index: SessionIndex = {
    starts: Float64Array.from(sessions, (s) => s.segments[0]!.startMs),
    ends: Float64Array.from(sessions, (s) => s.segments[s.segments.length - 1]!.endMs),
    days: Int32Array.from(sessions, (s) => s.dayNumber),
    firstMs,
    lastMs,
    builtFromMs,
    builtToMs,
  };
  sessionIndexes.set(market, index);
  return index;
}

interface SessionLocator {
  of: SessionOf;
  /** True when the calendar vouches for the date of `timeMs` (and the bars of this interval are checked against it). */
  checks: (timeMs: number) => boolean;
  /** For daily bars: the position of the session `timeMs` belongs to in the market's calendar, or undefined. */
  indexOf: (timeMs: number) => number | undefined;
  /** The day number of the session at `index`. */
  dayAt: (index: number) => number;
}

function sessionLocator(interval: HistoryInterval, market: MarketCode | undefined, spanMs: { fromMs: number; toMs: number }): SessionLocator {
  const utcDay: SessionOf = (t) => Math.floor(t / DAY_MS);
  const daily = interval === '1d';
  const intraday = INTRADAY_GRID_MS[interval] !== undefined;
  if (market === undefined || market === 'CRYPTO' || market === 'FX' || (!daily && !intraday)) return { of: utcDay, checks: () => false, indexOf: () => undefined, dayAt: () => 0 };
  const { starts, ends, days, firstMs, lastMs } = sessionIndex(market, spanMs.fromMs, spanMs.toMs);
  const last = starts.length - 1;
  // Bars come in time order: the next one's session is almost always at or just after the last one found.
  let hint = 0;
  /** The session whose open is nearest `t`. */
  const nearest = (t: number): number => {
    let lo = 0;
    let hi = last;
    if ((starts[hint] as number) <= t) {
      while (hint < last && (starts[hint + 1] as number) <= t) hint++;
      if (hint === last || (starts[hint + 1] as number) > t) {
        lo = hint;
        hi = Math.min(last, hint + 1);
      }
    }
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((starts[mid] as number) < t) lo = mid + 1;
      else hi = mid;
    }
    const found = lo > 0 && t - (starts[lo - 1] as number) <= (starts[lo] as number) - t ? lo - 1 : lo;
    hint = found;
    return found;
  };
  const of: SessionOf = (t) => {
    if (last < 0) return undefined;
    const i = nearest(t);
    if (daily) return Math.abs((starts[i] as number) - t) <= DAILY_STAMP_REACH ? days[i] : undefined;
    // Intraday: the session whose extended hours hold the bar (the one before may still be in its post-market).
    for (const j of [i, i - 1]) {
      if (j >= 0 && t >= (starts[j] as number) - EXTENDED_HOURS && t < (ends[j] as number) + EXTENDED_HOURS) return days[j];
    }
    return undefined;
  };
  const indexOf = (t: number): number | undefined => {
    if (!daily || last < 0) return undefined;
    const i = nearest(t);
    return Math.abs((starts[i] as number) - t) <= DAILY_STAMP_REACH ? i : undefined;
  };
  return { of, checks: (t) => t >= firstMs && t <= lastMs, indexOf, dayAt: (i) => days[i] as number };
}

/** Validates and repairs one answer; see the module comment. Never throws. */
export function validateHistory(input: ValidationInput): ValidationResult {
  const { interval, provider } = input;
  const issues: QualityIssue[] = [];
  const note = (c: StoredCandle | null, timeMs: number, rule: QualityRule, action: QualityIssue['action'], after: StoredCandle | null, flag?: QualityFlag, others: string[] = []) => {
    issues.push({ timeMs, rule, action, before: c === null ? null : valuesOf(c), after: after === null ? null : valuesOf(after), ...(flag !== undefined ? { flag } : {}), providers: [provider, ...others] });
  };

  // Sub-unit currency: every price of the answer is in hundredths of the major unit.
  let currency = input.currency;
  let bars: StoredCandle[] = input.candles.slice();
  const major = SUB_UNIT_CURRENCIES[currency];
  if (major !== undefined) {
    bars = bars.map((c) => {
      const after = tidied(scaled(c, 0.01));
      const kept = { ...after, volume: c.volume };
      note(c, c.timeMs, 'sub_unit_currency', 'repaired', kept, 'repaired_currency');
      return kept;
    });
    currency = major;
  }

  // Order and duplicates: sorted by time; of two bars at one time the later in the answer wins.
  let ordered = true;
  for (let i = 1; i < bars.length; i++) if ((bars[i] as StoredCandle).timeMs <= (bars[i - 1] as StoredCandle).timeMs) ordered = false;
  if (!ordered) {
    const byTime = new Map<number, StoredCandle>();
    bars.forEach((c, i) => {
      const previous = byTime.get(c.timeMs);
      if (previous !== undefined) note(previous, c.timeMs, 'duplicate', 'dropped', null);
      else if (i > 0 && c.timeMs < (bars[i - 1] as StoredCandle).timeMs) note(c, c.timeMs, 'out_of_order', 'repaired', c);
      byTime.set(c.timeMs, c);
    });
    bars = [...byTime.values()].sort((a, b) => a.timeMs - b.timeMs);
  }

  // Time: nothing in the future, intraday bars on the grid, listed markets' bars in a session.
  const grid = INTRADAY_GRID_MS[interval];
  let spanFromMs = Infinity;
  let spanToMs = -Infinity;
  for (const c of [...bars, ...(input.reference?.candles ?? [])]) {
    if (!Number.isFinite(c.timeMs)) continue;
    if (c.timeMs < spanFromMs) spanFromMs = c.timeMs;
    if (c.timeMs > spanToMs) spanToMs = c.timeMs;
  }
  const sessions = sessionLocator(interval, input.market, spanFromMs <= spanToMs ? { fromMs: spanFromMs, toMs: spanToMs } : { fromMs: input.nowMs, toMs: input.nowMs });
  const formingFromMs = input.nowMs - INTERVAL_MS[interval];
  // A second provider's bars by session, to fill and to confirm.
  const reference = new Map<number, StoredCandle>();
  if (input.reference !== undefined && (SUB_UNIT_CURRENCIES[input.reference.currency] ?? input.reference.currency) === currency) {
    const factor = SUB_UNIT_CURRENCIES[input.reference.currency] !== undefined ? 0.01 : 1;
    for (const c of input.reference.candles) {
      const day = interval === '1d' ? sessions.of(c.timeMs) : c.timeMs;
      if (day !== undefined && pricesGood(c)) reference.set(day, factor === 1 ? c : scaled(c, factor));
    }
  }
  const referenceOf = (c: StoredCandle) => {
    const day = interval === '1d' ? sessions.of(c.timeMs) : c.timeMs;
    return day === undefined ? undefined : reference.get(day);
  };
  const others = input.reference !== undefined ? [input.reference.provider] : [];

  // Time (nothing in the future, intraday bars on the grid, listed markets' bars in a session), then
  // single bars: volume, bad prices (filled or dropped), high/low order. One pass.
  const checked: StoredCandle[] = [];
  const futureFromMs = input.nowMs + MINUTE_MS;
  for (let i = 0; i < bars.length; i++) {
    const c = bars[i] as StoredCandle;
    const t = c.timeMs;
    if (t > futureFromMs) {
      note(c, t, 'future', 'dropped', null);
      continue;
    }
    if (grid !== undefined && t % grid !== 0 && !(i === bars.length - 1 && t >= formingFromMs)) {
      note(c, t, 'off_grid', 'dropped', null);
      continue;
    }
    if (sessions.checks(t) && sessions.of(t) === undefined) {
      note(c, t, 'outside_session', 'dropped', null);
      continue;
    }
    // The common case, kept cheap: nothing in judgeBar applies to a bar that passes this.
    if (c.low > 0 && c.low <= c.open && c.low <= c.close && c.open <= c.high && c.close <= c.high && c.high < Infinity && (c.volume === null || c.volume >= 0)) {
      checked.push(c);
      continue;
    }
    const kept = judgeBar(c, input, referenceOf, others, note);
    if (kept !== undefined) checked.push(kept);
  }
  bars = checked;

  // Rules between neighbours: only when some bar strays more than 20 % from an adjacent one.
  let calm = true;
  for (let i = 0; i < bars.length && calm; i++) calm = plain(bars, i) && ((bars[i] as StoredCandle).adjClose === null || plainAdj(bars, i));
  if (!calm) {
    bars = repairUnits(bars, note);
    bars = repairSteps(bars, input.splits, referenceOf, input.reference?.provider, note);
    markSpikes(bars, note);
  }
  // Sessions the calendar expects between the first and the last bar, absent from the answer: filled
  // from a second provider's bar of that session when one was given, else counted (the caller may ask one).
  let missingSessions = 0;
  const firstIndex = bars.length > 1 && sessions.checks((bars[0] as StoredCandle).timeMs) ? sessions.indexOf((bars[0] as StoredCandle).timeMs) : undefined;
  const lastIndex = firstIndex === undefined ? undefined : sessions.indexOf((bars[bars.length - 1] as StoredCandle).timeMs);
  if (firstIndex !== undefined && lastIndex !== undefined && lastIndex - firstIndex + 1 > bars.length) {
    const whole: StoredCandle[] = [];
    let previous = firstIndex - 1;
    for (const c of bars) {
      const index = sessions.indexOf(c.timeMs);
      for (let k = previous + 1; index !== undefined && k < index; k++) {
        const other = reference.get(sessions.dayAt(k));
        if (other === undefined) {
          missingSessions++;
          continue;
        }
        note(null, other.timeMs, 'missing_session', 'repaired', other, `filled_from_${input.reference!.provider}`, others);
        whole.push(other);
      }
      if (index !== undefined) previous = index;
      whole.push(c);
    }
    bars = whole;
  }
  return { candles: bars, currency, issues, missingSessions };
}

/** One bar that failed the quick check: volume, bad prices (filled or dropped), high/low order. Undefined when dropped. */
function judgeBar(c: StoredCandle, input: ValidationInput, referenceOf: (c: StoredCandle) => StoredCandle | undefined, others: string[], note: Note): StoredCandle | undefined {
  let bar = c;
  if (bar.volume !== null && !(Number.isFinite(bar.volume) && bar.volume >= 0)) {
    const after = { ...bar, volume: null };
    note(bar, bar.timeMs, 'negative_volume', 'repaired', after);
    bar = after;
  }
  if (!pricesGood(bar)) {
    const other = referenceOf(bar);
    if (other === undefined) return note(bar, bar.timeMs, 'non_positive_price', 'dropped', null, undefined, others), undefined;
    const after: StoredCandle = { ...other, timeMs: bar.timeMs, adjClose: bar.adjClose !== null && goodPrice(bar.adjClose) ? bar.adjClose : other.adjClose, volume: other.volume ?? bar.volume };
    note(bar, bar.timeMs, 'filled_price', 'repaired', after, `filled_from_${input.reference!.provider}`, others);
    bar = after;
  }
  if (bar.high < bar.low) {
    const swapped = { ...bar, high: bar.low, low: bar.high };
    if (envelopeHolds(swapped, 0)) {
      note(bar, bar.timeMs, 'swapped_high_low', 'repaired', swapped, 'repaired_ohlc');
      return swapped;
    }
  }
  if (envelopeHolds(bar, 0)) return bar;
  if (envelopeHolds(bar, ENVELOPE_SLACK)) {
    const after = { ...bar, high: Math.max(bar.high, bar.open, bar.close), low: Math.min(bar.low, bar.open, bar.close) };
    note(bar, bar.timeMs, 'ohlc_envelope', 'repaired', after, 'repaired_ohlc');
    return after;
  }
  return note(bar, bar.timeMs, 'ohlc_order', 'dropped', null), undefined;
}

function envelopeHolds(c: StoredCandle, slack: number): boolean {
  const top = c.high * (1 + slack);
  const bottom = c.low * (1 - slack);
  return bottom <= Math.min(c.open, c.close) && Math.max(c.open, c.close) <= top && c.low <= c.high;
}

type Note = (c: StoredCandle | null, timeMs: number, rule: QualityRule, action: QualityIssue['action'], after: StoredCandle | null, flag?: QualityFlag, others?: string[]) => void;

/** The closes of up to three bars either side of `i`, when they agree with one another; else undefined. */
function agreeingNeighbours(bars: readonly StoredCandle[], i: number, field: (c: StoredCandle) => number | null): number | undefined {
  const values: number[] = [];
  for (let j = Math.max(0, i - 3); j <= Math.min(bars.length - 1, i + 3); j++) {
    const v = j === i ? null : field(bars[j] as StoredCandle);
    if (v !== null) values.push(v);
  }
  if (values.length < 2) return undefined;
  const mid = median(values);
  return values.every((v) => near(v, mid, NEIGHBOURS_AGREE)) ? mid : undefined;
}

/** True when every price of bar `i` lies within 20 % of both adjacent closes: no rule below can apply (the common case, kept cheap). */
function plain(bars: readonly StoredCandle[], i: number): boolean {
  const c = bars[i] as StoredCandle;
  const lo = Math.min(c.open, c.low, c.close);
  const hi = Math.max(c.open, c.high, c.close);
  const p = bars[i - 1];
  const n = bars[i + 1];
  return (p === undefined || (lo >= p.close * 0.8 && hi <= p.close * 1.2)) && (n === undefined || (lo >= n.close * 0.8 && hi <= n.close * 1.2));
}

function plainAdj(bars: readonly StoredCandle[], i: number): boolean {
  const v = (bars[i] as StoredCandle).adjClose as number;
  const p = bars[i - 1]?.adjClose;
  const n = bars[i + 1]?.adjClose;
  return (p === undefined || p === null || (v >= p * 0.8 && v <= p * 1.2)) && (n === undefined || n === null || (v >= n * 0.8 && v <= n * 1.2));
}

/** A price 100x or 0.01x its agreeing neighbours' level, scaled back (each field on its own). */
function repairUnits(bars: StoredCandle[], note: Note): StoredCandle[] {
  if (bars.length < 3) return bars;
  const out = bars.slice();
  for (let i = 0; i < bars.length; i++) {
    const c = bars[i] as StoredCandle;
    if (plain(bars, i) && (c.adjClose === null || plainAdj(bars, i))) continue;
    const level = agreeingNeighbours(bars, i, (b) => b.close);
    if (level === undefined) continue;
    const fix = (v: number) => {
      const r = v / level;
      if (r >= 100 / UNIT_BAND && r <= 100 * UNIT_BAND) return tidy(v / 100);
      if (r >= 1 / (100 * UNIT_BAND) && r <= UNIT_BAND / 100) return tidy(v * 100);
      return v;
    };
    const after = { ...c, open: fix(c.open), high: fix(c.high), low: fix(c.low), close: fix(c.close) };
    if (c.adjClose !== null) {
      const adjLevel = agreeingNeighbours(bars, i, (b) => b.adjClose);
      const r = adjLevel === undefined ? 1 : c.adjClose / adjLevel;
      after.adjClose = r >= 100 / UNIT_BAND && r <= 100 * UNIT_BAND ? tidy(c.adjClose / 100) : r >= 1 / (100 * UNIT_BAND) && r <= UNIT_BAND / 100 ? tidy(c.adjClose * 100) : c.adjClose;
    }
    if (after.open === c.open && after.high === c.high && after.low === c.low && after.close === c.close && after.adjClose === c.adjClose) continue;
    const ordered = { ...after, high: Math.max(after.high, after.low), low: Math.min(after.high, after.low) };
    if (!envelopeHolds(ordered, ENVELOPE_SLACK)) continue;
    note(c, c.timeMs, 'unit_100x', 'repaired', ordered, 'repaired_unit');
    out[i] = ordered;
  }
  return out;
}

/**
 * A lasting step between two bars at a split ratio, with no split applied: the bars before it are
 * re-based when a known split of that ratio falls on the step, or a second provider's bar before the
 * step already lies at the new level. An unconfirmed step is left as it is and marked suspect.
 */
function repairSteps(
  bars: StoredCandle[],
  splits: ValidationInput['splits'],
  referenceOf: (c: StoredCandle) => StoredCandle | undefined,
  referenceProvider: string | undefined,
  note: Note,
): StoredCandle[] {
  let out = bars;
  for (let i = 1; i < out.length; i++) {
    const before = out[i - 1] as StoredCandle;
    const after = out[i] as StoredCandle;
    const step = before.close / after.open;
    // No split ratio lies within a third of 1: the common case ends here.
    if (step > 0.6 && step < 1.6) continue;
    const ratio = SPLIT_RATIOS.find((k) => near(step, k, SPLIT_TOLERANCE));
    if (ratio === undefined) continue;
    // Lasting: the bars around the step stay at their own side's level.
    const lasting =
      out.slice(i + 1, i + 3).every((c) => near(c.close, after.close, 0.15)) && out.slice(Math.max(0, i - 3), i - 1).every((c) => near(c.close, before.close, 0.15));
    if (!lasting) continue;
    const known = splits.some((s) => Math.abs(s.timeMs - after.timeMs) <= DAY_MS && s.numerator > 0 && s.denominator > 0 && near(s.numerator / s.denominator, ratio, SPLIT_TOLERANCE));
    const other = referenceOf(before);
    const confirmed = other !== undefined && near(other.close, before.close / ratio, SAME_PRICE);
    if (!known && !confirmed) {
      note(after, after.timeMs, 'spike', 'suspect', after, 'suspect_spike');
      continue;
    }
    const others = confirmed && !known && referenceProvider !== undefined ? [referenceProvider] : [];
    out = out.map((c, j) => {
      if (j >= i) return c;
      const rebased = tidied(scaled(c, 1 / ratio));
      note(c, c.timeMs, 'unannounced_split', 'repaired', rebased, 'repaired_split', others);
      return rebased;
    });
  }
  return out;
}

/** A close far from neighbours that agree on either side, not explained by any rule: kept, marked suspect. */
function markSpikes(bars: readonly StoredCandle[], note: Note): void {
  if (bars.length < 3) return;
  for (let i = 0; i < bars.length; i++) {
    const c = bars[i] as StoredCandle;
    if (plain(bars, i)) continue;
    const level = agreeingNeighbours(bars, i, (b) => b.close);
    if (level === undefined) continue;
    const r = c.close / level;
    if (r > SPIKE_FACTOR || r < 1 / SPIKE_FACTOR) note(c, c.timeMs, 'spike', 'suspect', c, 'suspect_spike');
  }
}
