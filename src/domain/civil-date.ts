/**
 * Civil (calendar) dates as whole day numbers: days from 1970-01-01. A civil date has no zone and no
 * time, so plain day counting is exact here; instants in an exchange's zone go through luxon elsewhere.
 * Dates are read by the one parser of every operation (`parseInstant`), years 0000 to 9999.
 */
import { parseInstant } from './instant.js';
import { DAY_MS } from './durations.js';

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;

/** Whole days from 1970-01-01 to a civil date. */
export type DayNumber = number;

/** The day number of the civil date year-month-day (month 1-12). */
export function dayOf(year: number, month: number, day: number): DayNumber {
  const date = new Date(0);
  // setUTCFullYear takes the year as given; Date.UTC would turn 0015 into 1915.
  date.setUTCFullYear(year, month - 1, day);
  return Math.floor(date.getTime() / DAY_MS);
}

/** The civil date of a day number. */
export function civilOf(dayNumber: DayNumber): { year: number; month: number; day: number } {
  const d = new Date(dayNumber * DAY_MS);
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

/** `YYYY-MM-DD` of a day number. */
export function isoDateOf(dayNumber: DayNumber): string {
  return new Date(dayNumber * DAY_MS).toISOString().slice(0, 10);
}

/** The day number of a `YYYY-MM-DD` date (0000-01-01 to 9999-12-31), or undefined when it is not a real date. */
export function parseIsoDate(text: string): DayNumber | undefined {
  if (!DATE_ONLY.test(text)) return undefined;
  const ms = parseInstant(text);
  return ms === undefined ? undefined : Math.floor(ms / DAY_MS);
}

/** ISO weekday (1 = Monday ... 7 = Sunday); 1970-01-01 was a Thursday. */
export function weekdayOf(dayNumber: DayNumber): number {
  return ((((dayNumber + 3) % 7) + 7) % 7) + 1;
}

/** True for Saturday and Sunday. */
export function isWeekend(dayNumber: DayNumber): boolean {
  return weekdayOf(dayNumber) >= 6;
}

/** The `n`th (1-based) ISO `weekday` of a month: "the fourth Thursday of November" is (y, 11, 4, 4). */
export function nthWeekday(year: number, month: number, weekday: number, n: number): DayNumber {
  const first = dayOf(year, month, 1);
  return first + ((weekday - weekdayOf(first) + 7) % 7) + (n - 1) * 7;
}

/** The last ISO `weekday` of a month: "the last Monday of May" is (y, 5, 1). */
export function lastWeekday(year: number, month: number, weekday: number): DayNumber {
  const last = dayOf(year, month + 1, 1) - 1;
  return last - ((weekdayOf(last) - weekday + 7) % 7);
}

/**
 * Easter Sunday of the Gregorian calendar, by the anonymous Gregorian computus (Meeus/Jones/Butcher):
 * the Sunday after the ecclesiastical full moon on or after 21 March.
 */
export function easterSunday(year: number): DayNumber {
  const a = year % 19;
  const b = Math.floor(year / 100);
  const c = year % 100;
  const d = Math.floor(b / 4);
  const e = b % 4;
  const f = Math.floor((b + 8) / 25);
  const g = Math.floor((b - f + 1) / 3);
  const h = (19 * a + b - d - g + 15) % 30;
  const i = Math.floor(c / 4);
  const k = c % 4;
  const l = (32 + 2 * e + 2 * i - h - k) % 7;
  const m = Math.floor((a + 11 * h + 22 * l) / 451);
  const month = Math.floor((h + l - 7 * m + 114) / 31);
  const day = ((h + l - 7 * m + 114) % 31) + 1;
  return dayOf(year, month, day);
}

/** The last weekday (Monday to Friday) strictly before `dayNumber`. */
export function weekdayBefore(dayNumber: DayNumber): DayNumber {
  let d = dayNumber - 1;
  while (isWeekend(d)) d--;
  return d;
}
