import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { holidayOn, marketStatus, sessionsBetween, type MarketCode, type TradingSession } from '../../src/domain/market-calendar.js';
import { parseIsoDate } from '../../src/domain/civil-date.js';
import { CHINESE_FESTIVALS, CHINESE_FESTIVAL_YEARS } from '../../src/domain/chinese-holiday-tables.js';
import { specialDaysOf } from '../../src/domain/exchange-holidays.js';

/**
 * Every session of the exchange_calendars data in test/fixtures/calendars (see its README) against the
 * calendar: from 2000-01-01 (or the file's first session) to the file's last session, the set of
 * trading dates must be the same and each open, close and lunch break the same instant.
 */
const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'calendars');

interface Row {
  date: string;
  open: string;
  close: string;
  break_start: string | null;
  break_end: string | null;
}

/** `2026-11-27T14:30:00Z` as our ISO form, `2026-11-27T14:30:00.000Z`. */
function instant(text: string): string | null {
  return text === '' ? null : new Date(text).toISOString();
}

function readSessions(file: string): Row[] {
  const lines = readFileSync(join(FIXTURES, file), 'utf8').trim().split('\n');
  expect(lines[0]).toBe(',open,close,break_start,break_end');
  return lines.slice(1).map((line) => {
    const [label = '', open = '', close = '', breakStart = '', breakEnd = ''] = line.split(',');
    return { date: label.slice(0, 10), open: instant(open) ?? '', close: instant(close) ?? '', break_start: instant(breakStart), break_end: instant(breakEnd) };
  });
}

function rowOf(session: TradingSession): Row {
  const [first, second] = session.segments;
  const last = session.segments[session.segments.length - 1];
  return {
    date: session.date,
    open: new Date(first?.startMs ?? Number.NaN).toISOString(),
    close: new Date(last?.endMs ?? Number.NaN).toISOString(),
    break_start: second && first ? new Date(first.endMs).toISOString() : null,
    break_end: second ? new Date(second.startMs).toISOString() : null,
  };
}

/** Every difference between the fixture's sessions and ours, as readable lines (empty when they agree). */
function differences(code: MarketCode, file: string): { count: number; diffs: string[] } {
  const expected = readSessions(file).filter((row) => row.date >= '2000-01-01');
  const first = expected[0]?.date ?? '';
  const last = expected[expected.length - 1]?.date ?? '';
  const ours = new Map(sessionsBetween(code, first, last).map((s) => [s.date, rowOf(s)]));
  const diffs: string[] = [];
  for (const row of expected) {
    const mine = ours.get(row.date);
    if (!mine) diffs.push(`${row.date}: the exchange trades, we say closed (${holidayOn(code, parseIsoDate(row.date) ?? 0) ?? 'no holiday'})`);
    else if (JSON.stringify(mine) !== JSON.stringify(row)) diffs.push(`${row.date}: expected ${JSON.stringify(row)}, got ${JSON.stringify(mine)}`);
    ours.delete(row.date);
  }
  for (const date of ours.keys()) diffs.push(`${date}: the exchange is closed, we say it trades`);
  return { count: expected.length, diffs };
}

const CASES: ReadonlyArray<{ code: MarketCode; mic: string; files: string[]; minSessions: number }> = [
  { code: 'US', mic: 'XNYS', files: ['sessions-to-2023/xnys.csv', 'sessions-2023-2027/xnys.csv'], minSessions: 5_700 },
  { code: 'UK', mic: 'XLON', files: ['sessions-to-2023/xlon.csv', 'sessions-2023-2027/xlon.csv'], minSessions: 5_900 },
  { code: 'DE', mic: 'XETR', files: ['sessions-to-2023/xetr.csv', 'sessions-2023-2027/xetr.csv'], minSessions: 5_900 },
  { code: 'EU', mic: 'XPAR', files: ['sessions-to-2023/xpar.csv'], minSessions: 5_000 },
  { code: 'JP', mic: 'XTKS', files: ['sessions-to-2023/xtks.csv', 'sessions-2023-2027/xtks.csv'], minSessions: 6_500 },
  { code: 'HK', mic: 'XHKG', files: ['sessions-to-2023/xhkg.csv'], minSessions: 5_600 },
  { code: 'CN', mic: 'XSHG', files: ['sessions-to-2023/xshg.csv'], minSessions: 5_500 },
];

describe('exchange calendars against exchange_calendars sessions', () => {
  for (const { code, mic, files, minSessions } of CASES) {
    for (const file of files) {
      it(`when ${code} (${mic}) is compared with every session of ${file} from 2000 on, then dates, opens, closes and breaks all match`, () => {
        const { count, diffs } = differences(code, file);
        expect(diffs).toEqual([]);
        if (file.startsWith('sessions-to-2023')) expect(count).toBeGreaterThan(minSessions);
        else expect(count).toBeGreaterThan(1_200);
      });
    }
  }
});

