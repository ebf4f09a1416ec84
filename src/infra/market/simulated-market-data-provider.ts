/**
 * The embedded demo provider: deterministic, realistic-looking quotes, history and search over a
 * directory of well-known instruments, with no network. Its data is labelled `simulated` and must
 * never be mistaken for market data.
 */
import { DateTime } from 'luxon';
import type { Candle, History, HistoryInterval, HistoryQuery, InstrumentType, MarketDataProvider, Quote, SearchResult } from '../../domain/ports/market-data.js';
import { marketOf, marketStatus, tradingSessions, type MarketCode, type TradingSession } from '../../domain/market-calendar.js';
import { SIMULATED_DIRECTORY, type SimulatedInstrument } from './simulated-directory.js';
import { canonical } from '../../domain/symbols.js';
import { MINUTE_MS, DAY_MS } from '../../domain/durations.js';

export { SIMULATED_DIRECTORY } from './simulated-directory.js';
export type { SimulatedInstrument } from './simulated-directory.js';

/** Options of `SimulatedMarketDataProvider`. */
export interface SimulatedMarketDataProviderOptions {
  /** The clock in epoch milliseconds; `Date.now` by default. Tests pin it. */
  now?: () => number;
}

/** Where `max` history starts: the simulation has no sessions before it. */
export const SIMULATED_LISTING_MS = Date.UTC(2016, 0, 4);
/** The day the directory's base levels describe; the long-term drift is measured from it. */
const REFERENCE_DAY = Math.floor(Date.UTC(2026, 10, 20) / DAY_MS);
/** Enough days back to be sure to find the session before any instant (a mainland golden week with its weekends is up to 17 days). */
const LOOKBACK_MS = 21 * DAY_MS;

const DRIFT_BY_TYPE: Record<InstrumentType, number> = { index: 0.07, equity: 0.08, etf: 0.07, future: 0.04, crypto: 0.25, currency: 0 };
const INTERVAL_MINUTES: Partial<Record<HistoryInterval, number>> = { '1m': 1, '5m': 5, '15m': 15, '30m': 30, '1h': 60 };

/** PRNG streams of one instrument: each part of the model draws from its own. */
const STREAM = { slow: 1, medium: 2, shock: 3, bar: 4, path: 5 } as const;
type Stream = (typeof STREAM)[keyof typeof STREAM];

interface Instrument extends SimulatedInstrument {
  market: MarketCode;
  seed: number;
  drift: number;
  /** Lower-cased words of the name, for search. */
  words: string[];
}

/** A day's open, high, low, close and volume, already rounded. */
interface DayBar {
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number;
}

/** A trading day minute by minute: `prices[k]` is the price after `k` minutes of trading (`prices[0]` the open, the last the close). */
interface DayPath {
  prices: Float64Array;
  /** Volume of minute `k`, summing to the day's volume. */
  volumes: Float64Array;
}

const INSTRUMENTS: ReadonlyMap<string, Instrument> = new Map(
  SIMULATED_DIRECTORY.map((entry) => {
    const market = marketOf(entry);
    if (!market) throw new Error(`Simulated instrument ${entry.symbol} has no market for ${entry.timezone}`);
    const instrument: Instrument = {
      ...entry,
      market,
      seed: hashString(entry.symbol),
      drift: entry.annualDrift ?? DRIFT_BY_TYPE[entry.instrument_type],
      words: wordsOf(entry.name),
    };
    return [entry.symbol, instrument];
  }),
);

/**
 * Quotes, history and search from a deterministic random walk that moves only while the instrument's
 * market is open.
 *
 * Every number derives from a PRNG seeded with the symbol and the trading day, so a restart, a second
 * instance or a test sees the same market. A day's close is a closed-form function of the day (a slow
 * trend, two smooth swings and a daily shock), so ten years of daily candles need no replay. The day's
 * open gaps from the previous close, its high and low are drawn around them, and only when minutes are
 * needed (a quote during the session, intraday history) is the day filled in: a Brownian bridge through
 * open, high, low and close, clipped to the day's range, so intraday candles, the daily candle and the
 * quote always agree. Outside a session nothing moves: the quote is the last close, stamped at that close.
 */
