/**
 * Exchange holidays and early closes: which weekdays an exchange does not trade, and which it closes
 * early, with names, from 2000 on.
 *
 * The holiday dates are facts (the exchanges' published calendars and announcements, the countries'
 * holiday laws); the rules, tables and code here are ours. Rules cover what repeats ("the fourth
 * Thursday of November", Easter via the computus, weekend observance); explicit tables cover what does
 * not (national days of mourning, storms, royal events, the Chinese lunisolar festivals, the mainland's
 * announced closures). The sessions the tests check this against come from exchange_calendars
 * (Apache-2.0), see test/fixtures/calendars/README.md.
 *
 * Pure: civil-date arithmetic only. Turning wall times into instants is market-calendar.ts's job (luxon).
 */
import { CHINESE_FESTIVALS, CN_CLOSURES, CN_CLOSURES_LAST_YEAR, type FestivalDates } from './chinese-holiday-tables.js';
import {
  civilOf,
  dayOf,
  easterSunday,
  isWeekend,
  lastWeekday,
  nthWeekday,
  parseIsoDate,
  weekdayBefore,
  weekdayOf,
  type DayNumber,
} from './civil-date.js';

/** Wall-clock time of day in minutes after midnight. */
export type WallMinutes = number;

/** A weekday on which an exchange does not keep its regular hours. */
export type SpecialDay =
  /** No session at all. */
  | { kind: 'closed'; name: string }
  /** One session from the regular open to `close` (no lunch break). */
  | { kind: 'early-close'; name: string; close: WallMinutes };

/** The exchanges with holiday rules (the markets of /api/markets that close on holidays). */
export type ExchangeCode = 'US' | 'UK' | 'DE' | 'EU' | 'JP' | 'HK' | 'CN';

const hm = (hours: number, minutes = 0): WallMinutes => hours * 60 + minutes;
const MON = 1;
const THU = 4;
const SAT = 6;
const SUN = 7;

/** One year's special days of one exchange, built by the rules below. */
class YearBook {
  readonly days = new Map<DayNumber, SpecialDay>();

  /** Marks a weekday closed; weekends are closed anyway and are not recorded. */
  close(day: DayNumber | undefined, name: string): void {
    if (day === undefined || isWeekend(day) || this.days.get(day)?.kind === 'closed') return;
    this.days.set(day, { kind: 'closed', name });
  }

  /** Marks a trading weekday as closing early at `close`; a closed day stays closed. */
  early(day: DayNumber | undefined, close: WallMinutes, name: string): void {
    if (day === undefined || isWeekend(day) || this.days.has(day)) return;
    this.days.set(day, { kind: 'early-close', name, close });
  }

  isClosed(day: DayNumber): boolean {
    return isWeekend(day) || this.days.get(day)?.kind === 'closed';
  }

  /** The first weekday from `day` on that is not already closed. */
  nextOpenWeekday(day: DayNumber): DayNumber {
    let d = day;
    while (this.isClosed(d)) d++;
    return d;
  }
}

/** Explicit dates: `YYYY-MM-DD` and a name. */
type DateTable = ReadonlyArray<readonly [date: string, name: string]>;

function tableOf(table: DateTable, year: number): Array<[DayNumber, string]> {
  const prefix = `${year}-`;
  return table.filter(([date]) => date.startsWith(prefix)).map(([date, name]) => [parseIsoDate(date) ?? Number.NaN, name]);
}

/**
 * A holiday that falls on a weekend, moved: Saturday to the Friday before, Sunday to the Monday after
 * (the US federal rule, which the NYSE follows except for New Year's Day on a Saturday).
 */
function federalObserved(day: DayNumber): DayNumber {
  const weekday = weekdayOf(day);
  if (weekday === SAT) return day - 1;
  if (weekday === SUN) return day + 1;
  return day;
}

// ---------------------------------------------------------------- US: New York Stock Exchange (XNYS)