describe('US Thanksgiving 2026', () => {
  it('when it is Thanksgiving Day (2026-11-26), then the US has no session and the holiday is named', () => {
    expect(sessionsBetween('US', '2026-11-26', '2026-11-26')).toEqual([]);
    expect(holidayOn('US', parseIsoDate('2026-11-26') ?? 0)).toBe('Thanksgiving Day');
  });

  it('when it is the day after (2026-11-27), then the US opens 09:30 and closes early at 13:00 New York (18:00 UTC)', () => {
    const [session] = sessionsBetween('US', '2026-11-27', '2026-11-27');
    expect(session && rowOf(session)).toEqual({
      date: '2026-11-27',
      open: '2026-11-27T14:30:00.000Z',
      close: '2026-11-27T18:00:00.000Z',
      break_start: null,
      break_end: null,
    });
    expect(session?.earlyClose).toBe('Day after Thanksgiving');
  });

  it('when it is Wednesday 2026-11-25 after the close, then the US is closed and next opens Friday 09:30 and closes 13:00, skipping Thanksgiving', () => {
    const status = marketStatus('US', Date.parse('2026-11-25T22:00:00.000Z'));
    expect(status).toMatchObject({ state: 'post', holiday: null });
    expect(status.nextOpen?.toISOString()).toBe('2026-11-27T14:30:00.000Z');
    expect(status.nextClose?.toISOString()).toBe('2026-11-27T18:00:00.000Z');
  });

  it('when it is Thanksgiving at noon New York, then closed (not pre or post) for Thanksgiving Day, next open Friday', () => {
    const status = marketStatus('US', Date.parse('2026-11-26T17:00:00.000Z'));
    expect(status).toMatchObject({ state: 'closed', holiday: 'Thanksgiving Day' });
    expect(status.nextOpen?.toISOString()).toBe('2026-11-27T14:30:00.000Z');
    expect(status.nextClose?.toISOString()).toBe('2026-11-27T18:00:00.000Z');
  });

  it('when it is Friday 2026-11-27 at 14:00 New York, then post-market (the early close has passed) and the next session is Monday', () => {
    const status = marketStatus('US', Date.parse('2026-11-27T19:00:00.000Z'));
    expect(status.state).toBe('post');
    expect(status.nextOpen?.toISOString()).toBe('2026-11-30T14:30:00.000Z');
    expect(status.nextClose?.toISOString()).toBe('2026-11-30T21:00:00.000Z');
  });
});

/** Weekdays without a session in `year`, `MM-DD` each, and half days as `MM-DD@HH:MM` local close. */
function closedAndHalfDays(code: MarketCode, year: number): { closed: string[]; half: string[] } {
  const sessions = new Map(sessionsBetween(code, `${year}-01-01`, `${year}-12-31`).map((s) => [s.date, s]));
  const closed: string[] = [];
  const half: string[] = [];
  for (let day = parseIsoDate(`${year}-01-01`) ?? 0; day <= (parseIsoDate(`${year}-12-31`) ?? 0); day++) {
    const date = new Date(day * 86_400_000).toISOString().slice(0, 10);
    const weekday = new Date(day * 86_400_000).getUTCDay();
    if (weekday === 0 || weekday === 6) continue;
    const session = sessions.get(date);
    if (!session) closed.push(date.slice(5));
    else if (session.earlyClose) {
      const close = new Date(session.segments[session.segments.length - 1]?.endMs ?? 0);
      const zone = code === 'HK' ? 'Asia/Hong_Kong' : 'UTC';
      const local = new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', minute: '2-digit' }).format(close);
      half.push(`${date.slice(5)}@${local}`);
    }
  }
  return { closed, half };
}

describe('Hong Kong from 2023: HKEX rules, the gazetted holidays and HKEX weather notices (no fixture)', () => {
  it('when 2023 is listed, then Lunar New Year takes its fourth day (the first was a Sunday) and the three full-day weather closures are in', () => {
    expect(closedAndHalfDays('HK', 2023)).toEqual({
      closed: ['01-02', '01-23', '01-24', '01-25', '04-05', '04-07', '04-10', '05-01', '05-26', '06-22', '07-17', '09-01', '09-08', '10-02', '10-23', '12-25', '12-26'],
      half: [],
    });
  });

  it('when 2024 is listed, then Typhoon Yagi (6 September) closes and the eves are half days until noon', () => {
    expect(closedAndHalfDays('HK', 2024)).toEqual({
      closed: ['01-01', '02-12', '02-13', '03-29', '04-01', '04-04', '05-01', '05-15', '06-10', '07-01', '09-06', '09-18', '10-01', '10-11', '12-25', '12-26'],
      half: ['02-09@12:00', '12-24@12:00', '12-31@12:00'],
    });
  });

  it('when 2025 is listed, then the holidays match the gazette (Tuen Ng on a Saturday is lost)', () => {
    expect(closedAndHalfDays('HK', 2025)).toEqual({
      closed: ['01-01', '01-29', '01-30', '01-31', '04-04', '04-18', '04-21', '05-01', '05-05', '07-01', '10-01', '10-07', '10-29', '12-25', '12-26'],
      half: ['01-28@12:00', '12-24@12:00', '12-31@12:00'],
    });
  });

  it('when 2026 is listed, then Ching Ming (a Sunday, followed by Easter Monday) moves to 7 April, Buddha and Chung Yeung to the Monday', () => {
    expect(closedAndHalfDays('HK', 2026)).toEqual({
      closed: ['01-01', '02-17', '02-18', '02-19', '04-03', '04-06', '04-07', '05-01', '05-25', '06-19', '07-01', '10-01', '10-19', '12-25'],
      half: ['02-16@12:00', '12-24@12:00', '12-31@12:00'],
    });
  });

  it('when 2027 is listed, then Lunar New Year is 6 February (a Saturday): the 8th and the fourth day, the 9th, close', () => {
    expect(closedAndHalfDays('HK', 2027)).toEqual({
      closed: ['01-01', '02-08', '02-09', '03-26', '03-29', '04-05', '05-13', '06-09', '07-01', '09-16', '10-01', '10-08', '12-27'],
      half: ['02-05@12:00', '12-24@12:00', '12-31@12:00'],
    });
  });
});

