/**
 * The European Central Bank's euro foreign-exchange reference rates behind the provider port: one
 * rate per currency and business day (fixed around 14:15 CET, published around 16:00 CET), as units
 * of the currency per euro. No key. Serves `XXXYYY=X` pairs of the published currencies and EUR;
 * pairs without EUR are crossed through the euro (`USDJPY=X` = JPY rate / USD rate).
 */
import { DateTime } from 'luxon';
import type { Candle, History, HistoryQuery, Quote, SearchResult } from '../../domain/ports/market-data.js';
import type { ProviderAdapter, ProviderCapabilities, ProviderSymbol } from '../../domain/ports/providers.js';
import { fxPairOf, type CurrencyPair } from '../../domain/provider-symbols.js';
import { ECB_CURRENCIES } from '../../domain/currencies.js';
import { KeyPool } from './key-pool.js';
import { changeOf, inWindow, marketStateOf, ProviderHttp, windowOf, type ProviderHttpOptions } from './provider-http.js';
import { DAY_MS } from '../../domain/durations.js';

export type EcbMarketDataProviderOptions = ProviderHttpOptions;

export const ECB_CAPABILITIES: ProviderCapabilities = {
  quote: ['fx'],
  // The full history file goes back to 1999-01-04.
  history: { fx: { '1d': null } },
  search: [],
  events: [],
};

const DAILY_PATH = '/stats/eurofxref/eurofxref-daily.xml';
const NINETY_DAYS_PATH = '/stats/eurofxref/eurofxref-hist-90d.xml';
const FULL_PATH = '/stats/eurofxref/eurofxref-hist.xml';
/** The 90-day file holds about 62 business days; a window starting within 85 days fits in it. */
const NINETY_DAY_REACH_DAYS = 85;

/**
 * Quote: the daily file gives the price (its one date); the 90-day file gives the previous business
 * day's rate as the previous close. Open, high and low are not defined for a reference rate (null).
 * History: one bar per business day with open = high = low = close = the rate, no volume. Rates are
 * exact as published; a rate computed from two (a pair without EUR, or EUR as the quote currency)
 * keeps as many significant digits as the less precise of them.
 */
export class EcbMarketDataProvider implements ProviderAdapter {
  readonly name = 'ecb';
  readonly capabilities = ECB_CAPABILITIES;
  readonly keys = new KeyPool([]);
  readonly #http: ProviderHttp;

  constructor(options: EcbMarketDataProviderOptions) {
    this.#http = new ProviderHttp({ provider: 'ecb', label: 'ECB' }, options);
  }

  express(symbol: string): ProviderSymbol | undefined {
    const pair = fxPairOf(symbol);
    if (!pair || pair.base === pair.quote || !known(pair.base) || !known(pair.quote)) return undefined;
    return { code: `${pair.base}/${pair.quote}`, assetClass: 'fx' };
  }