const US_CLOSURES: DateTable = [
  ['2001-09-11', 'September 11 attacks'],
  ['2001-09-12', 'September 11 attacks'],
  ['2001-09-13', 'September 11 attacks'],
  ['2001-09-14', 'September 11 attacks'],
  ['2004-06-11', 'National Day of Mourning for President Ronald Reagan'],
  ['2007-01-02', 'National Day of Mourning for President Gerald Ford'],
  ['2012-10-29', 'Hurricane Sandy'],
  ['2012-10-30', 'Hurricane Sandy'],
  ['2018-12-05', 'National Day of Mourning for President George H. W. Bush'],
  ['2025-01-09', 'National Day of Mourning for President Jimmy Carter'],
];
/** Early closes the rules do not produce (13:00 New York). */
const US_EARLY_CLOSES: DateTable = [
  ['2002-07-05', 'Day after Independence Day'],
  ['2003-12-26', 'Day after Christmas'],
];
/** The NYSE kept a full session on 3 July 2002 and closed early on the 5th instead. */
const US_NOT_EARLY = new Set(['2002-07-03']);

function usYear(year: number, book: YearBook): void {
  for (const [day, name] of tableOf(US_CLOSURES, year)) book.close(day, name);
  // New Year's Day on a Saturday is not moved to the Friday before: that Friday ends a year and a quarter.
  const newYear = dayOf(year, 1, 1);
  book.close(weekdayOf(newYear) === SUN ? newYear + 1 : newYear, weekdayOf(newYear) === SUN ? "New Year's Day (observed)" : "New Year's Day");
  book.close(nthWeekday(year, 1, MON, 3), 'Martin Luther King Jr. Day');
  book.close(nthWeekday(year, 2, MON, 3), "Washington's Birthday");
  book.close(easterSunday(year) - 2, 'Good Friday');
  book.close(lastWeekday(year, 5, MON), 'Memorial Day');
  if (year >= 2022) observedUs(book, dayOf(year, 6, 19), 'Juneteenth National Independence Day');
  observedUs(book, dayOf(year, 7, 4), 'Independence Day');
  book.close(nthWeekday(year, 9, MON, 1), 'Labor Day');
  const thanksgiving = nthWeekday(year, 11, THU, 4);
  book.close(thanksgiving, 'Thanksgiving Day');
  observedUs(book, dayOf(year, 12, 25), 'Christmas Day');

  const early = hm(13);
  const july3 = dayOf(year, 7, 3);
  // 3 July closes early when the 4th is a Tuesday to Friday (a Friday 3rd is the observed holiday itself).
  if (weekdayOf(july3) <= THU && !US_NOT_EARLY.has(`${year}-07-03`)) book.early(july3, early, 'Day before Independence Day');
  book.early(thanksgiving + 1, early, 'Day after Thanksgiving');
  const christmasEve = dayOf(year, 12, 24);
  if (weekdayOf(christmasEve) <= THU) book.early(christmasEve, early, 'Christmas Eve');
  for (const [day, name] of tableOf(US_EARLY_CLOSES, year)) book.early(day, early, name);
}

function observedUs(book: YearBook, day: DayNumber, name: string): void {
  const observed = federalObserved(day);
  book.close(observed, observed === day ? name : `${name} (observed)`);
}

// ---------------------------------------------------------------- UK: London Stock Exchange (XLON)

const UK_CLOSURES: DateTable = [
  ['2002-06-03', 'Golden Jubilee of Queen Elizabeth II'],
  ['2011-04-29', 'Wedding of Prince William and Catherine Middleton'],
  ['2012-06-05', 'Diamond Jubilee of Queen Elizabeth II'],
  ['2022-06-03', 'Platinum Jubilee of Queen Elizabeth II'],
  ['2022-09-19', 'State Funeral of Queen Elizabeth II'],
  ['2023-05-08', 'Coronation of King Charles III'],
];
/** Years whose bank holiday was moved by proclamation: the Spring bank holiday for the jubilees, Early May for VE Day's 75th. */
const UK_SPRING_MOVED: Readonly<Record<number, string>> = { 2002: '2002-06-04', 2012: '2012-06-04', 2022: '2022-06-02' };
const UK_EARLY_MAY_MOVED: Readonly<Record<number, string>> = { 2020: '2020-05-08' };

