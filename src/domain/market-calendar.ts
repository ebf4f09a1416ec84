/**
 * The trading calendar: which markets are open at an instant, and when each one next opens and closes.
 *
 * Pure and local (no I/O): regular hours, weekends, and each exchange's holidays, early closes and
 * lunch breaks (exchange-holidays.ts: US = XNYS, UK = XLON, DE = XETR, EU = XPAR, JP = XTKS, HK = XHKG,
 * CN = XSHG). Crypto never closes; FX trades 24/5. All wall-time arithmetic in the exchanges' zones goes
 * through luxon, which follows the IANA rules (daylight saving included).
 */
import { DateTime, IANAZone } from 'luxon';
import { specialDayOf, hongKongOpen, tokyoClose, type ExchangeCode } from './exchange-holidays.js';
import { CHINESE_FESTIVAL_YEARS, CN_CLOSURES_LAST_YEAR } from './chinese-holiday-tables.js';
import { isoDateOf, parseIsoDate, weekdayOf, type DayNumber } from './civil-date.js';
import type { InstrumentType, MarketState } from './ports/market-data.js';
import { DAY_MS } from './durations.js';

/** The markets the calendar knows. */
export type MarketCode = 'US' | 'UK' | 'DE' | 'EU' | 'JP' | 'HK' | 'CN' | 'CRYPTO' | 'FX';

/** A market's identity. */
export interface MarketInfo {
  code: MarketCode;
  name: string;
  /** IANA time zone the market's hours are written in. */
  timezone: string;
}

/** A market's state at an instant. */
export interface MarketStatus {
  market: MarketCode;
  name: string;
  /** IANA time zone. */
  timezone: string;
  state: MarketState;
  /** The next regular open strictly after the instant; null for a market that never closes. */
  nextOpen: Date | null;
  /** The end of the current regular session when open, else the close of the next one; null for a market that never closes. */
  nextClose: Date | null;
  /** The name of the holiday the market is closed for today (its own zone's date); null on any other day. */
  holiday: string | null;
}

/** Part of a trading day during which the market trades continuously: `[startMs, endMs)`. */
export interface TradingSegment {
  startMs: number;
  endMs: number;
}

/** One trading day's regular session: one segment, or two around a lunch break. */
export interface TradingSession {
  /** The trading date in the market's zone, `YYYY-MM-DD` (for FX, the New York date the session ends on). */
  date: string;
  /** Whole days from 1970-01-01 to `date`: a stable number for the trading day. */
  dayNumber: number;
  /** Ascending, non-overlapping: two segments around a lunch break, one otherwise (and on half days). */
  segments: readonly TradingSegment[];
  /** The reason for a shortened session (an early close), else undefined. */
  earlyClose?: string;
}

/** Every market, in the order `allMarketStatuses` reports them. */
export const MARKETS: readonly MarketInfo[] = [
  { code: 'US', name: 'New York Stock Exchange and Nasdaq', timezone: 'America/New_York' },
  { code: 'UK', name: 'London Stock Exchange', timezone: 'Europe/London' },
  { code: 'DE', name: 'Deutsche Börse Xetra', timezone: 'Europe/Berlin' },
  { code: 'EU', name: 'Euronext', timezone: 'Europe/Paris' },
  { code: 'JP', name: 'Tokyo Stock Exchange', timezone: 'Asia/Tokyo' },
  { code: 'HK', name: 'Hong Kong Stock Exchange', timezone: 'Asia/Hong_Kong' },
  { code: 'CN', name: 'Shanghai and Shenzhen Stock Exchanges', timezone: 'Asia/Shanghai' },
  { code: 'CRYPTO', name: 'Cryptocurrencies', timezone: 'UTC' },
  { code: 'FX', name: 'Foreign exchange', timezone: 'America/New_York' },
];

/** Wall-clock time of day in minutes after midnight. */
type WallMinutes = number;

/** How a market's trading days look, in its own zone. */
interface MarketHours {
  /** Trading segments of one trading date as [start, end) wall times; days offsets let a segment start the day before. */
  segments: ReadonlyArray<{ fromDay: number; from: WallMinutes; toDay: number; to: WallMinutes }>;
  /** ISO weekdays (1 = Monday) that are trading dates. */
  weekdays: readonly number[];
  /** Extended sessions around the regular one, as wall times of the same date. */
  extended?: { preFrom: WallMinutes; postTo: WallMinutes };
}