export class SimulatedMarketDataProvider implements MarketDataProvider {
  readonly name = 'simulated';
  /** Works offline, so it is healthy before it is ever asked. */
  readonly local = true;

  private readonly now: () => number;

  constructor(options: SimulatedMarketDataProviderOptions = {}) {
    this.now = options.now ?? Date.now;
  }

  /** The quote of `symbol` now; `undefined` for a symbol outside the directory. Never throws. */
  async getQuote(symbol: string): Promise<Quote | undefined> {
    const instrument = INSTRUMENTS.get(symbol);
    if (!instrument) return undefined;
    const now = this.now();
    const { current, previous } = latestSessions(instrument, now);
    const bar = dayBar(instrument, current.dayNumber, previous.dayNumber);
    const prevClose = bar.prevClose;
    // While the session runs, the quote is the day so far: the minutes completed, the price at the
    // end of the last one. Once it has ended, the whole day, stamped at the close.
    const minutes = now >= sessionEnd(current) ? undefined : elapsedMinutes(current, now);
    const day = minutes === undefined ? bar : aggregate(dayPath(instrument, current, bar), 0, minutes, minutes);
    const timestampMs = minutes === undefined ? sessionEnd(current) : timeAfterMinutes(current, minutes);
    const price = day.close;
    const change = price - prevClose;
    return {
      symbol: instrument.symbol,
      name: instrument.name,
      price,
      change: round(change, instrument.decimals),
      change_percent: round((change / prevClose) * 100, 2),
      open: day.open,
      high: day.high,
      low: day.low,
      prev_close: prevClose,
      volume: day.volume,
      currency: instrument.currency,
      timestamp: new Date(timestampMs).toISOString(),
      exchange: instrument.exchange,
      instrument_type: instrument.instrument_type,
      timezone: instrument.timezone,
      market_state: marketStatus(instrument.market, now).state,
    };
  }

  /**
   * Candles of `query.symbol` from the same walk as the quotes, only for times its market trades;
   * `undefined` for a symbol outside the directory. No dividends or splits are simulated, so
   * `adj_close` equals `close` and the event lists are empty.
   */
  async getHistory(query: HistoryQuery): Promise<History | undefined> {
    const instrument = INSTRUMENTS.get(query.symbol);
    if (!instrument) return undefined;
    const now = this.now();
    const window = resolveWindow(instrument, query, now);
    const fromMs = Math.max(window.fromMs, SIMULATED_LISTING_MS);
    // Nothing after now exists yet; a bar starting exactly now (the first minute of a session) does.
    const toMs = Math.min(window.toMs, now + 1);
    const minutes = INTERVAL_MINUTES[query.interval];
    const candles = fromMs >= toMs ? [] : minutes ? intradayCandles(instrument, fromMs, toMs, now, minutes) : dailyCandles(instrument, fromMs, toMs, now, query.interval);
    return {
      symbol: instrument.symbol,
      currency: instrument.currency,
      timezone: instrument.timezone,
      interval: query.interval,
      candles,
      events: { dividends: [], splits: [] },
    };
  }

  /**
   * Instruments of the directory matching `query` (case-insensitive): the exact symbol first, then
   * symbols starting with it, then names with a word starting with each word of the query; directory
   * order within each rank.
   */
  async search(query: string, limit: number): Promise<SearchResult[]> {
    const symbolQuery = canonical(query.trim());
    const queryWords = wordsOf(query);
    if (!symbolQuery) return [];
    const ranked: Array<{ rank: number; order: number; instrument: Instrument }> = [];
    let order = 0;
    for (const instrument of INSTRUMENTS.values()) {
      const rank = searchRank(instrument, symbolQuery, queryWords);
      if (rank !== undefined) ranked.push({ rank, order, instrument });
      order++;
    }
    ranked.sort((a, b) => a.rank - b.rank || a.order - b.order);
    return ranked.slice(0, limit).map(({ instrument }) => ({
      symbol: instrument.symbol,
      name: instrument.name,
      exchange: instrument.exchange,
      instrument_type: instrument.instrument_type,
    }));
  }
}

