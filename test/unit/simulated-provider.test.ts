import { DateTime, IANAZone } from 'luxon';
import { describe, expect, it } from 'vitest';
import { SIMULATED_DIRECTORY, SIMULATED_LISTING_MS, SimulatedMarketDataProvider } from '../../src/infra/market/simulated-market-data-provider.js';
import type { Candle, History, HistoryQuery, Quote } from '../../src/domain/ports/market-data.js';
import { marketOf } from '../../src/domain/market-calendar.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
/** Monday 23 November 2026, 10:07:30 in New York (EST): the US session is 37 minutes old. */
const MONDAY_US_SESSION = Date.parse('2026-11-23T15:07:30.000Z');
/** Friday 20 November 2026, 16:00 in New York: the US close. */
const FRIDAY_US_CLOSE = Date.parse('2026-11-20T21:00:00.000Z');
const SATURDAY_NOON = Date.parse('2026-11-21T12:00:00.000Z');
const SUNDAY_NOON = Date.parse('2026-11-22T12:00:00.000Z');

function provider(at: number): SimulatedMarketDataProvider {
  return new SimulatedMarketDataProvider({ now: () => at });
}

async function quote(symbol: string, at: number): Promise<Quote> {
  const result = await provider(at).getQuote(symbol);
  if (!result) throw new Error(`no quote for ${symbol}`);
  return result;
}

async function history(at: number, query: HistoryQuery): Promise<History> {
  const result = await provider(at).getHistory(query);
  if (!result) throw new Error(`no history for ${query.symbol}`);
  return result;
}

function expectWellFormed(candles: Candle[]): void {
  expect(candles.length).toBeGreaterThan(0);
  let previous = -Infinity;
  for (const c of candles) {
    const time = Date.parse(c.time);
    expect(new Date(time).toISOString()).toBe(c.time);
    expect(time).toBeGreaterThan(previous);
    previous = time;
    expect(c.low).toBeLessThanOrEqual(Math.min(c.open, c.close));
    expect(c.high).toBeGreaterThanOrEqual(Math.max(c.open, c.close));
    expect(c.low).toBeGreaterThan(0);
    expect(c.adj_close).toBe(c.close);
    expect(Number.isInteger(c.volume) && (c.volume ?? -1) >= 0).toBe(true);
  }
}

function localWeekday(time: string, zone: string): number {
  return DateTime.fromISO(time, { zone }).weekday;
}

describe('simulated directory', () => {
  it('when listed, then it holds at least 100 distinct instruments of every type', () => {
    expect(SIMULATED_DIRECTORY.length).toBeGreaterThanOrEqual(100);
    expect(new Set(SIMULATED_DIRECTORY.map((i) => i.symbol)).size).toBe(SIMULATED_DIRECTORY.length);
    const types = new Set(SIMULATED_DIRECTORY.map((i) => i.instrument_type));
    expect([...types].sort()).toEqual(['crypto', 'currency', 'equity', 'etf', 'future', 'index']);
    for (const symbol of ['AAPL', 'MSFT', 'NVDA', 'SAP.DE', 'ASML.AS', 'MC.PA', 'SHEL.L', '7203.T', '0700.HK', '600519.SS', 'SPY', 'QQQ', 'EURUSD=X', 'USDJPY=X', 'BTC-USD', 'ETH-USD', 'ES=F', 'GC=F', 'CL=F']) {
      expect(SIMULATED_DIRECTORY.some((i) => i.symbol === symbol)).toBe(true);
    }
  });

  it('when each entry is checked, then its symbol fits the contract in canonical upper case, its zone is IANA and has a market', () => {
    for (const entry of SIMULATED_DIRECTORY) {
      const problems: string[] = [];
      if (!/^[A-Za-z0-9^.=-]{1,32}$/.test(entry.symbol) || entry.symbol !== entry.symbol.toUpperCase()) problems.push('symbol');
      if (!IANAZone.isValidZone(entry.timezone)) problems.push('timezone');
      if (marketOf(entry) === undefined) problems.push('market');
      if (!entry.name || entry.name.length > 200 || !entry.exchange || entry.exchange.length > 64 || entry.currency.length > 8) problems.push('text');
      if (!(entry.baseLevel > 0 && entry.dailyVolatility > 0 && entry.dailyVolatility < 0.1 && entry.dailyVolume >= 0)) problems.push('numbers');
      expect([entry.symbol, problems]).toEqual([entry.symbol, []]);
    }
  });

  it('when the seed indices are looked up, then the ten indices keep their symbols, names and levels', () => {
    expect(SIMULATED_DIRECTORY.slice(0, 10).map((i) => [i.symbol, i.name, i.baseLevel])).toEqual([
      ['^GSPC', 'S&P 500', 6650],
      ['^DJI', 'Dow Jones Industrial Average', 46_500],
      ['^IXIC', 'NASDAQ Composite', 22_400],
      ['^FTSE', 'FTSE 100', 9_600],
      ['^GDAXI', 'DAX Performance Index', 24_000],
      ['^N225', 'Nikkei 225', 48_500],
      ['^HSI', 'Hang Seng Index', 26_000],
      ['000001.SS', 'SSE Composite Index', 3_900],
      ['000300.SS', 'CSI 300 Index', 4_600],
      ['^STOXX50E', 'EURO STOXX 50', 5_650],
    ]);
  });
});

