/**
 * Pushed prices are quotes: a price an upstream pushed is merged into the symbol's cached quote (the
 * last polled one supplies the name, the previous close, the exchange...), and the merged quote is
 * stored as the quote cache's entry, as a fill would store it. The cache engine's fill listeners
 * then do the rest: the stream hub versions the change and announces it to every instance, whose SSE
 * and WebSocket subscribers receive it; a REST read of the quote answers it.
 *
 * Prices of one symbol are applied one at a time; while one is being stored only the latest waiting
 * one is kept (a burst of ticks costs one write per symbol at a time, never a queue).
 */
import type { PushedPrice } from '../domain/ports/push.js';
import type { Logger } from '../domain/ports/logger.js';
import type { Quote } from '../domain/ports/market-data.js';
import type { CacheKind } from './cache/cache-types.js';
import type { BodyParts } from './cache/cache-entry.js';
import { writeQuoteBody } from './market-data/quote-body.js';

export interface PushedQuotesOptions {
  /** The current quote of a canonical symbol through the cache; `undefined` when unknown. */
  quoteOf(symbol: string): Promise<Quote | undefined>;
  /** Stores a quote body as the cache's entry of `quote:<symbol>` (`RepresentationCache.store`). */
  store(kind: CacheKind, params: string, value: string, ttlMs: number, parts?: BodyParts): Promise<void>;
  /** Lifetime of a stored pushed quote (CACHE_TTL_SECONDS in ms). */
  ttlMs: number;
  logger: Logger;
  now?: () => number;
}

/** How much older than the cached quote a push may be and still be applied. */
const CLOCK_TOLERANCE_MS = 5000;

interface Pending {
  update: PushedPrice;
  from: string;
}

/** Rounds like the providers' quotes: prices to 6 significant decimals, percentages to 4. */
function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** The cached quote with the pushed price: change and range follow the price; the rest stays. */
export function mergePushedPrice(base: Quote, update: PushedPrice): Quote {
  const prev = update.previousClose !== undefined && update.previousClose > 0 ? update.previousClose : (base.prev_close ?? null);
  const change = update.change ?? (prev !== null ? update.price - prev : base.change);
  const changePercent = update.changePercent ?? (prev !== null && prev !== 0 && change !== null ? (change / prev) * 100 : base.change_percent);
  const high = Math.max(update.dayHigh ?? update.price, base.high ?? update.price, update.price);
  const low = Math.min(update.dayLow ?? update.price, base.low ?? update.price, update.price);
  return {
    ...base,
    price: round(update.price, 6),
    change: change === null ? null : round(change, 6),
    change_percent: changePercent === null ? null : round(changePercent, 4),
    open: update.open !== undefined && update.open > 0 ? round(update.open, 6) : base.open,
    high: round(high, 6),
    low: round(low, 6),
    prev_close: prev === null ? null : round(prev, 6),
    volume: update.dayVolume !== undefined && update.dayVolume > 0 && Number.isSafeInteger(update.dayVolume) ? update.dayVolume : base.volume,
    timestamp: new Date(update.timeMs).toISOString(),
  };
}

/** Applies pushed prices to the quote cache. */
export class PushedQuotes {
  readonly #o: Required<PushedQuotesOptions>;
  readonly #waiting = new Map<string, Pending>();
  readonly #busy = new Set<string>();
  #applied = 0;

  constructor(options: PushedQuotesOptions) {
    this.#o = { now: Date.now, ...options };
  }

  /** Pushed prices stored so far. */
  get applied(): number {
    return this.#applied;
  }

  /** Takes a price pushed by the upstream `from`; it is stored as soon as the symbol's previous one is. */
  accept(update: PushedPrice, from: string): void {
    if (!Number.isFinite(update.price) || update.price <= 0 || !Number.isFinite(update.timeMs)) return;
    this.#waiting.set(update.symbol, { update, from });
    if (!this.#busy.has(update.symbol)) void this.#drain(update.symbol);
  }

  async #drain(symbol: string): Promise<void> {
    this.#busy.add(symbol);
    try {
      for (let next = this.#waiting.get(symbol); next !== undefined; next = this.#waiting.get(symbol)) {
        this.#waiting.delete(symbol);
        await this.#apply(next);
      }
    } finally {
      this.#busy.delete(symbol);
    }
  }

  async #apply({ update, from }: Pending): Promise<void> {
    try {
      const base = await this.#o.quoteOf(update.symbol);
      if (base === undefined) return;
      // A tick clearly older than the quote the cache holds (a slow socket, a replay) would move it
      // back; within a few seconds the two sources' clocks (a push, a poll stamped on arrival) decide nothing.
      const baseMs = Date.parse(base.timestamp);
      if (Number.isFinite(baseMs) && update.timeMs < baseMs - CLOCK_TOLERANCE_MS) return;
      const quote = mergePushedPrice(base, update);
      const { value, parts } = writeQuoteBody(quote, from, new Date(this.#o.now()).toISOString());
      await this.#o.store('quote', update.symbol, value, this.#o.ttlMs, parts);
      this.#applied += 1;
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message, symbol: update.symbol, upstream: from }, 'a pushed price could not be stored');
    }
  }
}
