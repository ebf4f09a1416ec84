/**
 * Market data use cases: the configured indices, quotes of any symbol (one or a batch), history,
 * search and the trading calendar. Every read goes through the one representation cache with a
 * canonical key and a lifetime that follows the data. This file wires the parts and answers search and
 * the calendar; the parts live in `market-data/`: `quotes.ts`, `history.ts` and its rules
 * (`history-rules.ts`), `exports.ts`, the cache lifetimes (`lifetimes.ts`) and the cached quote body
 * (`quote-body.ts`).
 */
import { DataSourceError, InvalidRequestError } from '../domain/errors.js';
import type { components } from '../generated/api.js';
import type { MarketDataProvider, Quote } from '../domain/ports/market-data.js';
import type { ComputePool } from '../domain/ports/compute.js';
import { allMarketStatuses } from '../domain/market-calendar.js';
import type { CachedRepresentation, CacheStats } from './cache/cache-types.js';
import type { RepresentationCache } from './cache/representation-cache.js';
import type { HistoryStore } from './history-store.js';
import type { UnknownSymbols } from './unknown-symbols.js';
import { MarketDataContext, type Source } from './market-data/context.js';
import { Quotes } from './market-data/quotes.js';
import { HistoryReads, type HistoryWindow } from './market-data/history.js';
import { exportHistory, type HistoryExport } from './market-data/exports.js';
import type { RateSource } from './market-data/context.js';
import type { HistoryParams } from './market-data/history-rules.js';
import { SEARCH_TTL_MS } from './market-data/lifetimes.js';
import { HOUR_MS, MINUTE_MS } from '../domain/durations.js';

type SearchResponse = components['schemas']['SearchResponse'];
type MarketsResponse = components['schemas']['MarketsResponse'];

export interface MarketDataServiceOptions {
  engine: RepresentationCache;
  provider: MarketDataProvider;
  /** MARKET_INDICES: the symbols of GET /api/indices, in this order. */
  indices: readonly string[];
  /** Lifetime of a quote while its market trades (CACHE_TTL_SECONDS in ms). */
  quoteTtlMs: number;
  /** The longest a closed market's quote is kept waiting for the next open. Default one hour. */
  closedQuoteMaxTtlMs?: number;
  /**
   * The bounded memory of symbols the provider does not know (they are remembered there, for its
   * lifetime, instead of under a key per symbol). Without it, unknown symbols are asked upstream every time.
   */
  unknown?: UnknownSymbols | undefined;
  /** The history store: history is read through it (fetching only what it lacks) when given. */
  history?: HistoryStore | undefined;
  /** Clock in epoch milliseconds; `Date.now` by default. */
  now?: () => number;
  /**
   * The `source` of an answer no provider gave just now (stored history read without a fetch), when
   * the provider's name is not a source itself (a chain is named `polygon+yahoo`): its first provider.
   */
  source?: string | undefined;
  /** Where history answers of stored bars are written, off the event loop (DESIGN 24); without it, on the calling thread. */
  compute?: Pick<ComputePool, 'historyAnswer'> | undefined;
  /** The reference rates of `currency=` (DESIGN 25); without them, a conversion is a 503. */
  rates?: RateSource | undefined;
}

/** Market data for the handlers, the scheduler and the stream. */
export class MarketDataService {
  readonly #ctx: MarketDataContext;
  readonly #quotes: Quotes;
  readonly #history: HistoryReads;

  constructor(options: MarketDataServiceOptions) {
    if (!(options.quoteTtlMs > 0)) throw new RangeError(`quoteTtlMs must be positive, got ${options.quoteTtlMs}`);
    this.#ctx = new MarketDataContext(options);
    this.#quotes = new Quotes(this.#ctx, options.indices, { quoteTtlMs: options.quoteTtlMs, closedQuoteMaxTtlMs: options.closedQuoteMaxTtlMs ?? HOUR_MS });
    this.#history = new HistoryReads(this.#ctx);
  }

