import { describe, expect, it } from 'vitest';
import { MARKETS, allMarketStatuses, marketOf, marketStatus, tradingSessions, type MarketCode } from '../../src/domain/market-calendar.js';
import type { MarketState } from '../../src/domain/ports/market-data.js';

/**
 * Every expected instant below was worked out by hand from the exchange's hours and the zone's UTC
 * offset on that date (2026: US daylight time from Sunday 8 March to Sunday 1 November, European
 * summer time from Sunday 29 March to Sunday 25 October; Japan, Hong Kong and China keep one offset).
 */
interface Case {
  at: string;
  state: MarketState;
  nextOpen: string | null;
  nextClose: string | null;
}

function expectStatus(code: MarketCode, expected: Case): void {
  const status = marketStatus(code, Date.parse(expected.at));
  expect({
    at: expected.at,
    state: status.state,
    nextOpen: status.nextOpen?.toISOString() ?? null,
    nextClose: status.nextClose?.toISOString() ?? null,
  }).toEqual(expected);
}

describe('marketStatus: US (New York, 09:30-16:00, pre 04:00, post until 20:00)', () => {
  it('when a weekday is in session (EST, UTC-5), then open until 16:00 and next open tomorrow 09:30', () => {
    expectStatus('US', { at: '2026-11-24T15:00:00.000Z', state: 'open', nextOpen: '2026-11-25T14:30:00.000Z', nextClose: '2026-11-24T21:00:00.000Z' });
  });

  it('when it is Saturday, then closed and the next session is Monday', () => {
    expectStatus('US', { at: '2026-11-21T15:00:00.000Z', state: 'closed', nextOpen: '2026-11-23T14:30:00.000Z', nextClose: '2026-11-23T21:00:00.000Z' });
  });

  it('when it is one millisecond before the open, then pre-market and the open is that instant; at the open itself, open', () => {
    expectStatus('US', { at: '2026-11-23T14:29:59.999Z', state: 'pre', nextOpen: '2026-11-23T14:30:00.000Z', nextClose: '2026-11-23T21:00:00.000Z' });
    expectStatus('US', { at: '2026-11-23T14:30:00.000Z', state: 'open', nextOpen: '2026-11-24T14:30:00.000Z', nextClose: '2026-11-23T21:00:00.000Z' });
  });

  it('when it is after the close, then post-market until 20:00 and closed after that; before 04:00, closed', () => {
    expectStatus('US', { at: '2026-11-23T21:00:00.000Z', state: 'post', nextOpen: '2026-11-24T14:30:00.000Z', nextClose: '2026-11-24T21:00:00.000Z' });
    expectStatus('US', { at: '2026-11-24T01:00:00.000Z', state: 'closed', nextOpen: '2026-11-24T14:30:00.000Z', nextClose: '2026-11-24T21:00:00.000Z' });
    expectStatus('US', { at: '2026-11-24T08:59:00.000Z', state: 'closed', nextOpen: '2026-11-24T14:30:00.000Z', nextClose: '2026-11-24T21:00:00.000Z' });
    expectStatus('US', { at: '2026-11-24T09:00:00.000Z', state: 'pre', nextOpen: '2026-11-24T14:30:00.000Z', nextClose: '2026-11-24T21:00:00.000Z' });
  });

  it('when the weekend crosses the start of daylight time (8 March 2026), then Monday opens at 13:30 UTC, not 14:30', () => {
    expectStatus('US', { at: '2026-03-06T22:00:00.000Z', state: 'post', nextOpen: '2026-03-09T13:30:00.000Z', nextClose: '2026-03-09T20:00:00.000Z' });
  });

  it('when the weekend crosses the end of daylight time (1 November 2026), then Monday opens at 14:30 UTC, not 13:30', () => {
    expectStatus('US', { at: '2026-10-30T20:30:00.000Z', state: 'post', nextOpen: '2026-11-02T14:30:00.000Z', nextClose: '2026-11-02T21:00:00.000Z' });
  });

  it('when the same UTC time falls before and after the change, then the state follows the local clock', () => {
    // 13:45 UTC is 08:45 EST (pre-market) on 4 March and 09:45 EDT (in session) on 18 March.
    expectStatus('US', { at: '2026-03-04T13:45:00.000Z', state: 'pre', nextOpen: '2026-03-04T14:30:00.000Z', nextClose: '2026-03-04T21:00:00.000Z' });
    expectStatus('US', { at: '2026-03-18T13:45:00.000Z', state: 'open', nextOpen: '2026-03-19T13:30:00.000Z', nextClose: '2026-03-18T20:00:00.000Z' });
  });
});

