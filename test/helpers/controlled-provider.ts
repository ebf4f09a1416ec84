/**
 * A market-data provider whose prices the test sets: a real implementation of the port (no network),
 * so a test can make a quote change at a moment of its choosing and watch it travel through the
 * cache engine and the streams.
 */
import { randomBytes } from 'node:crypto';
import type { History, MarketDataProvider, Quote, SearchResult } from '../../src/domain/ports/market-data.js';

export class ControlledProvider implements MarketDataProvider {
  /** `name`: the provider it stands for ('simulated' unless a test needs a second one). */
  constructor(readonly name = 'simulated') {}
  readonly local = true;
  readonly #prices = new Map<string, number>();
  /** How many quotes were asked for, per symbol. */
  readonly calls = new Map<string, number>();

  /** Makes `symbol` known (upper-case, as the service asks for it) at `price`, or moves its price. */
  set(symbol: string, price: number): void {
    this.#prices.set(symbol, price);
  }

  async getQuote(symbol: string): Promise<Quote | undefined> {
    this.calls.set(symbol, (this.calls.get(symbol) ?? 0) + 1);
    const price = this.#prices.get(symbol);
    if (price === undefined) return undefined;
    const prev = 100;
    return {
      symbol,
      name: `Test instrument ${symbol}`,
      price,
      change: Math.round((price - prev) * 100) / 100,
      change_percent: Math.round(((price - prev) / prev) * 10_000) / 100,
      open: prev,
      high: Math.max(prev, price),
      low: Math.min(prev, price),
      prev_close: prev,
      volume: 1000,
      currency: 'USD',
      timestamp: new Date().toISOString(),
      exchange: 'TEST',
      instrument_type: 'equity',
      timezone: 'UTC',
      // Open: the quote lives CACHE_TTL_SECONDS, whatever the calendar says.
      market_state: 'open',
    };
  }

  async getHistory(): Promise<History | undefined> {
    return undefined;
  }

  async search(): Promise<SearchResult[]> {
    return [];
  }
}

/** Symbols no other suite sharing the test Redis uses: `<prefix><random>.T`. */
export function uniqueSymbol(prefix: string): string {
  return `${prefix}${randomBytes(3).toString('hex').toUpperCase()}.T`;
}