function ukYear(year: number, book: YearBook): void {
  for (const [day, name] of tableOf(UK_CLOSURES, year)) book.close(day, name);
  const easter = easterSunday(year);
  book.close(easter - 2, 'Good Friday');
  book.close(easter + 1, 'Easter Monday');
  book.close(parseIsoDate(UK_EARLY_MAY_MOVED[year] ?? '') ?? nthWeekday(year, 5, MON, 1), 'Early May Bank Holiday');
  book.close(parseIsoDate(UK_SPRING_MOVED[year] ?? '') ?? lastWeekday(year, 5, MON), 'Spring Bank Holiday');
  book.close(lastWeekday(year, 8, MON), 'Summer Bank Holiday');
  substituteWeekend(book, [
    [dayOf(year, 1, 1), "New Year's Day"],
    [dayOf(year, 12, 25), 'Christmas Day'],
    [dayOf(year, 12, 26), 'Boxing Day'],
  ]);
  const early = hm(12, 30);
  book.early(weekdayBefore(dayOf(year, 12, 25)), early, 'Christmas Eve');
  book.early(weekdayBefore(dayOf(year + 1, 1, 1)), early, "New Year's Eve");
}

/**
 * Holidays that fall on a Saturday or Sunday move to the next weekday not already a holiday (UK
 * substitute days): those on weekdays claim their day first, then the others in order.
 */
function substituteWeekend(book: YearBook, holidays: ReadonlyArray<readonly [DayNumber, string]>): void {
  for (const [day, name] of holidays) if (!isWeekend(day)) book.close(day, name);
  for (const [day, name] of holidays) if (isWeekend(day)) book.close(book.nextOpenWeekday(day), `${name} (observed)`);
}

/** The closures Xetra and Euronext share every year: New Year's Day, Good Friday, Easter Monday, Labour Day. */
function closeContinentalCore(year: number, book: YearBook): void {
  const easter = easterSunday(year);
  book.close(dayOf(year, 1, 1), "New Year's Day");
  book.close(easter - 2, 'Good Friday');
  book.close(easter + 1, 'Easter Monday');
  book.close(dayOf(year, 5, 1), 'Labour Day');
}

// ---------------------------------------------------------------- DE: Deutsche Börse Xetra (XETR)

function deYear(year: number, book: YearBook): void {
  const easter = easterSunday(year);
  closeContinentalCore(year, book);
  // Whit Monday and German Unity Day closed Xetra only in these years; it trades on both since 2022.
  if (year === 2007 || (year >= 2015 && year <= 2021)) book.close(easter + 50, 'Whit Monday');
  if (year >= 2014 && year <= 2021) book.close(dayOf(year, 10, 3), 'Day of German Unity');
  if (year === 2017) book.close(dayOf(year, 10, 31), 'Reformation Day (500th anniversary)');
  book.close(dayOf(year, 12, 24), 'Christmas Eve');
  book.close(dayOf(year, 12, 25), 'Christmas Day');
  book.close(dayOf(year, 12, 26), 'Boxing Day');
  book.close(dayOf(year, 12, 31), "New Year's Eve");
  if (year >= 2010) book.early(weekdayBefore(dayOf(year, 12, 31)), hm(14), 'Last trading day of the year');
}

// ---------------------------------------------------------------- EU: Euronext Paris (XPAR)

function euYear(year: number, book: YearBook): void {
  const easter = easterSunday(year);
  closeContinentalCore(year, book);
  // Euronext harmonised its calendar in 2002: Whit Monday and Bastille Day were Paris holidays before.
  if (year <= 2001) {
    book.close(easter + 50, 'Whit Monday');
    book.close(dayOf(year, 7, 14), 'Bastille Day');
  }
  if (year === 2001) book.close(dayOf(year, 12, 31), 'Euro changeover');
  book.close(dayOf(year, 12, 25), 'Christmas Day');
  book.close(dayOf(year, 12, 26), 'Boxing Day');
  if (year >= 2001) {
    book.early(dayOf(year, 12, 24), hm(14, 5), 'Christmas Eve');
    book.early(dayOf(year, 12, 31), hm(14, 5), "New Year's Eve");
  }
}

// ---------------------------------------------------------------- JP: Tokyo Stock Exchange (XTKS)

/**
 * Vernal and autumnal equinox days, from the standard approximation of the astronomical equinox in
 * Japan Standard Time (valid 1980-2099; the Cabinet Office announces each year's date from the same
 * astronomy). Returns the day of March or September.
 */
function equinoxDay(year: number, autumn: boolean): number {
  const base = autumn ? 23.2488 : 20.8431;
  return Math.floor(base + 0.242194 * (year - 1980) - Math.floor((year - 1980) / 4));
}

