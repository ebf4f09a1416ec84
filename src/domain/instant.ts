/**
 * ISO 8601 instants as callers send them (history windows, key expiries): a date (midnight UTC) or a
 * date-time with an offset. `Date.parse` rolls a day or an hour that does not exist over into the
 * next (2030-02-30 is 2 March, 24:00 the next day); here such a text is no instant at all.
 */

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):(\d{2}))?)?$/;

/** Epoch ms of `text`, or undefined when it is malformed or names a day or time that does not exist. */
export function parseInstant(text: string): number | undefined {
  const m = DATE_TIME.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h = '0', mi = '0', s = '0', oh = '0', om = '0'] = m;
  const day = Date.UTC(Number(y), Number(mo) - 1, Number(d));
  if (!new Date(day).toISOString().startsWith(`${y}-${mo}-${d}`)) return undefined;
  if (Number(h) > 23 || Number(mi) > 59 || Number(s) > 59 || Number(oh) > 23 || Number(om) > 59) return undefined;
  if (m[4] === undefined) return day;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}