describe('SimulatedMarketDataProvider.getQuote', () => {
  it('when the symbol is not in the directory (or not canonical), then undefined', async () => {
    expect(await provider(MONDAY_US_SESSION).getQuote('NOPE')).toBeUndefined();
    expect(await provider(MONDAY_US_SESSION).getQuote('aapl')).toBeUndefined();
  });

  it('when asked twice at the same instant, even by two instances, then the quotes are identical', async () => {
    for (const symbol of ['AAPL', '^N225', 'BTC-USD', 'EURUSD=X']) expect(await quote(symbol, MONDAY_US_SESSION)).toEqual(await quote(symbol, MONDAY_US_SESSION));
  });

  it('when the market is open, then the quote carries its identity, the state open, and the start of the current minute', async () => {
    const aapl = await quote('AAPL', MONDAY_US_SESSION);
    expect(aapl).toMatchObject({ symbol: 'AAPL', name: 'Apple Inc.', exchange: 'NasdaqGS', instrument_type: 'equity', timezone: 'America/New_York', currency: 'USD', market_state: 'open' });
    expect(aapl.timestamp).toBe('2026-11-23T15:07:00.000Z');
    const prevClose = aapl.prev_close as number;
    expect(aapl.change).toBeCloseTo(aapl.price - prevClose, 2);
    expect(aapl.change_percent).toBeCloseTo(((aapl.price - prevClose) / prevClose) * 100, 2);
    expect(aapl.low ?? Infinity).toBeLessThanOrEqual(Math.min(aapl.open ?? 0, aapl.price));
    expect(aapl.high ?? -Infinity).toBeGreaterThanOrEqual(Math.max(aapl.open ?? Infinity, aapl.price));
    expect(aapl.price / 270).toBeGreaterThan(0.6);
    expect(aapl.price / 270).toBeLessThan(1.6);
    const later = await quote('AAPL', MONDAY_US_SESSION + 30 * MINUTE);
    expect(later.price).not.toBe(aapl.price);
    expect(later.volume ?? 0).toBeGreaterThan(aapl.volume ?? 0);
  });

  it('when it is US Thanksgiving (2026-11-26), then a US stock does not move all day: the quote is Wednesday\'s close; on Friday it trades until the 13:00 early close only', async () => {
    const wednesdayClose = await quote('AAPL', Date.parse('2026-11-25T21:00:00.000Z'));
    const thanksgivingMorning = await quote('AAPL', Date.parse('2026-11-26T15:00:00.000Z'));
    const thanksgivingAfternoon = await quote('AAPL', Date.parse('2026-11-26T19:00:00.000Z'));
    expect(thanksgivingMorning.market_state).toBe('closed');
    expect(thanksgivingMorning.timestamp).toBe('2026-11-25T21:00:00.000Z');
    expect(thanksgivingMorning.price).toBe(wednesdayClose.price);
    expect(thanksgivingAfternoon).toEqual(thanksgivingMorning);

    const fridayMidday = await quote('AAPL', Date.parse('2026-11-27T17:00:00.000Z'));
    expect(fridayMidday.market_state).toBe('open');
    const fridayAfterEarlyClose = await quote('AAPL', Date.parse('2026-11-27T19:00:00.000Z'));
    const fridayEvening = await quote('AAPL', Date.parse('2026-11-27T23:00:00.000Z'));
    expect(fridayAfterEarlyClose.market_state).toBe('post');
    expect(fridayAfterEarlyClose.timestamp).toBe('2026-11-27T18:00:00.000Z');
    expect(fridayEvening.price).toBe(fridayAfterEarlyClose.price);
    const days = await history(Date.parse('2026-11-28T12:00:00.000Z'), { symbol: 'AAPL', interval: '1d', range: '5d' });
    expect(days.candles.map((c) => c.time).slice(-3)).toEqual(['2026-11-24T14:30:00.000Z', '2026-11-25T14:30:00.000Z', '2026-11-27T14:30:00.000Z']);
  });

  it('when it is the weekend, then an equity quote is the Friday close, stamped at the close, and does not move; Bitcoin does', async () => {
    const friday = await history(FRIDAY_US_CLOSE, { symbol: 'AAPL', interval: '1d', range: '5d' });
    const fridayCandle = friday.candles[friday.candles.length - 1];
    expect(fridayCandle?.time).toBe('2026-11-20T14:30:00.000Z');
    const saturday = await quote('AAPL', SATURDAY_NOON);
    const sunday = await quote('AAPL', SUNDAY_NOON);
    expect(saturday.price).toBe(fridayCandle?.close);
    expect(saturday.timestamp).toBe('2026-11-20T21:00:00.000Z');
    expect(saturday.market_state).toBe('closed');
    expect(sunday).toEqual(saturday);
    expect(await quote('AAPL', FRIDAY_US_CLOSE)).toEqual({ ...saturday, market_state: 'post' });

    const btcSaturday = await quote('BTC-USD', SATURDAY_NOON);
    const btcSunday = await quote('BTC-USD', SUNDAY_NOON);
    expect(btcSaturday.market_state).toBe('open');
    expect(btcSunday.price).not.toBe(btcSaturday.price);
    expect(btcSunday.timestamp).toBe('2026-11-22T12:00:00.000Z');
  });

  it("when the US is in pre-market, then the quote is still the last close and prev_close is the session before it", async () => {
    const pre = await quote('MSFT', Date.parse('2026-11-23T12:00:00.000Z'));
    const friday = await history(SATURDAY_NOON, { symbol: 'MSFT', interval: '1d', range: '5d' });
    const [thursday, fridayCandle] = friday.candles.slice(-2);
    expect(pre.market_state).toBe('pre');
    expect(pre.price).toBe(fridayCandle?.close);
    expect(pre.prev_close).toBe(thursday?.close);
    expect(pre.open).toBe(fridayCandle?.open);
  });

  it('when Hong Kong is at lunch, then the price stays where the morning ended, and moves again in the afternoon', async () => {
    const lunchStart = await quote('0700.HK', Date.parse('2026-11-24T04:00:00.000Z'));
    const midLunch = await quote('0700.HK', Date.parse('2026-11-24T04:45:00.000Z'));
    const lastMorningMinute = await quote('0700.HK', Date.parse('2026-11-24T03:59:00.000Z'));
    expect(midLunch).toEqual(lunchStart);
    expect(midLunch.market_state).toBe('closed');
    expect(midLunch.timestamp).toBe('2026-11-24T04:00:00.000Z');
    expect(lastMorningMinute.market_state).toBe('open');
    const afternoon = await quote('0700.HK', Date.parse('2026-11-24T06:00:00.000Z'));
    expect(afternoon.market_state).toBe('open');
    expect(afternoon.volume ?? 0).toBeGreaterThan(midLunch.volume ?? 0);
  });
});

