/**
 * ISO 8601 instants as callers send them (history windows, key expiries): a date (midnight UTC) or a
 * date-time with an offset (UTC without one), any year from 0000 to 9999. `Date.parse` rolls a day or
 * an hour that does not exist over into the next (2030-02-30 is 2 March, 24:00 the next day), and
 * `Date.UTC` reads years 0 to 99 as 1900 to 1999; here the first is no instant at all and the
 * second is the year it says.
 */

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|([+-])(\d{2}):(\d{2}))?)?$/;

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

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