  /** The latest reference rate of the pair (see the class), or `undefined` for a pair the ECB does not publish. Throws `UpstreamFailureError`. */
  async getQuote(symbol: string): Promise<Quote | undefined> {
    const pair = this.#pair(symbol);
    if (!pair) return undefined;
    const what = `quote of ${symbol}`;
    // The daily file alone gives the rate; the 90-day file only the previous fixing (null without it).
    const [daily, recent] = await Promise.all([this.#file(DAILY_PATH, what), this.#file(NINETY_DAYS_PATH, what).catch(() => undefined)]);
    const latest = daily[daily.length - 1];
    if (!latest) throw this.#http.shape(what, 'no dated rates');
    const price = crossRate(latest.rates, pair);
    // A currency the ECB stopped publishing (or never published) is not a pair it knows.
    if (price === undefined) return undefined;
    const previous = recent === undefined ? undefined : [...recent].reverse().find((day) => day.date < latest.date);
    const prevClose = recent === undefined ? null : ((previous && crossRate(previous.rates, pair)) ?? price);
    const now = this.#http.now();
    return {
      symbol,
      name: `${pair.base}/${pair.quote} (ECB reference rate)`,
      price,
      ...(prevClose === null ? { change: null, change_percent: null } : changeOf(price, prevClose)),
      open: null,
      high: null,
      low: null,
      prev_close: prevClose,
      volume: null,
      currency: pair.quote,
      timestamp: new Date(Math.min(now, fixingMs(latest.date))).toISOString(),
      exchange: 'ECB',
      instrument_type: 'currency',
      timezone: 'Europe/Berlin',
      market_state: marketStateOf('FX', now),
    };
  }

  /** One bar per business day from the 90-day file, or the full one for windows starting earlier. Throws `UpstreamFailureError`. */
  async getHistory(query: HistoryQuery): Promise<History | undefined> {
    const pair = this.#pair(query.symbol);
    if (!pair) return undefined;
    const what = `history of ${query.symbol}`;
    if (query.interval !== '1d') throw this.#http.failure('garbage', what, `interval ${query.interval} is not served`);
    const now = this.#http.now();
    const window = windowOf(query, now);
    const days = await this.#file(window.startMs >= now - NINETY_DAY_REACH_DAYS * DAY_MS ? NINETY_DAYS_PATH : FULL_PATH, what);
    const candles: Candle[] = [];
    let seen = false;
    for (const day of days) {
      const rate = crossRate(day.rates, pair);
      if (rate === undefined) continue;
      seen = true;
      const time = Date.parse(`${day.date}T00:00:00Z`);
      if (!inWindow(time, window)) continue;
      candles.push({ time: new Date(time).toISOString(), open: rate, high: rate, low: rate, close: rate, adj_close: null, volume: null });
    }
    if (!seen) return undefined;
    return { symbol: query.symbol, currency: pair.quote, timezone: 'Europe/Berlin', interval: '1d', candles, events: { dividends: [], splits: [] } };
  }

  /** The ECB publishes no instrument directory: nothing is found. */
  search(): Promise<SearchResult[]> {
    return Promise.resolve([]);
  }

  #pair(symbol: string): CurrencyPair | undefined {
    return this.express(symbol) ? fxPairOf(symbol) : undefined;
  }

  /** The dated rates of one of the ECB's files, oldest first. */
  async #file(path: string, what: string): Promise<RateDay[]> {
    const response = await this.#http.get(path, what);
    if (response.status !== 200) throw this.#http.statusFailure(what, response, undefined);
    const days = parseEurofxref(response.text);
    if (days === undefined) throw this.#http.failure('garbage', what, 'unparsable response body (not the eurofxref XML)');
    return days;
  }
}

/** One business day's rates: units of currency per euro, with the text each was published as. */
interface RateDay {
  date: string;
  rates: Map<string, Rate>;
}

interface Rate {
  value: number;
  text: string;
}

/**
 * The `Cube time='…'` blocks of a eurofxref file (daily, 90-day or full), oldest first; `undefined`
 * when the text is not such a file. Attributes may be quoted either way (the ECB writes single quotes).
 */
export function parseEurofxref(text: string): RateDay[] | undefined {
  if (!/<(?:gesmes:)?Envelope[\s>]/.test(text) || !/<Cube[\s>]/.test(text)) return undefined;
  const days: RateDay[] = [];
  const dayPattern = /<Cube\s+time=(["'])(\d{4}-\d{2}-\d{2})\1\s*>([\s\S]*?)<\/Cube>/g;
  for (const dayMatch of text.matchAll(dayPattern)) {
    const rates = new Map<string, Rate>();
    for (const rateMatch of (dayMatch[3] ?? '').matchAll(/<Cube\s+currency=(["'])([A-Z]{3})\1\s+rate=(["'])(\d+(?:\.\d+)?)\3\s*\/>/g)) {
      const [, , currency, , rate] = rateMatch;
      if (currency !== undefined && rate !== undefined) rates.set(currency, { value: Number(rate), text: rate });
    }
    if (dayMatch[2] !== undefined && rates.size > 0) days.push({ date: dayMatch[2], rates });
  }
  if (days.length === 0) return undefined;
  return days.sort((a, b) => a.date.localeCompare(b.date));
}

/** Units of `pair.quote` per one `pair.base` on that day, or `undefined` when a currency is missing. */
function crossRate(rates: Map<string, Rate>, pair: CurrencyPair): number | undefined {
  const euro: Rate = { value: 1, text: '1' };
  const base = pair.base === 'EUR' ? euro : rates.get(pair.base);
  const quote = pair.quote === 'EUR' ? euro : rates.get(pair.quote);
  if (!base || !quote) return undefined;
  if (pair.base === 'EUR') return quote.value;
  const digits = Math.min(...[base, quote].filter((r) => r !== euro).map((r) => significantDigits(r.text)));
  return Number((quote.value / base.value).toPrecision(digits));
}

/** Significant digits of a published rate (`1.0689` -> 5, `171.42` -> 5, `0.84560` -> 5). */
function significantDigits(text: string): number {
  return Math.max(1, text.replace('.', '').replace(/^0+/, '').length);
}

function known(currency: string): boolean {
  return currency === 'EUR' || ECB_CURRENCIES.has(currency);
}

/** 14:15 Central European time of `date`: when the day's reference rates are fixed. */
function fixingMs(date: string): number {
  return DateTime.fromISO(`${date}T14:15:00`, { zone: 'Europe/Berlin' }).toMillis();
}