function searchRank(instrument: Instrument, symbolQuery: string, queryWords: string[]): number | undefined {
  if (instrument.symbol === symbolQuery) return 0;
  if (instrument.symbol.startsWith(symbolQuery)) return 1;
  if (queryWords.length > 0 && queryWords.every((word) => instrument.words.some((nameWord) => nameWord.startsWith(word)))) return 2;
  return undefined;
}

/** Lower-case words of a name; `&` stays inside a word so that `S&P` is one. */
function wordsOf(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^\p{L}\p{N}&]+/u)
    .filter((word) => word.length > 0);
}

/** The latest session that has started by `now` (in progress or finished) and the one before it. */
function latestSessions(instrument: Instrument, now: number): { current: TradingSession; previous: TradingSession } {
  const sessions = tradingSessions(instrument.market, now - LOOKBACK_MS, now + 1).filter((session) => sessionStart(session) <= now);
  const current = sessions[sessions.length - 1];
  const previous = sessions[sessions.length - 2];
  // Every market trades at least once in any ten days, so both exist.
  if (!current || !previous) throw new Error(`No session of ${instrument.market} before ${new Date(now).toISOString()}`);
  return { current, previous };
}

function sessionStart(session: TradingSession): number {
  return session.segments[0]?.startMs ?? Number.NaN;
}

function sessionEnd(session: TradingSession): number {
  return session.segments[session.segments.length - 1]?.endMs ?? Number.NaN;
}

function sessionMinutes(session: TradingSession): number {
  let total = 0;
  for (const segment of session.segments) total += (segment.endMs - segment.startMs) / MINUTE_MS;
  return total;
}

/** Whole minutes of trading in `session` before `atMs`. */
function elapsedMinutes(session: TradingSession, atMs: number): number {
  let elapsedMs = 0;
  for (const segment of session.segments) elapsedMs += Math.max(0, Math.min(atMs, segment.endMs) - segment.startMs);
  return Math.floor(elapsedMs / MINUTE_MS);
}

/** The instant `minutes` of trading after the session's open; a boundary falls on the earlier segment's end. */
function timeAfterMinutes(session: TradingSession, minutes: number): number {
  let remainingMs = minutes * MINUTE_MS;
  for (const segment of session.segments) {
    const lengthMs = segment.endMs - segment.startMs;
    if (remainingMs <= lengthMs) return segment.startMs + remainingMs;
    remainingMs -= lengthMs;
  }
  return sessionEnd(session);
}

/** The window a query asks for, before clipping to the listing and to now. */
function resolveWindow(instrument: Instrument, query: HistoryQuery, now: number): { fromMs: number; toMs: number } {
  const toMs = now + 1;
  if (query.startMs !== undefined) return { fromMs: query.startMs, toMs: query.endMs ?? toMs };
  const local = DateTime.fromMillis(now, { zone: instrument.timezone });
  switch (query.range ?? '1mo') {
    case '1d':
      return { fromMs: startOfLatestSessions(instrument, now, 1), toMs };
    case '5d':
      return { fromMs: startOfLatestSessions(instrument, now, 5), toMs };
    case '1mo':
      return { fromMs: local.minus({ months: 1 }).toMillis(), toMs };
    case '3mo':
      return { fromMs: local.minus({ months: 3 }).toMillis(), toMs };
    case '6mo':
      return { fromMs: local.minus({ months: 6 }).toMillis(), toMs };
    case '1y':
      return { fromMs: local.minus({ years: 1 }).toMillis(), toMs };
    case '2y':
      return { fromMs: local.minus({ years: 2 }).toMillis(), toMs };
    case '5y':
      return { fromMs: local.minus({ years: 5 }).toMillis(), toMs };
    case '10y':
      return { fromMs: local.minus({ years: 10 }).toMillis(), toMs };
    case 'ytd':
      return { fromMs: local.startOf('year').toMillis(), toMs };
    case 'max':
      return { fromMs: SIMULATED_LISTING_MS, toMs };
  }
}

