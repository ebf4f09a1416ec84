import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { holidayOn, marketStatus, sessionsBetween, type MarketCode, type TradingSession } from '../../src/domain/market-calendar.js';
import { parseIsoDate } from '../../src/domain/civil-date.js';

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
