/**
 * Date tables for the Chinese lunisolar holidays of Hong Kong (XHKG) and the mainland (XSHG).
 *
 * The dates are facts: the festival dates of the Chinese calendar and the closed days the Shanghai
 * Stock Exchange announces each December. The tables and their layout are ours. Festival dates to 2026
 * were checked against the exchanges' sessions (exchange_calendars test data, Apache-2.0) and the Hong
 * Kong government's gazetted holidays; 2027's Lunar New Year is 6 February (the new moon falls at 23:56
 * Beijing time, so calendars that compute it approximately put it a day late).
 */

/** Gregorian `MM-DD` of the festivals of one year: Lunar New Year (1/1), Buddha's Birthday (4/8), Tuen Ng (5/5), Mid-Autumn (8/15), Chung Yeung (9/9). */
export type FestivalDates = readonly [lunarNewYear: string, buddha: string, tuenNg: string, midAutumn: string, chungYeung: string];

/** Festival dates by Gregorian year, 2000-2027. */
export const CHINESE_FESTIVALS: Readonly<Record<number, FestivalDates>> = {
  2000: ['02-05', '05-11', '06-06', '09-12', '10-06'],
  2001: ['01-24', '04-30', '06-25', '10-01', '10-25'],
  2002: ['02-12', '05-19', '06-15', '09-21', '10-14'],
  2003: ['02-01', '05-08', '06-04', '09-11', '10-04'],
  2004: ['01-22', '05-26', '06-22', '09-28', '10-22'],
  2005: ['02-09', '05-15', '06-11', '09-18', '10-11'],
  2006: ['01-29', '05-05', '05-31', '10-06', '10-30'],
  2007: ['02-18', '05-24', '06-19', '09-25', '10-19'],
  2008: ['02-07', '05-12', '06-08', '09-14', '10-07'],
  2009: ['01-26', '05-02', '05-28', '10-03', '10-26'],
  2010: ['02-14', '05-21', '06-16', '09-22', '10-16'],
  2011: ['02-03', '05-10', '06-06', '09-12', '10-05'],
  2012: ['01-23', '04-28', '06-23', '09-30', '10-23'],
  2013: ['02-10', '05-17', '06-12', '09-19', '10-13'],
  2014: ['01-31', '05-06', '06-02', '09-08', '10-02'],
  2015: ['02-19', '05-25', '06-20', '09-27', '10-21'],
  2016: ['02-08', '05-14', '06-09', '09-15', '10-09'],
  2017: ['01-28', '05-03', '05-30', '10-04', '10-28'],
  2018: ['02-16', '05-22', '06-18', '09-24', '10-17'],
  2019: ['02-05', '05-12', '06-07', '09-13', '10-07'],
  2020: ['01-25', '04-30', '06-25', '10-01', '10-25'],
  2021: ['02-12', '05-19', '06-14', '09-21', '10-14'],
  2022: ['02-01', '05-08', '06-03', '09-10', '10-04'],
  2023: ['01-22', '05-26', '06-22', '09-29', '10-23'],
  2024: ['02-10', '05-15', '06-10', '09-17', '10-11'],
  2025: ['01-29', '05-05', '05-31', '10-06', '10-29'],
  2026: ['02-17', '05-24', '06-19', '09-25', '10-18'],
  2027: ['02-06', '05-13', '06-09', '09-15', '10-08'],
};

/** The first and last year `CHINESE_FESTIVALS` covers. */
export const CHINESE_FESTIVAL_YEARS = { first: 2000, last: 2027 } as const;

const NEW_YEAR = "New Year's Day";
const SPRING = 'Spring Festival';
const QINGMING = 'Qingming Festival';
const LABOUR = 'Labour Day';
const DRAGON_BOAT = 'Dragon Boat Festival';
const MID_AUTUMN = 'Mid-Autumn Festival';
const NATIONAL = 'National Day golden week';
const VICTORY = 'Victory Day (70th anniversary of the end of the war)';