/** The open of the `count`-th latest session that has started by `now` (1 = the current or last one). */
function startOfLatestSessions(instrument: Instrument, now: number, count: number): number {
  const started = tradingSessions(instrument.market, now - LOOKBACK_MS - count * 2 * DAY_MS, now + 1).filter((s) => sessionStart(s) <= now);
  const first = started[Math.max(0, started.length - count)];
  return first ? sessionStart(first) : now;
}

/** Sessions overlapping `[fromMs, toMs)` that have started by `now`, each with the session before it. */
function sessionsWithPrevious(instrument: Instrument, fromMs: number, toMs: number, now: number): Array<{ session: TradingSession; previous: TradingSession }> {
  const sessions = tradingSessions(instrument.market, fromMs - LOOKBACK_MS, toMs);
  const result: Array<{ session: TradingSession; previous: TradingSession }> = [];
  for (let i = 1; i < sessions.length; i++) {
    const session = sessions[i];
    const previous = sessions[i - 1];
    if (session && previous && sessionEnd(session) > fromMs && sessionStart(session) <= now) result.push({ session, previous });
  }
  return result;
}

function dailyCandles(instrument: Instrument, fromMs: number, toMs: number, now: number, interval: HistoryInterval): Candle[] {
  const days: Array<{ session: TradingSession; bar: DayBar }> = [];
  // Consecutive days share a close: carrying it halves the work of long daily histories.
  let carried: { day: number; close: number } | undefined;
  for (const { session, previous } of sessionsWithPrevious(instrument, fromMs, toMs, now)) {
    const start = sessionStart(session);
    if (start < fromMs || start >= toMs) continue;
    const bar = dayBar(instrument, session.dayNumber, previous.dayNumber, carried?.day === previous.dayNumber ? carried.close : undefined);
    carried = { day: session.dayNumber, close: bar.close };
    if (now >= sessionEnd(session)) {
      days.push({ session, bar });
    } else {
      // The day in progress: as far as it has gone, so its close is the quote's price.
      const done = elapsedMinutes(session, now);
      days.push({ session, bar: aggregate(dayPath(instrument, session, bar), 0, done, done) });
    }
  }
  if (interval === '1d') return days.map(({ session, bar }) => candle(sessionStart(session), bar));

  // Weeks run Monday to Sunday (1970-01-01, day 0, was a Thursday); months by the trading date.
  const keyOf = interval === '1wk' ? (s: TradingSession) => String(Math.floor((s.dayNumber + 3) / 7)) : (s: TradingSession) => s.date.slice(0, 7);
  const candles: Candle[] = [];
  let key: string | undefined;
  let merged: { startMs: number; bar: DayBar } | undefined;
  for (const { session, bar } of days) {
    const dayKey = keyOf(session);
    if (merged && dayKey === key) {
      merged.bar = {
        open: merged.bar.open,
        high: Math.max(merged.bar.high, bar.high),
        low: Math.min(merged.bar.low, bar.low),
        close: bar.close,
        volume: merged.bar.volume + bar.volume,
      };
      continue;
    }
    if (merged) candles.push(candle(merged.startMs, merged.bar));
    key = dayKey;
    merged = { startMs: sessionStart(session), bar };
  }
  if (merged) candles.push(candle(merged.startMs, merged.bar));
  return candles;
}

