import { describe, expect, it } from 'vitest';
import { barFactors, LocalDays, publishedAtMs, RateTable, targetCurrency, unitOf } from '../../src/domain/currencies.js';
import { parseIsoDate } from '../../src/domain/civil-date.js';
import { InvalidRequestError } from '../../src/domain/errors.js';
import { convertDividends } from '../../src/domain/history-conversion.js';
import { firstZipEntry, parseEurofxrefCsv } from '../../src/infra/market/ecb-reference-rates.js';
import { ECB_HISTORY_CSV, zipOf } from '../helpers/ecb-upstream.js';
import { fixture } from '../helpers/replay-upstream.js';

const day = (iso: string) => parseIsoDate(iso)!;
const table = new RateTable([
  { date: '2024-03-28', rates: new Map([['USD', 1.0811], ['JPY', 163.45]]) },
  { date: '2024-04-02', rates: new Map([['USD', 1.0737], ['JPY', 162.9]]) },
  { date: '2024-04-03', rates: new Map([['USD', 1.0772]]) },
]);

describe('reference rates', () => {
  it('when a cross is asked, then it is the quote rate over the base rate, unrounded', () => {
    expect(table.rate('USD', 'JPY', day('2024-04-02'))).toEqual({ rate: 162.9 / 1.0737, day: day('2024-04-02'), carried: false });
    expect(table.rate('EUR', 'USD', day('2024-04-02'))?.rate).toBe(1.0737);
    expect(table.rate('USD', 'EUR', day('2024-04-02'))?.rate).toBe(1 / 1.0737);
  });

  it('when a date has no rate, then the last one within 4 days is carried, and none further back', () => {
    expect(table.rate('EUR', 'USD', day('2024-04-01'))).toEqual({ rate: 1.0811, day: day('2024-03-28'), carried: true });
    expect(table.rate('EUR', 'USD', day('2024-04-08'))).toBeUndefined();
    expect(table.rate('EUR', 'USD', day('2024-03-27'))).toBeUndefined();
  });

  it('when one side of a cross is not published that day, then the last day with both is used', () => {
    expect(table.rate('USD', 'JPY', day('2024-04-03'))).toEqual({ rate: 162.9 / 1.0737, day: day('2024-04-02'), carried: true });
  });

  it('when a listing is in a sub-unit, then its unit is a hundredth of the currency', () => {
    expect(unitOf('GBp')).toEqual({ code: 'GBP', scale: 0.01 });
    expect(unitOf('ZAc')).toEqual({ code: 'ZAR', scale: 0.01 });
    expect(unitOf('ILA')).toEqual({ code: 'ILS', scale: 0.01 });
    expect(unitOf('GBP')).toEqual({ code: 'GBP', scale: 1 });
  });

  it('when an unknown code is asked, then 422 names the supported ones', () => {
    expect(targetCurrency('usd')).toBe('USD');
    expect(() => targetCurrency('ARS')).toThrow(InvalidRequestError);
    expect(() => targetCurrency('ARS')).toThrow(/AUD, BGN, BRL/);
  });

  it('when the clocks change, then a daily bar is dated by its local date', () => {
    const ny = new LocalDays('America/New_York');
    // 2024-03-08 and 2024-03-11 open at 09:30 New York, either side of the change to daylight time.
    expect(ny.dayOf(Date.parse('2024-03-08T14:30:00Z'))).toBe(day('2024-03-08'));
    expect(ny.dayOf(Date.parse('2024-03-11T13:30:00Z'))).toBe(day('2024-03-11'));
    const auckland = new LocalDays('Pacific/Auckland');
    expect(auckland.dayOf(Date.parse('2024-04-01T21:00:00Z'))).toBe(day('2024-04-02'));
  });

  it('when instants over two years are dated in zones with and without daylight time, then each date is the zone database\'s', () => {
    for (const timeZone of ['America/New_York', 'Europe/London', 'Pacific/Auckland', 'Australia/Lord_Howe', 'Asia/Tokyo', 'America/Sao_Paulo']) {
      const local = new LocalDays(timeZone);
      const reference = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
      for (let t = Date.parse('2018-01-01T00:00:00Z'); t < Date.parse('2020-01-01T00:00:00Z'); t += 7 * 3_600_000 + 13 * 60_000) {
        expect(local.dayOf(t), `${timeZone} ${new Date(t).toISOString()}`).toBe(day(reference.format(t)));
      }
    }
  });

  it('when an intraday bar starts before 16:00 CET, then it takes the previous day\'s rate', () => {
    expect(publishedAtMs(day('2024-04-02'))).toBe(Date.parse('2024-04-02T14:00:00Z'));
    expect(publishedAtMs(day('2024-01-02'))).toBe(Date.parse('2024-01-02T15:00:00Z'));
    const times = [Date.parse('2024-04-02T13:59:00Z'), Date.parse('2024-04-02T14:00:00Z')];
    const { factors } = barFactors(table, times, '1m', 'America/New_York', 'EUR', 'USD');
    expect([...factors]).toEqual([1.0811, 1.0737]);
  });
});

describe('dividends in another currency', () => {
  it('when a dividend is converted, then it takes its ex-date\'s rate (carried over a holiday), and one without a rate within 4 days is left out', () => {
    const dividends = [
      { time: '2024-03-28T13:30:00.000Z', amount: 0.24 },
      { time: '2024-04-01T13:30:00.000Z', amount: 0.25 },
      { time: '2024-04-12T13:30:00.000Z', amount: 0.26 },
    ];
    expect(convertDividends(table, dividends, 'America/New_York', 'USD', 'EUR')).toEqual([
      { time: '2024-03-28T13:30:00.000Z', amount: 0.24 / 1.0811 },
      { time: '2024-04-01T13:30:00.000Z', amount: 0.25 / 1.0811 },
    ]);
  });
});

describe('ECB historical file', () => {
  it('when the zipped CSV is read, then every row is a day with its published rates, N/A left out', () => {
    const days = parseEurofxrefCsv(firstZipEntry(zipOf('eurofxref-hist.csv', fixture(ECB_HISTORY_CSV)))!.toString('utf8'))!;
    expect(days[0]?.date).toBe('2024-03-28');
    expect(days[days.length - 1]?.date).toBe('2024-07-05');
    expect(days.map((d) => d.date)).not.toContain('2024-03-29');
    const june26 = days.find((d) => d.date === '2024-06-26')!;
    expect(june26.rates.get('USD')).toBe(1.0689);
    expect(june26.rates.get('JPY')).toBe(171.42);
    expect(june26.rates.has('CYP')).toBe(false);
  });

  it('when the body is not a zip, then nothing is read from it', () => {
    expect(firstZipEntry(Buffer.from('<html>maintenance</html>'))).toBeUndefined();
    expect(parseEurofxrefCsv('<html>maintenance</html>')).toBeUndefined();
  });
});