describe('marketStatus: Europe', () => {
  it('when a UK weekday is in session in winter (GMT), then open until 16:30 UTC', () => {
    expectStatus('UK', { at: '2026-11-23T10:00:00.000Z', state: 'open', nextOpen: '2026-11-24T08:00:00.000Z', nextClose: '2026-11-23T16:30:00.000Z' });
  });

  it('when the UK weekend crosses the start of summer time (29 March 2026), then Monday opens at 07:00 UTC', () => {
    expectStatus('UK', { at: '2026-03-27T17:00:00.000Z', state: 'closed', nextOpen: '2026-03-30T07:00:00.000Z', nextClose: '2026-03-30T15:30:00.000Z' });
  });

  it('when the US is already on summer time and Europe not yet (March 2026), then the UK and Paris still keep winter UTC hours', () => {
    expectStatus('UK', { at: '2026-03-18T16:15:00.000Z', state: 'open', nextOpen: '2026-03-19T08:00:00.000Z', nextClose: '2026-03-18T16:30:00.000Z' });
    expectStatus('EU', { at: '2026-03-18T16:15:00.000Z', state: 'open', nextOpen: '2026-03-19T08:00:00.000Z', nextClose: '2026-03-18T16:30:00.000Z' });
    expectStatus('DE', { at: '2026-03-18T16:45:00.000Z', state: 'closed', nextOpen: '2026-03-19T08:00:00.000Z', nextClose: '2026-03-19T16:30:00.000Z' });
  });

  it('when Europe is back on winter time and the US not yet (week of 26 October 2026), then Paris opens at 08:00 UTC and New York at 13:30 UTC', () => {
    expectStatus('EU', { at: '2026-10-28T07:59:00.000Z', state: 'closed', nextOpen: '2026-10-28T08:00:00.000Z', nextClose: '2026-10-28T16:30:00.000Z' });
    expectStatus('US', { at: '2026-10-28T13:30:00.000Z', state: 'open', nextOpen: '2026-10-29T13:30:00.000Z', nextClose: '2026-10-28T20:00:00.000Z' });
  });

  it('when Xetra is in session in summer (CEST), then it closes at 15:30 UTC', () => {
    expectStatus('DE', { at: '2026-07-15T07:30:00.000Z', state: 'open', nextOpen: '2026-07-16T07:00:00.000Z', nextClose: '2026-07-15T15:30:00.000Z' });
  });
});

describe('marketStatus: Asia, with lunch breaks', () => {
  it('when Tokyo is in the morning session, then open until the lunch break and the next open is the afternoon', () => {
    expectStatus('JP', { at: '2026-11-24T01:00:00.000Z', state: 'open', nextOpen: '2026-11-24T03:30:00.000Z', nextClose: '2026-11-24T02:30:00.000Z' });
  });

  it("when Tokyo is at lunch, then closed, reopening at 12:30 JST and closing at the day's close", () => {
    expectStatus('JP', { at: '2026-11-24T03:00:00.000Z', state: 'closed', nextOpen: '2026-11-24T03:30:00.000Z', nextClose: '2026-11-24T06:30:00.000Z' });
  });

  it('when Hong Kong is at lunch, then closed until 13:00 HKT and closing at 16:00 HKT', () => {
    expectStatus('HK', { at: '2026-11-24T04:30:00.000Z', state: 'closed', nextOpen: '2026-11-24T05:00:00.000Z', nextClose: '2026-11-24T08:00:00.000Z' });
  });

  it('when Shanghai is at lunch, then closed until 13:00 CST and closing at 15:00 CST', () => {
    expectStatus('CN', { at: '2026-11-24T04:00:00.000Z', state: 'closed', nextOpen: '2026-11-24T05:00:00.000Z', nextClose: '2026-11-24T07:00:00.000Z' });
  });

  it("when Shanghai has closed on Friday, then the next session is Monday's morning, which ends at the lunch break", () => {
    expectStatus('CN', { at: '2026-11-27T08:00:00.000Z', state: 'closed', nextOpen: '2026-11-30T01:30:00.000Z', nextClose: '2026-11-30T03:30:00.000Z' });
  });
});

describe('marketStatus: crypto and FX', () => {
  it('when it is any time, even a Saturday, then crypto is open with no next open or close', () => {
    expectStatus('CRYPTO', { at: '2026-11-21T03:00:00.000Z', state: 'open', nextOpen: null, nextClose: null });
  });

  it('when it is Saturday, then FX is closed until Sunday 17:00 New York and then trades until Friday 17:00', () => {
    expectStatus('FX', { at: '2026-11-21T12:00:00.000Z', state: 'closed', nextOpen: '2026-11-22T22:00:00.000Z', nextClose: '2026-11-27T22:00:00.000Z' });
  });

  it('when it is a weekday night, then FX is open, closing on Friday and reopening on Sunday', () => {
    expectStatus('FX', { at: '2026-11-25T03:00:00.000Z', state: 'open', nextOpen: '2026-11-29T22:00:00.000Z', nextClose: '2026-11-27T22:00:00.000Z' });
  });

  it('when it is exactly Friday 17:00 New York, then FX is closed', () => {
    expectStatus('FX', { at: '2026-11-27T22:00:00.000Z', state: 'closed', nextOpen: '2026-11-29T22:00:00.000Z', nextClose: '2026-12-04T22:00:00.000Z' });
  });

  it('when the FX weekend contains the start of US daylight time, then it reopens at 21:00 UTC on Sunday', () => {
    expectStatus('FX', { at: '2026-03-07T12:00:00.000Z', state: 'closed', nextOpen: '2026-03-08T21:00:00.000Z', nextClose: '2026-03-13T21:00:00.000Z' });
  });
});