function intradayCandles(instrument: Instrument, fromMs: number, toMs: number, now: number, minutes: number): Candle[] {
  const candles: Candle[] = [];
  for (const { session, previous } of sessionsWithPrevious(instrument, fromMs, toMs, now)) {
    const path = dayPath(instrument, session, dayBar(instrument, session.dayNumber, previous.dayNumber));
    const done = now >= sessionEnd(session) ? sessionMinutes(session) : elapsedMinutes(session, now);
    // Bars are aligned on each segment's open, the way exchanges cut them (an hour bar at 09:30, 10:30...).
    let offset = 0;
    for (const segment of session.segments) {
      const length = (segment.endMs - segment.startMs) / MINUTE_MS;
      for (let first = 0; first < length; first += minutes) {
        const a = offset + first;
        const b = Math.min(offset + Math.min(first + minutes, length), done);
        const startMs = segment.startMs + first * MINUTE_MS;
        if (a >= b || startMs < fromMs || startMs >= toMs) continue;
        candles.push(candle(startMs, aggregate(path, a, b, b)));
      }
      offset += length;
    }
  }
  return candles;
}

function candle(startMs: number, bar: DayBar): Candle {
  return {
    time: new Date(startMs).toISOString(),
    open: bar.open,
    high: bar.high,
    low: bar.low,
    close: bar.close,
    adj_close: bar.close,
    volume: bar.volume,
  };
}

/** The bar of minutes `[from, to)` of a path, closing at `prices[closeAt]`. */
function aggregate(path: DayPath, from: number, to: number, closeAt: number): DayBar {
  const open = path.prices[from] ?? Number.NaN;
  const close = path.prices[closeAt] ?? Number.NaN;
  let high = Math.max(open, close);
  let low = Math.min(open, close);
  let volume = 0;
  for (let k = from; k < to; k++) {
    const price = path.prices[k + 1] ?? close;
    if (price > high) high = price;
    if (price < low) low = price;
    volume += path.volumes[k] ?? 0;
  }
  return { open, high, low, close, volume };
}

/** The closing level of trading day `day` before rounding: a trend, two smooth swings and a daily shock. */
function rawClose(instrument: Instrument, day: number): number {
  const sigma = instrument.dailyVolatility;
  const slow = valueNoise(instrument.seed, STREAM.slow, day / 60) * sigma * 9;
  const medium = valueNoise(instrument.seed, STREAM.medium, day / 7) * sigma * 3;
  const shock = gaussian(prng(instrument.seed, STREAM.shock, day)) * sigma * 0.7;
  const trend = (instrument.drift * (day - REFERENCE_DAY)) / 365;
  return instrument.baseLevel * Math.exp(slow + medium + shock + trend);
}

/** The day's bar and the previous close it gapped from. Rounding the ends first keeps `low <= open, close <= high` exact. */
function dayBar(instrument: Instrument, day: number, previousDay: number, knownPrevClose?: number): DayBar & { prevClose: number } {
  const { decimals, dailyVolatility: sigma } = instrument;
  const prevClose = knownPrevClose ?? round(rawClose(instrument, previousDay), decimals);
  const close = round(rawClose(instrument, day), decimals);
  const random = prng(instrument.seed, STREAM.bar, day);
  const open = round(prevClose * Math.exp(gaussian(random) * sigma * 0.25), decimals);
  const high = round(Math.max(open, close) * Math.exp(Math.abs(gaussian(random)) * sigma * 0.45), decimals);
  const low = round(Math.min(open, close) * Math.exp(-Math.abs(gaussian(random)) * sigma * 0.45), decimals);
  const volume = instrument.dailyVolume > 0 ? Math.round(instrument.dailyVolume * Math.exp(gaussian(random) * 0.3)) : 0;
  return { open, high, low, close, volume, prevClose };
}

/**
 * The day minute by minute: bridges through open, the high, the low (at minutes drawn for the day) and
 * close, clipped to the day's range and rounded, so every intraday aggregate stays inside the day's bar.
 */