/**
 * The mainland exchanges' holiday closures: every weekday from the first to the last date (inclusive)
 * is closed. Weekends inside a range stay closed even when the State Council makes them working days
 * ("make-up" days): the exchanges do not trade on Saturdays or Sundays. 2000-2026 as announced by SSE;
 * 2027 is projected from the State Council's pattern (Lunar New Year's Eve to the seventh day, one day
 * for Qingming, Dragon Boat and Mid-Autumn, 1-5 May, 1-7 October) until SSE announces it.
 */
export const CN_CLOSURES: ReadonlyArray<readonly [name: string, first: string, last: string]> = [
  [NEW_YEAR, '2000-01-03', '2000-01-03'], [SPRING, '2000-01-31', '2000-02-11'], [LABOUR, '2000-05-01', '2000-05-05'], [NATIONAL, '2000-10-02', '2000-10-06'],
  [NEW_YEAR, '2001-01-01', '2001-01-01'], [SPRING, '2001-01-22', '2001-02-02'], [LABOUR, '2001-05-01', '2001-05-07'], [NATIONAL, '2001-10-01', '2001-10-05'],
  [NEW_YEAR, '2002-01-01', '2002-01-03'], [SPRING, '2002-02-11', '2002-02-22'], [LABOUR, '2002-05-01', '2002-05-07'], [NATIONAL, '2002-09-30', '2002-10-07'],
  [NEW_YEAR, '2003-01-01', '2003-01-01'], [SPRING, '2003-01-30', '2003-02-07'], [LABOUR, '2003-05-01', '2003-05-09'], [NATIONAL, '2003-10-01', '2003-10-07'],
  [NEW_YEAR, '2004-01-01', '2004-01-01'], [SPRING, '2004-01-19', '2004-01-28'], [LABOUR, '2004-05-03', '2004-05-07'], [NATIONAL, '2004-10-01', '2004-10-07'],
  [NEW_YEAR, '2005-01-03', '2005-01-03'], [SPRING, '2005-02-07', '2005-02-15'], [LABOUR, '2005-05-02', '2005-05-06'], [NATIONAL, '2005-10-03', '2005-10-07'],
  [NEW_YEAR, '2006-01-02', '2006-01-03'], [SPRING, '2006-01-26', '2006-02-03'], [LABOUR, '2006-05-01', '2006-05-05'], [NATIONAL, '2006-10-02', '2006-10-06'],
  [NEW_YEAR, '2007-01-01', '2007-01-03'], [SPRING, '2007-02-19', '2007-02-23'], [LABOUR, '2007-05-01', '2007-05-07'], [NATIONAL, '2007-10-01', '2007-10-05'], [NEW_YEAR, '2007-12-31', '2008-01-01'],
  [SPRING, '2008-02-06', '2008-02-12'], [QINGMING, '2008-04-04', '2008-04-04'], [LABOUR, '2008-05-01', '2008-05-02'], [DRAGON_BOAT, '2008-06-09', '2008-06-09'], [MID_AUTUMN, '2008-09-15', '2008-09-15'], [NATIONAL, '2008-09-29', '2008-10-03'],
  [NEW_YEAR, '2009-01-01', '2009-01-02'], [SPRING, '2009-01-26', '2009-01-30'], [QINGMING, '2009-04-06', '2009-04-06'], [LABOUR, '2009-05-01', '2009-05-01'], [DRAGON_BOAT, '2009-05-28', '2009-05-29'], [NATIONAL, '2009-10-01', '2009-10-08'],
  [NEW_YEAR, '2010-01-01', '2010-01-01'], [SPRING, '2010-02-15', '2010-02-19'], [QINGMING, '2010-04-05', '2010-04-05'], [LABOUR, '2010-05-03', '2010-05-03'], [DRAGON_BOAT, '2010-06-14', '2010-06-16'], [MID_AUTUMN, '2010-09-22', '2010-09-24'], [NATIONAL, '2010-10-01', '2010-10-07'],
  [NEW_YEAR, '2011-01-03', '2011-01-03'], [SPRING, '2011-02-02', '2011-02-08'], [QINGMING, '2011-04-04', '2011-04-05'], [LABOUR, '2011-05-02', '2011-05-02'], [DRAGON_BOAT, '2011-06-06', '2011-06-06'], [MID_AUTUMN, '2011-09-12', '2011-09-12'], [NATIONAL, '2011-10-03', '2011-10-07'],
  [NEW_YEAR, '2012-01-02', '2012-01-03'], [SPRING, '2012-01-23', '2012-01-27'], [QINGMING, '2012-04-02', '2012-04-04'], [LABOUR, '2012-04-30', '2012-05-01'], [DRAGON_BOAT, '2012-06-22', '2012-06-22'], [NATIONAL, '2012-10-01', '2012-10-05'],
  [NEW_YEAR, '2013-01-01', '2013-01-03'], [SPRING, '2013-02-11', '2013-02-15'], [QINGMING, '2013-04-04', '2013-04-05'], [LABOUR, '2013-04-29', '2013-05-01'], [DRAGON_BOAT, '2013-06-10', '2013-06-12'], [MID_AUTUMN, '2013-09-19', '2013-09-20'], [NATIONAL, '2013-10-01', '2013-10-07'],
  [NEW_YEAR, '2014-01-01', '2014-01-01'], [SPRING, '2014-01-31', '2014-02-06'], [QINGMING, '2014-04-07', '2014-04-07'], [LABOUR, '2014-05-01', '2014-05-02'], [DRAGON_BOAT, '2014-06-02', '2014-06-02'], [MID_AUTUMN, '2014-09-08', '2014-09-08'], [NATIONAL, '2014-10-01', '2014-10-07'],
  [NEW_YEAR, '2015-01-01', '2015-01-02'], [SPRING, '2015-02-18', '2015-02-24'], [QINGMING, '2015-04-06', '2015-04-06'], [LABOUR, '2015-05-01', '2015-05-01'], [DRAGON_BOAT, '2015-06-22', '2015-06-22'], [VICTORY, '2015-09-03', '2015-09-04'], [NATIONAL, '2015-10-01', '2015-10-07'],
  [NEW_YEAR, '2016-01-01', '2016-01-01'], [SPRING, '2016-02-08', '2016-02-12'], [QINGMING, '2016-04-04', '2016-04-04'], [LABOUR, '2016-05-02', '2016-05-02'], [DRAGON_BOAT, '2016-06-09', '2016-06-10'], [MID_AUTUMN, '2016-09-15', '2016-09-16'], [NATIONAL, '2016-10-03', '2016-10-07'],
  [NEW_YEAR, '2017-01-02', '2017-01-02'], [SPRING, '2017-01-27', '2017-02-02'], [QINGMING, '2017-04-03', '2017-04-04'], [LABOUR, '2017-05-01', '2017-05-01'], [DRAGON_BOAT, '2017-05-29', '2017-05-30'], [NATIONAL, '2017-10-02', '2017-10-06'],
  [NEW_YEAR, '2018-01-01', '2018-01-01'], [SPRING, '2018-02-15', '2018-02-21'], [QINGMING, '2018-04-05', '2018-04-06'], [LABOUR, '2018-04-30', '2018-05-01'], [DRAGON_BOAT, '2018-06-18', '2018-06-18'], [MID_AUTUMN, '2018-09-24', '2018-09-24'], [NATIONAL, '2018-10-01', '2018-10-05'], [NEW_YEAR, '2018-12-31', '2019-01-01'],
  [SPRING, '2019-02-04', '2019-02-08'], [QINGMING, '2019-04-05', '2019-04-05'], [LABOUR, '2019-05-01', '2019-05-03'], [DRAGON_BOAT, '2019-06-07', '2019-06-07'], [MID_AUTUMN, '2019-09-13', '2019-09-13'], [NATIONAL, '2019-10-01', '2019-10-07'],
  [NEW_YEAR, '2020-01-01', '2020-01-01'], [SPRING, '2020-01-24', '2020-01-31'], [QINGMING, '2020-04-06', '2020-04-06'], [LABOUR, '2020-05-01', '2020-05-05'], [DRAGON_BOAT, '2020-06-25', '2020-06-26'], [NATIONAL, '2020-10-01', '2020-10-08'],
  [NEW_YEAR, '2021-01-01', '2021-01-01'], [SPRING, '2021-02-11', '2021-02-17'], [QINGMING, '2021-04-05', '2021-04-05'], [LABOUR, '2021-05-03', '2021-05-05'], [DRAGON_BOAT, '2021-06-14', '2021-06-14'], [MID_AUTUMN, '2021-09-20', '2021-09-21'], [NATIONAL, '2021-10-01', '2021-10-07'],
  [NEW_YEAR, '2022-01-03', '2022-01-03'], [SPRING, '2022-01-31', '2022-02-04'], [QINGMING, '2022-04-04', '2022-04-05'], [LABOUR, '2022-05-02', '2022-05-04'], [DRAGON_BOAT, '2022-06-03', '2022-06-03'], [MID_AUTUMN, '2022-09-12', '2022-09-12'], [NATIONAL, '2022-10-03', '2022-10-07'],
  [NEW_YEAR, '2023-01-02', '2023-01-02'], [SPRING, '2023-01-23', '2023-01-27'], [QINGMING, '2023-04-05', '2023-04-05'], [LABOUR, '2023-05-01', '2023-05-03'], [DRAGON_BOAT, '2023-06-22', '2023-06-23'], [NATIONAL, '2023-09-29', '2023-10-06'],
  [NEW_YEAR, '2024-01-01', '2024-01-01'], [SPRING, '2024-02-09', '2024-02-16'], [QINGMING, '2024-04-04', '2024-04-05'], [LABOUR, '2024-05-01', '2024-05-03'], [DRAGON_BOAT, '2024-06-10', '2024-06-10'], [MID_AUTUMN, '2024-09-16', '2024-09-17'], [NATIONAL, '2024-10-01', '2024-10-07'],
  [NEW_YEAR, '2025-01-01', '2025-01-01'], [SPRING, '2025-01-28', '2025-02-04'], [QINGMING, '2025-04-04', '2025-04-04'], [LABOUR, '2025-05-01', '2025-05-05'], [DRAGON_BOAT, '2025-06-02', '2025-06-02'], [NATIONAL, '2025-10-01', '2025-10-08'],
  [NEW_YEAR, '2026-01-01', '2026-01-02'], [SPRING, '2026-02-16', '2026-02-23'], [QINGMING, '2026-04-06', '2026-04-06'], [LABOUR, '2026-05-01', '2026-05-05'], [DRAGON_BOAT, '2026-06-19', '2026-06-19'], [MID_AUTUMN, '2026-09-25', '2026-09-25'], [NATIONAL, '2026-10-01', '2026-10-07'],
  [NEW_YEAR, '2027-01-01', '2027-01-01'], [SPRING, '2027-02-05', '2027-02-12'], [QINGMING, '2027-04-05', '2027-04-05'], [LABOUR, '2027-05-03', '2027-05-05'], [DRAGON_BOAT, '2027-06-09', '2027-06-09'], [MID_AUTUMN, '2027-09-15', '2027-09-15'], [NATIONAL, '2027-10-01', '2027-10-07'],
];

/** The last year `CN_CLOSURES` covers; later years know only weekends and the fixed-date holidays. */
export const CN_CLOSURES_LAST_YEAR = 2027;