describe('allMarketStatuses', () => {
  it('when asked, then answers one status per market in the order of MARKETS, each matching marketStatus', () => {
    const at = Date.parse('2026-11-24T03:00:00.000Z');
    const all = allMarketStatuses(at);
    expect(all.map((s) => s.market)).toEqual(['US', 'UK', 'DE', 'EU', 'JP', 'HK', 'CN', 'CRYPTO', 'FX']);
    expect(all.map((s) => s.market)).toEqual(MARKETS.map((m) => m.code));
    for (const status of all) expect(status).toEqual(marketStatus(status.market, at));
    expect(all.find((s) => s.market === 'JP')).toMatchObject({ name: 'Tokyo Stock Exchange', timezone: 'Asia/Tokyo', state: 'closed' });
  });
});

describe('tradingSessions', () => {
  it('when a range spans a weekend, then an equity market has no Saturday or Sunday session', () => {
    const sessions = tradingSessions('US', Date.parse('2026-11-19T00:00:00Z'), Date.parse('2026-11-25T00:00:00Z'));
    expect(sessions.map((s) => s.date)).toEqual(['2026-11-19', '2026-11-20', '2026-11-23', '2026-11-24']);
    expect(sessions[2]?.segments).toEqual([{ startMs: Date.parse('2026-11-23T14:30:00Z'), endMs: Date.parse('2026-11-23T21:00:00Z') }]);
  });

  it("when a market has a lunch break, then a session has the morning and the afternoon; FX's Monday starts on Sunday evening", () => {
    const [tokyo] = tradingSessions('JP', Date.parse('2026-11-24T00:00:00Z'), Date.parse('2026-11-24T07:00:00Z'));
    expect(tokyo?.segments).toEqual([
      { startMs: Date.parse('2026-11-24T00:00:00Z'), endMs: Date.parse('2026-11-24T02:30:00Z') },
      { startMs: Date.parse('2026-11-24T03:30:00Z'), endMs: Date.parse('2026-11-24T06:30:00Z') },
    ]);
    const [monday] = tradingSessions('FX', Date.parse('2026-11-22T23:00:00Z'), Date.parse('2026-11-22T23:01:00Z'));
    expect(monday).toMatchObject({ date: '2026-11-23', segments: [{ startMs: Date.parse('2026-11-22T22:00:00Z'), endMs: Date.parse('2026-11-23T22:00:00Z') }] });
  });

  it('when asked for crypto, then every UTC day is a session, weekends included', () => {
    const sessions = tradingSessions('CRYPTO', Date.parse('2026-11-21T00:00:00Z'), Date.parse('2026-11-23T00:00:00Z'));
    expect(sessions.map((s) => s.date)).toEqual(['2026-11-21', '2026-11-22']);
  });
});

describe('marketOf', () => {
  it('when the type is crypto or currency, then CRYPTO or FX whatever the zone', () => {
    expect(marketOf({ instrument_type: 'crypto', timezone: 'UTC' })).toBe('CRYPTO');
    expect(marketOf({ instrument_type: 'currency', timezone: 'Europe/London' })).toBe('FX');
  });

  it('when the type is anything else, then the market of the exchange zone, or undefined for a zone no market has', () => {
    const cases: Array<[string, MarketCode | undefined]> = [
      ['America/New_York', 'US'], ['America/Chicago', 'US'], ['Europe/London', 'UK'], ['Europe/Berlin', 'DE'],
      ['Europe/Paris', 'EU'], ['Europe/Amsterdam', 'EU'], ['Europe/Brussels', 'EU'], ['Europe/Madrid', 'EU'], ['Europe/Rome', 'EU'],
      ['Asia/Tokyo', 'JP'], ['Asia/Hong_Kong', 'HK'], ['Asia/Shanghai', 'CN'], ['Asia/Seoul', undefined], ['Europe/Zurich', undefined],
    ];
    for (const [timezone, market] of cases) expect([timezone, marketOf({ instrument_type: 'equity', timezone })]).toEqual([timezone, market]);
    expect(marketOf({ instrument_type: 'index', timezone: 'Asia/Tokyo' })).toBe('JP');
  });
});