const JP_CLOSURES: DateTable = [
  ['2019-04-30', 'National holiday (Imperial abdication)'],
  ['2019-05-01', 'Accession of Emperor Naruhito'],
  ['2019-05-02', 'National holiday (Imperial accession)'],
  ['2019-10-22', 'Enthronement ceremony of Emperor Naruhito'],
  ['2020-10-01', 'Trading system failure'],
];
/** Marine, Sports and Mountain Day moved for the Tokyo Olympics. */
const JP_OLYMPIC_MOVES: Readonly<Record<number, { marine: string; sports: string; mountain: string }>> = {
  2020: { marine: '2020-07-23', sports: '2020-07-24', mountain: '2020-08-10' },
  2021: { marine: '2021-07-22', sports: '2021-07-23', mountain: '2021-08-08' },
};

function jpYear(year: number, book: YearBook): void {
  // National holidays first (the Holiday Act), then the substitute and sandwiched days they create.
  const national = new Map<DayNumber, string>();
  const add = (day: DayNumber | undefined, name: string) => {
    if (day !== undefined && !national.has(day)) national.set(day, name);
  };
  const moved = JP_OLYMPIC_MOVES[year];
  add(dayOf(year, 1, 1), "New Year's Day");
  add(year >= 2000 ? nthWeekday(year, 1, MON, 2) : dayOf(year, 1, 15), 'Coming of Age Day');
  add(dayOf(year, 2, 11), 'National Foundation Day');
  if (year >= 2020) add(dayOf(year, 2, 23), "Emperor's Birthday");
  add(dayOf(year, 3, equinoxDay(year, false)), 'Vernal Equinox Day');
  add(dayOf(year, 4, 29), year >= 2007 ? 'Showa Day' : 'Greenery Day');
  add(dayOf(year, 5, 3), 'Constitution Memorial Day');
  if (year >= 2007) add(dayOf(year, 5, 4), 'Greenery Day');
  add(dayOf(year, 5, 5), "Children's Day");
  const marine = moved ? parseIsoDate(moved.marine) : year >= 2003 ? nthWeekday(year, 7, MON, 3) : dayOf(year, 7, 20);
  add(marine, 'Marine Day');
  if (year >= 2016) add(moved ? parseIsoDate(moved.mountain) : dayOf(year, 8, 11), 'Mountain Day');
  add(year >= 2003 ? nthWeekday(year, 9, MON, 3) : dayOf(year, 9, 15), 'Respect for the Aged Day');
  add(dayOf(year, 9, equinoxDay(year, true)), 'Autumnal Equinox Day');
  add(moved ? parseIsoDate(moved.sports) : nthWeekday(year, 10, MON, 2), year >= 2020 ? 'Sports Day' : 'Health and Sports Day');
  add(dayOf(year, 11, 3), 'Culture Day');
  add(dayOf(year, 11, 23), 'Labor Thanksgiving Day');
  if (year <= 2018) add(dayOf(year, 12, 23), "Emperor's Birthday");
  for (const [day, name] of tableOf(JP_CLOSURES, year)) add(day, name);

  const holidays = new Map(national);
  for (const [day, name] of national) {
    if (weekdayOf(day) !== SUN) continue;
    // A Sunday holiday gives the next day that is not a holiday (since 2007; before, only the Monday).
    let substitute = day + 1;
    if (year >= 2007) while (national.has(substitute)) substitute++;
    if (!national.has(substitute)) holidays.set(substitute, `Substitute holiday (${name})`);
  }
  // A day between two national holidays is a holiday too (Citizen's Holiday).
  for (const day of [...national.keys()]) {
    const between = day + 1;
    if (national.has(between + 1) && !holidays.has(between) && weekdayOf(between) !== SUN) holidays.set(between, "Citizen's Holiday");
  }
  for (const [day, name] of holidays) book.close(day, name);
  // The exchange's own year-end and new-year holidays.
  book.close(dayOf(year, 1, 2), "New Year's Holiday");
  book.close(dayOf(year, 1, 3), "New Year's Holiday");
  book.close(dayOf(year, 12, 31), "New Year's Holiday");
}

// ---------------------------------------------------------------- HK: Hong Kong Exchanges (XHKG)