  /** The provider's name, as every response's `source`. */
  get source(): Source {
    return this.#ctx.source;
  }

  /** See `Quotes.getIndices`. */
  getIndices(): Promise<CachedRepresentation> {
    return this.#quotes.getIndices();
  }

  /** See `Quotes.getQuote`. */
  getQuote(symbol: string, currency?: string): Promise<CachedRepresentation> {
    return this.#quotes.getQuote(symbol, currency);
  }

  /** See `Quotes.getQuotes`. */
  getQuotes(symbolList: string, currency?: string): Promise<CachedRepresentation> {
    return this.#quotes.getQuotes(symbolList, currency);
  }

  /** See `Quotes.quoteOf`. */
  quoteOf(symbol: string): Promise<Quote | undefined> {
    return this.#quotes.quoteOf(symbol);
  }

  /** See `HistoryReads.window`. */
  historyWindow(params: HistoryParams): Promise<HistoryWindow> {
    return this.#history.window(params);
  }

  /** See `HistoryReads.getHistory`. */
  getHistory(params: HistoryParams): Promise<CachedRepresentation> {
    return this.#history.getHistory(params);
  }

  /** See `exportHistory` in `market-data/exports.ts`. */
  exportHistory(params: HistoryParams): Promise<HistoryExport> {
    return exportHistory(this.#ctx, this.#history, params);
  }

  /** Instruments matching `q`, best first; an empty list when none does. */
  async search(q: string, limit = 10): Promise<CachedRepresentation> {
    const query = q.trim();
    if (query.length === 0) throw new InvalidRequestError([{ path: 'query.q', message: 'must not be blank' }]);
    const rep = await this.#ctx.engine.read({
      kind: 'search',
      params: `${limit}:${query.toLowerCase()}`,
      load: async () => {
        const results = await this.#ctx.provider.search(query, limit);
        const body: SearchResponse = { success: true, data: results.slice(0, limit), source: this.#ctx.sourceOf(results), updated_at: this.#ctx.iso() };
        return { outcome: 'found', value: JSON.stringify(body), ttlMs: SEARCH_TTL_MS };
      },
    });
    // A search always finds (an empty list at worst); anything else is a foreign entry under its key.
    if (rep.outcome !== 'found') throw new DataSourceError('The search answer could not be read');
    return rep;
  }

  /** The trading calendar now, and how many seconds it stays true (until the next open or close, at most 60). */
  markets(): { body: MarketsResponse; maxAgeSeconds: number } {
    const now = this.#ctx.now();
    const statuses = allMarketStatuses(now);
    let nextChange = now + MINUTE_MS;
    for (const s of statuses) {
      for (const at of [s.nextOpen, s.nextClose]) if (at !== null && at.getTime() < nextChange) nextChange = at.getTime();
    }
    return {
      body: {
        success: true,
        data: statuses.map((s) => ({
          market: s.market,
          name: s.name,
          timezone: s.timezone,
          state: s.state,
          next_open: s.nextOpen?.toISOString() ?? null,
          next_close: s.nextClose?.toISOString() ?? null,
          holiday: s.holiday,
        })),
        updated_at: new Date(now).toISOString(),
      },
      maxAgeSeconds: Math.max(0, Math.floor((nextChange - now) / 1000)),
    };
  }

  /** See `Quotes.refreshIndices`. */
  refreshIndices(horizonMs: number): Promise<'ok' | 'skipped'> {
    return this.#quotes.refreshIndices(horizonMs);
  }

  /** See `Quotes.refreshQuote`. */
  refreshQuote(symbol: string, horizonMs: number): Promise<'ok' | 'skipped'> {
    return this.#quotes.refreshQuote(symbol, horizonMs);
  }

  /** Drops every cached representation, here and on every instance; resolves to how many keys went. */
  async flush(): Promise<number> {
    const unknown = (await this.#ctx.unknown?.flush()) ?? 0;
    return unknown + (await this.#ctx.engine.flush());
  }

  stats(): CacheStats {
    return this.#ctx.engine.stats();
  }
}
