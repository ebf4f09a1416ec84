/**
 * Exchange calendar use cases: the trading sessions of one market between two dates. Computed locally
 * from the domain calendar (no upstream, no cache entry): the answer is a pure function of the
 * request, so it is sent with a public lifetime and computed again when a client asks after that.
 */
import { InvalidRequestError, UnknownMarketError, type Violation } from '../domain/errors.js';
import { dayOf, isoDateOf, parseIsoDate } from '../domain/civil-date.js';
import { calendarCoverage, marketInfo, sessionsBetween, type TradingSession } from '../domain/market-calendar.js';
import type { components } from '../generated/api.js';

type MarketSessionsResponse = components['schemas']['MarketSessionsResponse'];
type MarketSession = components['schemas']['MarketSession'];

/** The longest span one answer covers, in years. */
export const MAX_SESSION_YEARS = 10;
/**
 * How long an answer may be reused. Sessions change only when the calendar's data does (a new
 * release adding an announced closure), so an hour bounds how long a client keeps an outdated one.
 */
const SESSIONS_MAX_AGE_SECONDS = 3600;

/** The trading calendar for the handlers. */
export class MarketCalendarService {
  /**
   * The sessions of `market` (case-insensitive) from `start` to `end` (`YYYY-MM-DD`, inclusive), and
   * how many seconds the answer stays true. Throws `UnknownMarketError` (404) for a code no market
   * has, `InvalidRequestError` (422) naming each broken rule: a date that is not a calendar date,
   * `start` after `end`, a span of 10 years or more, dates outside what the calendar covers.
   */
  sessions(market: string, start: string, end: string): { body: MarketSessionsResponse; maxAgeSeconds: number } {
    const info = marketInfo(market.toUpperCase());
    if (!info) throw new UnknownMarketError(market);
    const violations: Violation[] = [];
    const startDay = parseIsoDate(start);
    const endDay = parseIsoDate(end);
    if (startDay === undefined) violations.push({ path: 'query.start', message: 'must be a calendar date, YYYY-MM-DD' });
    if (endDay === undefined) violations.push({ path: 'query.end', message: 'must be a calendar date, YYYY-MM-DD' });
    if (startDay !== undefined && endDay !== undefined) {
      const coverage = calendarCoverage(info.code);
      if (start > end) violations.push({ path: 'query.start', message: 'must not be after end' });
      else if (end >= tenYearsAfter(start)) violations.push({ path: 'query.end', message: `must be less than ${MAX_SESSION_YEARS} years after start (before ${tenYearsAfter(start)})` });
      if (start < coverage.first) violations.push({ path: 'query.start', message: `must be on or after ${coverage.first}: the ${info.code} calendar starts there` });
      if (end > coverage.last) violations.push({ path: 'query.end', message: `must be on or before ${coverage.last}: the ${info.code} calendar is known that far` });
    }
    if (violations.length > 0) throw new InvalidRequestError(violations);
    return {
      body: { success: true, data: { market: info.code, timezone: info.timezone, sessions: sessionsBetween(info.code, start, end).map(toSession) } },
      maxAgeSeconds: SESSIONS_MAX_AGE_SECONDS,
    };
  }
}

/** The same month and day `MAX_SESSION_YEARS` later (29 February lands on 1 March), `YYYY-MM-DD`. */
function tenYearsAfter(date: string): string {
  const [year, month, day] = date.split('-').map(Number);
  return isoDateOf(dayOf((year ?? 0) + MAX_SESSION_YEARS, month ?? 1, day ?? 1));
}

function toSession(session: TradingSession): MarketSession {
  const [first, second] = session.segments;
  const last = session.segments[session.segments.length - 1];
  const iso = (ms: number | undefined) => new Date(ms ?? Number.NaN).toISOString();
  return {
    date: session.date,
    open: iso(first?.startMs),
    close: iso(last?.endMs),
    break_start: first && second ? iso(first.endMs) : null,
    break_end: second ? iso(second.startMs) : null,
  };
}
