/**
 * The embedded demo provider: deterministic, realistic-looking quotes of well-known indices, with no
 * network. Its data is labelled `simulated` and must never be mistaken for market data.
 */
import type { History, HistoryQuery, MarketDataProvider, Quote, SearchResult } from '../../ports.js';

/** A simulated index: its identity and the level and behaviour its random walk stays around. */
export interface SimulatedIndex {
  symbol: string;
  name: string;
  currency: string;
  /** The level the index wanders around. */
  baseLevel: number;
  /** Typical daily move as a fraction of the level (0.01 = 1 %). */
  dailyVolatility: number;
  /** Typical volume of a whole session. */
  dailyVolume: number;
}

/**
 * The indices the simulation knows, with base levels of late 2026 orders of magnitude.
 * Symbols are Yahoo Finance's, so switching to the `yahoo` provider keeps the same list.
 */
export const SIMULATED_INDICES: readonly SimulatedIndex[] = [
  { symbol: '^GSPC', name: 'S&P 500', currency: 'USD', baseLevel: 6650, dailyVolatility: 0.009, dailyVolume: 3_100_000_000 },
  { symbol: '^DJI', name: 'Dow Jones Industrial Average', currency: 'USD', baseLevel: 46_500, dailyVolatility: 0.008, dailyVolume: 420_000_000 },
  { symbol: '^IXIC', name: 'NASDAQ Composite', currency: 'USD', baseLevel: 22_400, dailyVolatility: 0.012, dailyVolume: 8_200_000_000 },
  { symbol: '^FTSE', name: 'FTSE 100', currency: 'GBP', baseLevel: 9_600, dailyVolatility: 0.007, dailyVolume: 750_000_000 },
  { symbol: '^GDAXI', name: 'DAX Performance Index', currency: 'EUR', baseLevel: 24_000, dailyVolatility: 0.009, dailyVolume: 70_000_000 },
  { symbol: '^N225', name: 'Nikkei 225', currency: 'JPY', baseLevel: 48_500, dailyVolatility: 0.011, dailyVolume: 150_000_000 },
  { symbol: '^HSI', name: 'Hang Seng Index', currency: 'HKD', baseLevel: 26_000, dailyVolatility: 0.012, dailyVolume: 2_800_000_000 },
  { symbol: '000001.SS', name: 'SSE Composite Index', currency: 'CNY', baseLevel: 3_900, dailyVolatility: 0.009, dailyVolume: 550_000_000 },
  { symbol: '000300.SS', name: 'CSI 300 Index', currency: 'CNY', baseLevel: 4_600, dailyVolatility: 0.010, dailyVolume: 230_000_000 },
  { symbol: '^STOXX50E', name: 'EURO STOXX 50', currency: 'EUR', baseLevel: 5_650, dailyVolatility: 0.009, dailyVolume: 25_000_000 },
];

/** Options of `SimulatedMarketDataProvider`. */
export interface SimulatedMarketDataProviderOptions {
  /**
   * Symbols to quote, in this order. Defaults to every index of `SIMULATED_INDICES`. A symbol the
   * simulation does not know gets a generic series (name = symbol, currency USD, a level derived
   * from the symbol), so a custom MARKET_INDICES list still shows something in demo mode.
   */
  symbols?: readonly string[];
  /** The clock in epoch milliseconds; `Date.now` by default. Tests pin it. */
  now?: () => number;
}

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
const MINUTES_PER_DAY = DAY_MS / MINUTE_MS;

/**
 * Quotes from a deterministic random walk.
 *
 * The same clock minute always gives the same quotes (every number is derived from a PRNG seeded
 * with the symbol and the time), so a restart, a second instance or a test sees the same market.
 * Each UTC day is one session: the day's closing level comes from a slow, mean-reverting series
 * around the base level; the minutes in between follow a random walk pinned to the previous close at
 * the start of the day and to the day's close at its end, so the next day's `prev_close` is exactly
 * today's close. Open, high, low and volume are those of the path up to the current minute.
 */
export class SimulatedMarketDataProvider implements MarketDataProvider {
  readonly name = 'simulated';
  /** Works offline, so it is healthy before it is ever asked. */
  readonly local = true;

  private readonly indices: readonly SimulatedIndex[];
  private readonly now: () => number;

  constructor(options: SimulatedMarketDataProviderOptions = {}) {
    const known = new Map(SIMULATED_INDICES.map((index) => [index.symbol, index]));
    this.indices = options.symbols ? options.symbols.map((symbol) => known.get(symbol) ?? genericIndex(symbol)) : SIMULATED_INDICES;
    this.now = options.now ?? Date.now;
  }

  async getQuote(symbol: string): Promise<Quote | undefined> {
    const index = this.indices.find((i) => i.symbol === symbol);
    return index === undefined ? undefined : quoteAt(index, Math.floor(this.now() / MINUTE_MS));
  }