describe('SimulatedMarketDataProvider.getHistory', () => {
  it('when the symbol is unknown, then undefined', async () => {
    expect(await provider(MONDAY_US_SESSION).getHistory({ symbol: 'NOPE', interval: '1d', range: '1mo' })).toBeUndefined();
  });

  it('when asked the same query twice, then the output is identical', async () => {
    const query: HistoryQuery = { symbol: 'NVDA', interval: '5m', range: '5d' };
    expect(await history(MONDAY_US_SESSION, query)).toEqual(await history(MONDAY_US_SESSION, query));
  });

  it('when equities are asked daily and hourly, then there are no weekend bars, candles ascend and are consistent', async () => {
    for (const [symbol, zone] of [['AAPL', 'America/New_York'], ['SAP.DE', 'Europe/Berlin'], ['7203.T', 'Asia/Tokyo'], ['^HSI', 'Asia/Hong_Kong']] as const) {
      for (const query of [{ interval: '1d', range: '1y' }, { interval: '1h', range: '1mo' }] as const) {
        const result = await history(MONDAY_US_SESSION, { symbol, ...query });
        expect(result).toMatchObject({ symbol, timezone: zone, interval: query.interval, events: { dividends: [], splits: [] } });
        expectWellFormed(result.candles);
        const weekend = result.candles.filter((c) => localWeekday(c.time, zone) > 5);
        expect([symbol, query.interval, weekend]).toEqual([symbol, query.interval, []]);
      }
    }
  });

  it('when crypto is asked daily, then every day has a bar; FX has none from Friday 17:00 to Sunday 17:00 New York', async () => {
    const btc = await history(MONDAY_US_SESSION, { symbol: 'BTC-USD', interval: '1d', range: '1mo' });
    expectWellFormed(btc.candles);
    const days = btc.candles.map((c) => Date.parse(c.time));
    for (let i = 1; i < days.length; i++) expect((days[i] ?? 0) - (days[i - 1] ?? 0)).toBe(DAY);
    expect(btc.candles.some((c) => localWeekday(c.time, 'UTC') === 6)).toBe(true);

    const eur = await history(MONDAY_US_SESSION, { symbol: 'EURUSD=X', interval: '1h', range: '1mo' });
    expectWellFormed(eur.candles);
    for (const c of eur.candles) {
      const ny = DateTime.fromISO(c.time, { zone: 'America/New_York' });
      const weekendGap = (ny.weekday === 5 && ny.hour >= 17) || ny.weekday === 6 || (ny.weekday === 7 && ny.hour < 17);
      expect([c.time, weekendGap]).toEqual([c.time, false]);
    }
  });

  it("when the market is open, after the close and over the weekend, then the last daily candle's close is the quote's price", async () => {
    const instants = [MONDAY_US_SESSION, FRIDAY_US_CLOSE, SATURDAY_NOON, Date.parse('2026-11-24T04:30:00.000Z'), Date.parse('2026-11-23T14:30:00.000Z')];
    for (const at of instants) {
      for (const symbol of ['AAPL', '^GSPC', '0700.HK', '^FTSE', 'BTC-USD', 'EURUSD=X', '600519.SS']) {
        const candles = (await history(at, { symbol, interval: '1d', range: '1mo' })).candles;
        const last = candles[candles.length - 1];
        const q = await quote(symbol, at);
        expect([symbol, at, last?.close]).toEqual([symbol, at, q.price]);
        expect([symbol, at, last?.open, last?.high, last?.low]).toEqual([symbol, at, q.open, q.high, q.low]);
      }
    }
  });

  it('when the minutes of a day are added up, then they make the daily candle and the daily candles make the week', async () => {
    const at = Date.parse('2026-11-20T18:00:00.000Z');
    const minutes = (await history(at, { symbol: 'JPM', interval: '1m', range: '1d' })).candles;
    const [day] = (await history(at, { symbol: 'JPM', interval: '1d', range: '1d' })).candles;
    expectWellFormed(minutes);
    expect(minutes[0]?.time).toBe('2026-11-20T14:30:00.000Z');
    expect(minutes[minutes.length - 1]?.time).toBe('2026-11-20T17:59:00.000Z');
    expect({
      open: minutes[0]?.open,
      high: Math.max(...minutes.map((c) => c.high)),
      low: Math.min(...minutes.map((c) => c.low)),
      close: minutes[minutes.length - 1]?.close,
      volume: minutes.reduce((sum, c) => sum + (c.volume ?? 0), 0),
    }).toEqual({ open: day?.open, high: day?.high, low: day?.low, close: day?.close, volume: day?.volume });

    const daily = (await history(SATURDAY_NOON, { symbol: 'JPM', interval: '1d', startMs: Date.parse('2026-11-16T00:00:00Z'), endMs: Date.parse('2026-11-21T00:00:00Z') })).candles;
    const weekly = (await history(SATURDAY_NOON, { symbol: 'JPM', interval: '1wk', startMs: Date.parse('2026-11-16T00:00:00Z'), endMs: Date.parse('2026-11-21T00:00:00Z') })).candles;
    expect(daily).toHaveLength(5);
    expect(weekly).toEqual([
      {
        time: daily[0]?.time,
        open: daily[0]?.open,
        high: Math.max(...daily.map((c) => c.high)),
        low: Math.min(...daily.map((c) => c.low)),
        close: daily[4]?.close,
        adj_close: daily[4]?.close,
        volume: daily.reduce((sum, c) => sum + (c.volume ?? 0), 0),
      },
    ]);
  });

  it('when a market with a lunch break is asked hourly, then bars restart at the afternoon open', async () => {
    const candles = (await history(Date.parse('2026-11-24T09:00:00.000Z'), { symbol: '0700.HK', interval: '1h', range: '1d' })).candles;
    expect(candles.map((c) => c.time)).toEqual([
      '2026-11-24T01:30:00.000Z', '2026-11-24T02:30:00.000Z', '2026-11-24T03:30:00.000Z',
      '2026-11-24T05:00:00.000Z', '2026-11-24T06:00:00.000Z', '2026-11-24T07:00:00.000Z',
    ]);
  });

  it('when ytd, max or an explicit window is asked, then the candles start where they should and stay inside the window', async () => {
    const ytd = (await history(MONDAY_US_SESSION, { symbol: 'MSFT', interval: '1d', range: 'ytd' })).candles;
    // 1 January is New Year's Day: the year's first session is the 2nd.
    expect(ytd[0]?.time).toBe('2026-01-02T14:30:00.000Z');
    const max = (await history(MONDAY_US_SESSION, { symbol: 'MSFT', interval: '1mo', range: 'max' })).candles;
    expect(max[0]?.time).toBe(new Date(SIMULATED_LISTING_MS + 14.5 * HOUR).toISOString());
    expect(max).toHaveLength(131);
    expectWellFormed(max);
    const startMs = Date.parse('2026-11-10T15:00:00Z');
    const endMs = Date.parse('2026-11-10T16:00:00Z');
    const window = (await history(MONDAY_US_SESSION, { symbol: 'MSFT', interval: '15m', startMs, endMs })).candles;
    expect(window.map((c) => c.time)).toEqual(['2026-11-10T15:00:00.000Z', '2026-11-10T15:15:00.000Z', '2026-11-10T15:30:00.000Z', '2026-11-10T15:45:00.000Z']);
  });

  it('when ten years of daily bars or a week of minutes are asked, then the sizes are those of the trading calendar', async () => {
    const tenYears = (await history(MONDAY_US_SESSION, { symbol: '^GSPC', interval: '1d', range: '10y' })).candles;
    // About 252 sessions a year: the weekdays less the NYSE's nine or ten holidays.
    expect(tenYears.length).toBeGreaterThan(2500);
    expect(tenYears.length).toBeLessThan(2525);
    expectWellFormed(tenYears);
    const week = (await history(MONDAY_US_SESSION, { symbol: '^GSPC', interval: '1m', startMs: MONDAY_US_SESSION - 7 * DAY, endMs: MONDAY_US_SESSION })).candles;
    // Monday 16th from 10:08 (352 bars), Tuesday to Friday (4 x 390), Monday 23rd until 10:07 (37 bars).
    expect(week).toHaveLength(352 + 4 * 390 + 37);
    expect(week[0]?.time).toBe('2026-11-16T15:08:00.000Z');
  });
});

