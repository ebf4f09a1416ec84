/**
 * ISO 8601 instants as callers send them (history windows, key expiries): a date (midnight UTC) or a
 * date-time with an offset (UTC without one), any year from 0000 to 9999. `Date.parse` rolls a day or
 * an hour that does not exist over into the next (2030-02-30 is 2 March, 24:00 the next day), and
 * `Date.UTC` reads years 0 to 99 as 1900 to 1999; here the first is no instant at all and the
 * second is the year it says.
 */
import { MINUTE_MS, HOUR_MS, DAY_MS } from './durations.js';

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|([+-])(\d{2}):(\d{2}))?)?$/;

/** Epoch ms of midnight UTC of that day, or undefined when the day does not exist (2030-02-30). */
function utcDay(year: number, month: number, day: number): number | undefined {
  const date = new Date(0);
  // setUTCFullYear takes the year as given; Date.UTC would turn 0001 into 1901.
  date.setUTCFullYear(year, month - 1, day);
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day ? date.getTime() : undefined;
}

/** Epoch ms of `text`, or undefined when it is malformed or names a day or time that does not exist. */
export function parseInstant(text: string): number | undefined {
  const m = DATE_TIME.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi = '0', s = '0', fraction = '', , sign, oh = '0', om = '0'] = m;
  const day = utcDay(Number(y), Number(mo), Number(d));
  if (day === undefined) return undefined;
  if (h === undefined) return day;
  if (Number(h) > 23 || Number(mi) > 59 || Number(s) > 59 || Number(oh) > 23 || Number(om) > 59) return undefined;
  // Milliseconds are the finest an epoch-ms instant holds: further digits are dropped, as Date.parse does.
  const ms = Number(fraction.slice(0, 3).padEnd(3, '0'));
  const offsetMs = (sign === '-' ? -1 : 1) * (Number(oh) * HOUR_MS + Number(om) * MINUTE_MS);
  return day + Number(h) * HOUR_MS + Number(mi) * MINUTE_MS + Number(s) * 1000 + ms - offsetMs;
}

/** `00`..`99` and `000`..`999`: the fields of an instant, padded once. */
const TWO_DIGITS = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'));
const THREE_DIGITS = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));

function digits(n: number): string {
  return TWO_DIGITS[n]!;
}

/**
 * `new Date(ms).toISOString()`, character for character, for the instants of years 0000 to 9999
 * (others, and invalid ones, go to `toISOString` itself). A history answer formats one per candle:
 * this one builds no Date and is about three times faster on 10 years of daily bars. The civil date
 * is Howard Hinnant's days-to-civil arithmetic (proleptic Gregorian, eras of 400 years).
 */
export function isoInstant(ms: number): string {
  if (!Number.isSafeInteger(ms)) return new Date(ms).toISOString();
  const days = Math.floor(ms / DAY_MS);
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor((dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365);
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const shiftedMonth = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * shiftedMonth + 2) / 5) + 1;
  const month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  if (!(year >= 0 && year <= 9999)) return new Date(ms).toISOString();
  let rest = ms - days * DAY_MS;
  const hours = Math.floor(rest / HOUR_MS);
  rest -= hours * HOUR_MS;
  const minutes = Math.floor(rest / MINUTE_MS);
  rest -= minutes * MINUTE_MS;
  const seconds = Math.floor(rest / 1000);
  const millis = rest - seconds * 1000;
  return `${digits(Math.floor(year / 100))}${digits(year % 100)}-${digits(month)}-${digits(day)}T${digits(hours)}:${digits(minutes)}:${digits(seconds)}.${THREE_DIGITS[millis]!}Z`;
}