const hm = (hours: number, minutes = 0): WallMinutes => hours * 60 + minutes;
const WEEKDAYS = [1, 2, 3, 4, 5];
const day = (from: WallMinutes, to: WallMinutes) => ({ fromDay: 0, from, toDay: 0, to });

const HOURS: Record<MarketCode, MarketHours> = {
  US: { segments: [day(hm(9, 30), hm(16))], weekdays: WEEKDAYS, extended: { preFrom: hm(4), postTo: hm(20) } },
  UK: { segments: [day(hm(8), hm(16, 30))], weekdays: WEEKDAYS },
  DE: { segments: [day(hm(9), hm(17, 30))], weekdays: WEEKDAYS },
  EU: { segments: [day(hm(9), hm(17, 30))], weekdays: WEEKDAYS },
  // Tokyo closed at 15:00 until 2024-11-04 and Hong Kong opened at 10:00 until 2011-03-04: see regularSegments.
  JP: { segments: [day(hm(9), hm(11, 30)), day(hm(12, 30), hm(15, 30))], weekdays: WEEKDAYS },
  HK: { segments: [day(hm(9, 30), hm(12)), day(hm(13), hm(16))], weekdays: WEEKDAYS },
  CN: { segments: [day(hm(9, 30), hm(11, 30)), day(hm(13), hm(15))], weekdays: WEEKDAYS },
  // Crypto trades around the clock; its trading days are UTC days, the way daily candles are cut.
  CRYPTO: { segments: [{ fromDay: 0, from: 0, toDay: 1, to: 0 }], weekdays: [1, 2, 3, 4, 5, 6, 7] },
  // FX trades from Sunday 17:00 to Friday 17:00 New York time; each trading date runs from 17:00 the
  // evening before (the conventional New York roll), so Monday's session starts on Sunday evening.
  FX: { segments: [{ fromDay: -1, from: hm(17), toDay: 0, to: hm(17) }], weekdays: WEEKDAYS },
};

const INFO = new Map(MARKETS.map((market) => [market.code, market]));
/** Zone objects made once: handing luxon a zone name makes it validate the name on every call. */
const ZONES = new Map(MARKETS.map((market) => [market.code, IANAZone.create(market.timezone)]));

function zoneOf(code: MarketCode): IANAZone {
  const zone = ZONES.get(code);
  if (!zone) throw new Error(`Unknown market ${code}`);
  return zone;
}

function infoOf(code: MarketCode): MarketInfo {
  const info = INFO.get(code);
  if (!info) throw new Error(`Unknown market ${code}`);
  return info;
}

/** Epoch ms of the wall time `minutes` after midnight of the civil date `dayNumber` in `zone` (DST-aware, via luxon). */
function wallTime(zone: IANAZone, dayNumber: number, minutes: WallMinutes): number {
  const civil = new Date(dayNumber * DAY_MS);
  return DateTime.fromObject(
    { year: civil.getUTCFullYear(), month: civil.getUTCMonth() + 1, day: civil.getUTCDate(), hour: Math.floor(minutes / 60), minute: minutes % 60 },
    { zone },
  ).toMillis();
}

/**
 * Sessions are a pure function of (market, date), history asks for thousands of them at a time, and
 * each costs a few zone look-ups: a memo per market keeps repeated reads cheap. It is bounded by
 * clearing, which at 40,000 trading days (over a century) per market does not happen in practice.
 */
const sessionMemo = new Map<MarketCode, Map<number, TradingSession | null>>(MARKETS.map((market) => [market.code, new Map()]));
const SESSION_MEMO_MAX = 40_000;

const EXCHANGES: ReadonlySet<MarketCode> = new Set<ExchangeCode>(['US', 'UK', 'DE', 'EU', 'JP', 'HK', 'CN']);

function isExchange(code: MarketCode): code is ExchangeCode {
  return EXCHANGES.has(code);
}

/** The wall-time segments of a regular trading date; the hours some exchanges changed over the years. */
function regularSegments(code: MarketCode, dayNumber: number): MarketHours['segments'] {
  const segments = HOURS[code].segments;
  if (code === 'HK') return segments.map((s, i) => (i === 0 ? { ...s, from: hongKongOpen(dayNumber) } : s));
  if (code === 'JP') return segments.map((s, i) => (i === segments.length - 1 ? { ...s, to: tokyoClose(dayNumber) } : s));
  return segments;
}