  async getHistory(_query: HistoryQuery): Promise<History | undefined> {
    return undefined;
  }

  async search(_query: string, _limit: number): Promise<SearchResult[]> {
    return [];
  }
}

function genericIndex(symbol: string): SimulatedIndex {
  const random = mulberry32(hashString(`generic|${symbol}`));
  return {
    symbol,
    name: symbol,
    currency: 'USD',
    baseLevel: Math.round(100 * Math.pow(100, random())),
    dailyVolatility: 0.01,
    dailyVolume: Math.round(10_000_000 * (1 + 9 * random())),
  };
}

function quoteAt(index: SimulatedIndex, minuteOfEpoch: number): Quote {
  const day = Math.floor(minuteOfEpoch / MINUTES_PER_DAY);
  const minuteOfDay = minuteOfEpoch - day * MINUTES_PER_DAY;
  const prevClose = round2(closeOfDay(index, day - 1));
  const path = intradayPath(index, day);

  let high = -Infinity;
  let low = Infinity;
  let volume = 0;
  for (let m = 0; m <= minuteOfDay; m++) {
    const point = path.prices[m] ?? prevClose;
    high = Math.max(high, point);
    low = Math.min(low, point);
    volume += path.volumes[m] ?? 0;
  }
  const price = path.prices[minuteOfDay] ?? prevClose;
  const open = path.prices[0] ?? prevClose;
  const change = price - prevClose;

  return {
    symbol: index.symbol,
    name: index.name,
    price,
    change: round2(change),
    change_percent: round2((change / prevClose) * 100),
    open,
    high,
    low,
    prev_close: prevClose,
    volume: Math.max(1, Math.round(volume)),
    currency: index.currency,
    timestamp: new Date(minuteOfEpoch * MINUTE_MS).toISOString(),
    exchange: 'SIM',
    instrument_type: 'index',
    timezone: 'UTC',
    market_state: 'open',
  };
}

/**
 * The closing level of a UTC day: the base level moved by two smooth swings (months and weeks) and a
 * daily shock. Each part depends only on the day number, so no history has to be replayed.
 */
function closeOfDay(index: SimulatedIndex, day: number): number {
  const slow = valueNoise(`${index.symbol}|slow`, day / 60) * 0.08;
  const medium = valueNoise(`${index.symbol}|medium`, day / 7) * 0.03;
  const daily = gaussian(mulberry32(hashString(`${index.symbol}|day|${day}`))) * index.dailyVolatility * 0.7;
  return index.baseLevel * Math.exp(slow + medium + daily);
}

interface DayPath {
  /** Price of every minute of the day, already rounded to cents. */
  prices: number[];
  /** Volume traded in every minute of the day. */
  volumes: number[];
}

function intradayPath(index: SimulatedIndex, day: number): DayPath {
  const random = mulberry32(hashString(`${index.symbol}|intraday|${day}`));
  const from = Math.log(closeOfDay(index, day - 1));
  const to = Math.log(closeOfDay(index, day));
  const gap = gaussian(random) * index.dailyVolatility * 0.2;
  const stepSigma = index.dailyVolatility / Math.sqrt(MINUTES_PER_DAY);

  const walk: number[] = [0];
  for (let m = 1; m < MINUTES_PER_DAY; m++) walk.push((walk[m - 1] ?? 0) + gaussian(random) * stepSigma);
  const end = walk[MINUTES_PER_DAY - 1] ?? 0;

  const prices: number[] = [];
  const volumes: number[] = [];
  const perMinuteVolume = index.dailyVolume / MINUTES_PER_DAY;
  for (let m = 0; m < MINUTES_PER_DAY; m++) {
    const t = m / (MINUTES_PER_DAY - 1);
    // A Brownian bridge: the walk bent so that it starts at the open gap and ends exactly at the
    // day's close, which keeps consecutive days consistent without replaying history.
    const bridge = (walk[m] ?? 0) - t * end + gap + t * (to - from - gap);
    prices.push(round2(Math.exp(from + bridge)));
    volumes.push(perMinuteVolume * (0.5 + random()));
  }
  return { prices, volumes };
}

/** Smoothly interpolated noise in [-1, 1] with one random knot per unit of `x`. */
function valueNoise(seed: string, x: number): number {
  const left = Math.floor(x);
  const t = x - left;
  const smooth = t * t * (3 - 2 * t);
  const a = mulberry32(hashString(`${seed}|${left}`))() * 2 - 1;
  const b = mulberry32(hashString(`${seed}|${left + 1}`))() * 2 - 1;
  return a + (b - a) * smooth;
}

/** 32-bit FNV-1a hash of a string, used as a PRNG seed. */
function hashString(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** A small, fast seeded PRNG (Mulberry32) returning floats in [0, 1). */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A standard normal sample (Box-Muller) from a uniform PRNG. */
function gaussian(random: () => number): number {
  const u = 1 - random();
  const v = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}