/** Full-day closures for typhoon signal 8 or above or a black rainstorm (HKEX notices), and other one-offs. */
const HK_CLOSURES: DateTable = [
  ['2001-07-06', 'Typhoon Utor'],
  ['2001-07-25', 'Typhoon Yutu'],
  ['2008-08-06', 'Typhoon Kammuri'],
  ['2008-08-22', 'Typhoon Nuri'],
  ['2011-09-29', 'Typhoon Nesat'],
  ['2013-08-14', 'Typhoon Utor'],
  ['2015-09-03', '70th anniversary of the victory of the Chinese War of Resistance'],
  ['2016-08-02', 'Typhoon Nida'],
  ['2016-10-21', 'Typhoon Haima'],
  ['2017-08-23', 'Typhoon Hato'],
  ['2020-10-13', 'Tropical Storm Nangka'],
  ['2021-10-13', 'Typhoon Kompasu'],
  ['2023-07-17', 'Typhoon Talim'],
  ['2023-09-01', 'Typhoon Saola'],
  ['2023-09-08', 'Black rainstorm and extreme conditions'],
  ['2024-09-06', 'Typhoon Yagi'],
];

/** Hong Kong's hours changed on 2011-03-07 (09:30 open); half days closed at 12:30 before and at noon after. */
const HK_NEW_HOURS = dayOf(2011, 3, 7);

function festivalDays(year: number): Record<'lunarNewYear' | 'buddha' | 'tuenNg' | 'midAutumn' | 'chungYeung', DayNumber> | undefined {
  const dates: FestivalDates | undefined = CHINESE_FESTIVALS[year];
  if (!dates) return undefined;
  const at = (mmdd: string) => parseIsoDate(`${year}-${mmdd}`) ?? Number.NaN;
  return { lunarNewYear: at(dates[0]), buddha: at(dates[1]), tuenNg: at(dates[2]), midAutumn: at(dates[3]), chungYeung: at(dates[4]) };
}

/** Ching Ming (the Qingming solar term), by the standard approximation for 2000-2099. */
function qingmingDay(year: number): DayNumber {
  const y = year % 100;
  return dayOf(year, 4, Math.floor(y * 0.2422 + 4.81) - Math.floor(y / 4));
}

function hkYear(year: number, book: YearBook): void {
  const easter = easterSunday(year);
  book.close(easter - 2, 'Good Friday');
  book.close(easter + 1, 'Easter Monday');

  // General holidays: one on a Sunday, or on a day another holiday already takes, gives the next day that is not a holiday.
  const holidays: Array<[DayNumber, string]> = [
    [dayOf(year, 1, 1), "New Year's Day"],
    [qingmingDay(year), 'Ching Ming Festival'],
    [dayOf(year, 5, 1), 'Labour Day'],
    [dayOf(year, 7, 1), 'HKSAR Establishment Day'],
    [dayOf(year, 10, 1), 'National Day'],
    [dayOf(year, 12, 25), 'Christmas Day'],
    [dayOf(year, 12, 26), 'The first weekday after Christmas Day'],
  ];
  const festivals = festivalDays(year);
  if (festivals) {
    const lny = festivals.lunarNewYear;
    const lnyDays = [lny, lny + 1, lny + 2];
    book.close(lny, "Lunar New Year's Day");
    book.close(lny + 1, 'The second day of Lunar New Year');
    book.close(lny + 2, 'The third day of Lunar New Year');
    // When one of the three days is a Sunday, another day replaces it: the eve until 2011, the fourth day since 2012.
    if (lnyDays.some((day) => weekdayOf(day) === SUN)) {
      if (year <= 2011) book.close(lny - 1, "Lunar New Year's Eve");
      else book.close(lny + 3, 'The fourth day of Lunar New Year');
    }
    holidays.push([festivals.buddha, "Buddha's Birthday"], [festivals.tuenNg, 'Tuen Ng Festival'], [festivals.chungYeung, 'Chung Yeung Festival']);
    // The day after Mid-Autumn. When that is a Sunday: the festival itself (a Saturday) until 2011, the
    // second day after (the Monday) since.
    const afterMidAutumn = festivals.midAutumn + 1;
    if (weekdayOf(afterMidAutumn) !== SUN) holidays.push([afterMidAutumn, 'The day following the Mid-Autumn Festival']);
    else if (year >= 2012) holidays.push([afterMidAutumn + 1, 'The second day following the Mid-Autumn Festival']);
  }
  holidays.sort((a, b) => a[0] - b[0]);
  for (const [day, name] of holidays) {
    if (weekdayOf(day) === SUN || book.isClosed(day)) continue;
    book.close(day, name);
  }
  for (const [day, name] of holidays) {
    // A Saturday holiday is simply lost; a Sunday one, or one another holiday took, moves on.
    const taken = weekdayOf(day) === SUN || (!isWeekend(day) && book.days.get(day)?.name !== name);
    if (taken) book.close(book.nextOpenWeekday(day + 1), `${name} (observed)`);
  }
  // Weather closures last: a storm does not move a holiday.
  for (const [day, name] of tableOf(HK_CLOSURES, year)) book.close(day, name);

  const halfDay = (day: DayNumber) => (day < HK_NEW_HOURS ? hm(12, 30) : hm(12));
  const christmasEve = dayOf(year, 12, 24);
  book.early(christmasEve, halfDay(christmasEve), 'Christmas Eve');
  const newYearsEve = dayOf(year, 12, 31);
  book.early(newYearsEve, halfDay(newYearsEve), "New Year's Eve");
  if (festivals && year >= 2013) book.early(festivals.lunarNewYear - 1, halfDay(festivals.lunarNewYear - 1), "Lunar New Year's Eve");
}