/** The session of the trading date `dayNumber`, or undefined when that date does not trade (weekend or holiday). */
function sessionOn(code: MarketCode, dayNumber: number): TradingSession | undefined {
  const memo = sessionMemo.get(code) ?? new Map<number, TradingSession | null>();
  const known = memo.get(dayNumber);
  if (known !== undefined) return known ?? undefined;
  const hours = HOURS[code];
  const zone = zoneOf(code);
  let session: TradingSession | null = null;
  const special = isExchange(code) ? specialDayOf(code, dayNumber) : undefined;
  if (hours.weekdays.includes(weekdayOf(dayNumber)) && special?.kind !== 'closed') {
    let segments = regularSegments(code, dayNumber);
    const first = segments[0];
    // A half day is one stretch from the regular open to the early close, without the lunch break.
    if (special?.kind === 'early-close' && first) segments = [{ ...first, toDay: first.fromDay, to: special.close }];
    session = {
      date: isoDateOf(dayNumber),
      dayNumber,
      segments: segments.map((s) => ({
        startMs: wallTime(zone, dayNumber + s.fromDay, s.from),
        endMs: wallTime(zone, dayNumber + s.toDay, s.to),
      })),
      ...(special?.kind === 'early-close' ? { earlyClose: special.name } : {}),
    };
  }
  if (memo.size >= SESSION_MEMO_MAX) memo.clear();
  memo.set(dayNumber, session);
  return session ?? undefined;
}

/** The holiday `code` is closed for on the trading date `dayNumber`, or undefined (a weekend is no holiday). */
export function holidayOn(code: MarketCode, dayNumber: DayNumber): string | undefined {
  if (!isExchange(code)) return undefined;
  const special = specialDayOf(code, dayNumber);
  return special?.kind === 'closed' ? special.name : undefined;
}

/**
 * The trading dates the calendar vouches for, `YYYY-MM-DD`: from 2000, and for Hong Kong and the
 * mainland only as far as their lunisolar and announced-closure tables reach (rules would miss the
 * Chinese festivals). Rule-based calendars project into any year, but past about a decade ahead they
 * are guesses about governments; the bound also caps what the session memo can be made to hold.
 */
export function calendarCoverage(code: MarketCode): { first: string; last: string } {
  if (code === 'HK') return { first: '2000-01-01', last: `${CHINESE_FESTIVAL_YEARS.last}-12-31` };
  if (code === 'CN') return { first: '2000-01-01', last: `${CN_CLOSURES_LAST_YEAR}-12-31` };
  return { first: '2000-01-01', last: '2035-12-31' };
}

/** The market with this code (case-sensitive), or undefined. */
export function marketInfo(code: string): MarketInfo | undefined {
  return INFO.get(code as MarketCode);
}

/**
 * The sessions of `code` whose trading dates lie from `first` to `last` (`YYYY-MM-DD`, inclusive),
 * ascending: each weekday that is not a holiday (every day for crypto). Throws on a date that is not
 * a real calendar date.
 */
export function sessionsBetween(code: MarketCode, first: string, last: string): TradingSession[] {
  const from = parseIsoDate(first);
  const to = parseIsoDate(last);
  if (from === undefined || to === undefined) throw new Error(`Not a calendar date: ${from === undefined ? first : last}`);
  const sessions: TradingSession[] = [];
  for (let dayNumber = from; dayNumber <= to; dayNumber++) {
    const session = sessionOn(code, dayNumber);
    if (session) sessions.push(session);
  }
  return sessions;
}

/**
 * The regular sessions of `code` that overlap `[fromMs, toMs)`, ascending. For CRYPTO, every UTC day.
 * Holidays and early closes shape the sessions.
 */
export function tradingSessions(code: MarketCode, fromMs: number, toMs: number): TradingSession[] {
  const sessions: TradingSession[] = [];
  // A trading date is at most a day away from the UTC date of an instant in it (FX sessions start the
  // evening before), so two dates of margin either side find every overlapping session.
  const lastDay = Math.floor(toMs / DAY_MS) + 2;
  for (let dayNumber = Math.floor(fromMs / DAY_MS) - 2; dayNumber <= lastDay; dayNumber++) {
    const session = sessionOn(code, dayNumber);
    const first = session?.segments[0];
    const last = session?.segments[session.segments.length - 1];
    if (session && first && last && first.startMs < toMs && last.endMs > fromMs) sessions.push(session);
  }
  return sessions;
}

/** The most days without a session: a mainland golden week with its weekends (17 days, as in 2000's Spring Festival), with margin. */
const MAX_GAP_DAYS = 21;

/**
 * Segments of the dates from just before `atMs` on, with back-to-back segments joined (FX trades
 * Sunday to Friday without a break), up to and including the first complete span that starts after
 * `atMs`: enough for the current span and the next one.
 */