describe('SimulatedMarketDataProvider.search', () => {
  const search = (q: string, limit = 25) => provider(MONDAY_US_SESSION).search(q, limit);

  it('when the query is a symbol, then the exact symbol comes first, then symbols that start with it, then names', async () => {
    const v = await search('v');
    expect(v[0]).toEqual({ symbol: 'V', name: 'Visa Inc.', exchange: 'NYSE', instrument_type: 'equity' });
    expect(v.slice(1, 6).map((r) => r.symbol)).toEqual(['VTI', 'VOO', 'VEA', 'VOW3.DE', 'VOD.L']);
    expect(v.slice(6).every((r) => !r.symbol.startsWith('V'))).toBe(true);
    expect(v.length).toBeGreaterThan(6);
    expect((await search('Bt')).map((r) => r.symbol)).toEqual(['BTC-USD']);
  });

  it('when the query is a word, then names with a word starting with it match, case-insensitively, in directory order', async () => {
    expect((await search('apple')).map((r) => r.symbol)).toEqual(['AAPL']);
    expect((await search('BANK')).map((r) => r.symbol)).toEqual(['BAC', 'DBK.DE', 'LLOY.L', '601398.SS', '600036.SS']);
    expect((await search('s&p 500')).map((r) => r.symbol)).toEqual(['^GSPC', 'SPY', 'VOO', 'ES=F']);
  });

  it('when the query has several words, then every word must start a word of the name', async () => {
    expect((await search('ping insur')).map((r) => r.symbol)).toEqual(['2318.HK', '601318.SS']);
    expect(await search('ping bitcoin')).toEqual([]);
  });

  it('when the limit is smaller than the matches, or nothing matches, then at most limit results, or none', async () => {
    expect((await search('a', 3)).map((r) => r.symbol)).toEqual(['AAPL', 'AMZN', 'AVGO']);
    expect(await search('zzzz')).toEqual([]);
    expect(await search('   ')).toEqual([]);
  });
});