// ---------------------------------------------------------------- CN: Shanghai Stock Exchange (XSHG)

const CN_RANGES = CN_CLOSURES.map(([name, first, last]) => ({ name, first: parseIsoDate(first) ?? Number.NaN, last: parseIsoDate(last) ?? Number.NaN }));

function cnYear(year: number, book: YearBook): void {
  if (year > CN_CLOSURES_LAST_YEAR) {
    // Not announced yet: only the fixed-date holidays are certain.
    book.close(dayOf(year, 1, 1), "New Year's Day");
    for (let day = dayOf(year, 5, 1); day <= dayOf(year, 5, 3); day++) book.close(day, 'Labour Day');
    for (let day = dayOf(year, 10, 1); day <= dayOf(year, 10, 7); day++) book.close(day, 'National Day golden week');
    return;
  }
  const first = dayOf(year, 1, 1);
  const last = dayOf(year, 12, 31);
  for (const range of CN_RANGES) {
    if (range.last < first || range.first > last) continue;
    for (let day = Math.max(range.first, first); day <= Math.min(range.last, last); day++) book.close(day, range.name);
  }
}

// ---------------------------------------------------------------- lookup

const RULES: Record<ExchangeCode, (year: number, book: YearBook) => void> = { US: usYear, UK: ukYear, DE: deYear, EU: euYear, JP: jpYear, HK: hkYear, CN: cnYear };

/** Built books by exchange and year: a few dozen entries per year, computed once. */
const books = new Map<string, ReadonlyMap<DayNumber, SpecialDay>>();

/** The special days of `code` in `year`, keyed by day number (weekdays only). */
export function specialDaysOf(code: ExchangeCode, year: number): ReadonlyMap<DayNumber, SpecialDay> {
  const key = `${code}:${year}`;
  let days = books.get(key);
  if (!days) {
    const book = new YearBook();
    RULES[code](year, book);
    days = book.days;
    books.set(key, days);
  }
  return days;
}

/** The special day of `code` on `dayNumber`, or undefined for a regular day (or a weekend). */
export function specialDayOf(code: ExchangeCode, dayNumber: DayNumber): SpecialDay | undefined {
  return specialDaysOf(code, civilOf(dayNumber).year).get(dayNumber);
}

/** Hong Kong's regular open: 10:00 before 2011-03-07, 09:30 since. */
export function hongKongOpen(dayNumber: DayNumber): WallMinutes {
  return dayNumber < HK_NEW_HOURS ? hm(10) : hm(9, 30);
}

/** Tokyo's regular close: 15:00 before 2024-11-05, 15:30 since (arrowhead 4.0). */
export function tokyoClose(dayNumber: DayNumber): WallMinutes {
  return dayNumber < dayOf(2024, 11, 5) ? hm(15) : hm(15, 30);
}