function openSpans(code: MarketCode, atMs: number): TradingSegment[] {
  const spans: TradingSegment[] = [];
  // A trading date is at most a day away from the UTC date of an instant in it (FX starts the evening before).
  const firstDay = Math.floor(atMs / DAY_MS) - 2;
  for (let dayNumber = firstDay; dayNumber <= firstDay + MAX_GAP_DAYS + 4; dayNumber++) {
    const session = sessionOn(code, dayNumber);
    for (const segment of session?.segments ?? []) {
      const previous = spans[spans.length - 1];
      if (previous && previous.endMs === segment.startMs) {
        previous.endMs = segment.endMs;
        continue;
      }
      // A new span begins, so the one before it is complete: when that one starts after `atMs`, it is the next.
      if (previous && previous.startMs > atMs) return spans;
      spans.push({ ...segment });
    }
  }
  return spans;
}

/** The state of `code` at `atMs`, with its next open and close. */
export function marketStatus(code: MarketCode, atMs: number): MarketStatus {
  const info = infoOf(code);
  const base = { market: info.code, name: info.name, timezone: info.timezone };
  if (code === 'CRYPTO') return { ...base, state: 'open', nextOpen: null, nextClose: null, holiday: null };

  const spans = openSpans(code, atMs);
  const current = spans.find((span) => span.startMs <= atMs && atMs < span.endMs);
  const next = spans.find((span) => span.startMs > atMs);
  const nextOpen = next ? new Date(next.startMs) : null;
  if (current) return { ...base, state: 'open', nextOpen, nextClose: new Date(current.endMs), holiday: null };
  const nextClose = next ? new Date(next.endMs) : null;
  // The local date is within a day of the UTC one: without a holiday that near (most closed hours)
  // and without extended hours, the zone conversion is not needed.
  const utcDay = Math.floor(atMs / DAY_MS);
  const holidayNear = holidayOn(code, utcDay - 1) !== undefined || holidayOn(code, utcDay) !== undefined || holidayOn(code, utcDay + 1) !== undefined;
  if (!holidayNear && !HOURS[code].extended) return { ...base, state: 'closed', nextOpen, nextClose, holiday: null };
  const local = DateTime.fromMillis(atMs, { zone: zoneOf(code) });
  const today = Math.floor(Date.UTC(local.year, local.month - 1, local.day) / DAY_MS);
  return { ...base, state: extendedState(code, atMs, local, today), nextOpen, nextClose, holiday: holidayOn(code, today) ?? null };
}

/** `pre` or `post` when `atMs` falls in the market's extended hours of a trading date (not a holiday), else `closed`. */
function extendedState(code: MarketCode, atMs: number, local: DateTime, today: DayNumber): MarketState {
  const hours = HOURS[code];
  if (!hours.extended) return 'closed';
  const session = sessionOn(code, today);
  const open = session?.segments[0];
  const close = session?.segments[session.segments.length - 1];
  if (!open || !close) return 'closed';
  const minutes = local.hour * 60 + local.minute;
  if (minutes >= hours.extended.preFrom && atMs < open.startMs) return 'pre';
  if (atMs >= close.endMs && minutes < hours.extended.postTo) return 'post';
  return 'closed';
}

/** The status of every market of `MARKETS`, in that order. */
export function allMarketStatuses(atMs: number): MarketStatus[] {
  return MARKETS.map((market) => marketStatus(market.code, atMs));
}

const MARKET_OF_ZONE: Readonly<Record<string, MarketCode>> = {
  'America/New_York': 'US',
  'America/Chicago': 'US',
  'Europe/London': 'UK',
  'Europe/Berlin': 'DE',
  'Europe/Paris': 'EU',
  'Europe/Amsterdam': 'EU',
  'Europe/Brussels': 'EU',
  'Europe/Madrid': 'EU',
  // Milan (Borsa Italiana, part of Euronext) has no zone of its own in IANA: it is Europe/Rome.
  'Europe/Rome': 'EU',
  'Asia/Tokyo': 'JP',
  'Asia/Hong_Kong': 'HK',
  'Asia/Shanghai': 'CN',
};

/** The market an instrument trades on, from its type and exchange time zone; undefined when none fits. */
export function marketOf(instrument: { instrument_type: InstrumentType; timezone: string }): MarketCode | undefined {
  if (instrument.instrument_type === 'crypto') return 'CRYPTO';
  if (instrument.instrument_type === 'currency') return 'FX';
  return MARKET_OF_ZONE[instrument.timezone];
}