function dayPath(instrument: Instrument, session: TradingSession, bar: DayBar): DayPath {
  const n = sessionMinutes(session);
  const random = prng(instrument.seed, STREAM.path, session.dayNumber);
  // The day's high and low fall in its middle 80 %: a pin a few minutes from the close made the bridge
  // run from the extreme to the close in those minutes (a 2 % ramp in three 1m bars on every chart).
  const margin = Math.max(1, Math.floor(n / 10));
  const inner = Math.max(2, n - 2 * margin);
  const highAt = margin + Math.floor(random() * inner);
  let lowAt = margin + Math.floor(random() * (inner - 1));
  if (lowAt >= highAt) lowAt++;
  const pins = [
    { at: 0, price: bar.open },
    { at: highAt, price: bar.high },
    { at: lowAt, price: bar.low },
    { at: n, price: bar.close },
  ].sort((a, b) => a.at - b.at);

  const prices = new Float64Array(n + 1);
  const stepSigma = (instrument.dailyVolatility * 0.8) / Math.sqrt(n);
  const scale = 10 ** instrument.decimals;
  for (let p = 0; p + 1 < pins.length; p++) {
    const from = pins[p];
    const to = pins[p + 1];
    if (!from || !to) continue;
    const length = to.at - from.at;
    const walk = new Float64Array(length + 1);
    for (let j = 1; j <= length; j++) walk[j] = (walk[j - 1] ?? 0) + gaussian(random) * stepSigma;
    const end = walk[length] ?? 0;
    const logFrom = Math.log(from.price);
    const logTo = Math.log(to.price);
    for (let j = 0; j < length; j++) {
      const t = j / length;
      // A Brownian bridge: the walk bent to leave one pin and arrive exactly at the next.
      const raw = Math.exp(logFrom + t * (logTo - logFrom) + (walk[j] ?? 0) - t * end);
      prices[from.at + j] = Math.round(Math.min(bar.high, Math.max(bar.low, raw)) * scale) / scale;
    }
  }
  for (const pin of pins) prices[pin.at] = pin.price;

  // Volume: a U shape over the day (busy open and close) with noise, split so it sums to the day's volume.
  const volumes = new Float64Array(n);
  let weightSum = 0;
  for (let k = 0; k < n; k++) {
    const u = (2 * (k + 0.5)) / n - 1;
    const weight = (0.5 + random()) * (1 + 1.5 * u * u);
    volumes[k] = weight;
    weightSum += weight;
  }
  let cumulative = 0;
  let allocated = 0;
  for (let k = 0; k < n; k++) {
    cumulative += volumes[k] ?? 0;
    const upTo = k === n - 1 ? bar.volume : Math.floor((bar.volume * cumulative) / weightSum);
    volumes[k] = upTo - allocated;
    allocated = upTo;
  }
  return { prices, volumes };
}

/** Smoothly interpolated noise in [-1, 1] with one random knot per unit of `x`. */
function valueNoise(seed: number, stream: Stream, x: number): number {
  const left = Math.floor(x);
  const t = x - left;
  const smooth = t * t * (3 - 2 * t);
  const a = prng(seed, stream, left)() * 2 - 1;
  const b = prng(seed, stream, left + 1)() * 2 - 1;
  return a + (b - a) * smooth;
}

/** A PRNG (Mulberry32) seeded from an instrument, a stream and a number. */
function prng(seed: number, stream: Stream, value: number): () => number {
  let state = mix(mix(seed, stream), value);
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Combines two 32-bit values into a well-spread 32-bit seed (a murmur3-style finaliser). */
function mix(a: number, b: number): number {
  let h = Math.imul(a ^ Math.imul(b | 0, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** 32-bit FNV-1a hash of a string. */
function hashString(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** A standard normal sample (Box-Muller) from a uniform PRNG. */
function gaussian(random: () => number): number {
  const u = 1 - random();
  const v = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

function round(value: number, decimals: number): number {
  const scale = 10 ** decimals;
  return Math.round(value * scale) / scale;
}