describe('Shanghai from 2023: SSE announcements (no fixture)', () => {
  it('when 2024 is listed, then the Spring Festival closes from Friday 9 February and the make-up Sunday 18 February does not trade', () => {
    expect(closedAndHalfDays('CN', 2024).closed).toEqual([
      '01-01', '02-09', '02-12', '02-13', '02-14', '02-15', '02-16', '04-04', '04-05', '05-01', '05-02', '05-03', '06-10', '09-16', '09-17', '10-01', '10-02', '10-03', '10-04', '10-07',
    ]);
    expect(sessionsBetween('CN', '2024-02-04', '2024-02-04')).toEqual([]);
    expect(sessionsBetween('CN', '2024-02-18', '2024-02-18')).toEqual([]);
  });

  it('when 2025 and 2026 are listed, then they match the announced closures', () => {
    expect(closedAndHalfDays('CN', 2025).closed).toEqual([
      '01-01', '01-28', '01-29', '01-30', '01-31', '02-03', '02-04', '04-04', '05-01', '05-02', '05-05', '06-02', '10-01', '10-02', '10-03', '10-06', '10-07', '10-08',
    ]);
    expect(closedAndHalfDays('CN', 2026).closed).toEqual([
      '01-01', '01-02', '02-16', '02-17', '02-18', '02-19', '02-20', '02-23', '04-06', '05-01', '05-04', '05-05', '06-19', '09-25', '10-01', '10-02', '10-05', '10-06', '10-07',
    ]);
  });

  it('when the mainland is asked for a session, then it has the lunch break 11:30-13:00 Shanghai time', () => {
    const [session] = sessionsBetween('CN', '2026-11-25', '2026-11-25');
    expect(session && rowOf(session)).toEqual({
      date: '2026-11-25',
      open: '2026-11-25T01:30:00.000Z',
      close: '2026-11-25T07:00:00.000Z',
      break_start: '2026-11-25T03:30:00.000Z',
      break_end: '2026-11-25T05:00:00.000Z',
    });
  });
});

describe('the lunisolar table', () => {
  it("when checked against the Chinese calendar of the runtime's ICU, then every festival agrees except 2027's Lunar New Year, which ICU puts a day late", () => {
    const chinese = new Intl.DateTimeFormat('en-u-ca-chinese', { timeZone: 'UTC', month: 'numeric', day: 'numeric' });
    const lunar = (iso: string) => chinese.format(new Date(`${iso}T00:00:00Z`));
    const disagreements: string[] = [];
    for (let year = CHINESE_FESTIVAL_YEARS.first; year <= CHINESE_FESTIVAL_YEARS.last; year++) {
      const dates = CHINESE_FESTIVALS[year] ?? [];
      ['1/1', '4/8', '5/5', '8/15', '9/9'].forEach((expected, i) => {
        const date = `${year}-${dates[i]}`;
        if (lunar(date) !== expected) disagreements.push(`${date} is ${lunar(date)}, not ${expected}`);
      });
    }
    expect(disagreements).toEqual(['2027-02-06 is 12/30, not 1/1']);
  });
});

describe('holiday names', () => {
  it('when every holiday 2000-2027 is named, then each name fits the contract (letters, digits, spaces and . , \' ( ) & -)', () => {
    const bad: string[] = [];
    for (const code of ['US', 'UK', 'DE', 'EU', 'JP', 'HK', 'CN'] as const) {
      for (let year = 2000; year <= 2027; year++) {
        for (const special of specialDaysOf(code, year).values()) if (!/^[A-Za-z0-9 .,'()&-]{1,100}$/.test(special.name)) bad.push(`${code}: ${special.name}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('when Japan 2027 is listed, then the vernal equinox (Sunday 21 March) gives Monday 22 March', () => {
    expect(holidayOn('JP', parseIsoDate('2027-03-22') ?? 0)).toBe('Substitute holiday (Vernal Equinox Day)');
  });
});
