/**
 * The market data ports: the API's quote, history and search shapes, and a source of them.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
import type { components } from '../../generated/api.js';

/** One market quote, exactly as the API spells it. */
export type Quote = components['schemas']['Quote'];

/** Kinds of instrument a symbol may name. */
export type InstrumentType = components['schemas']['InstrumentType'];

/** An instrument's market now: regular session, closed, or the extended sessions around it. */
export type MarketState = components['schemas']['MarketState'];

/** Historical candles of one symbol, with dividends and splits, exactly as the API spells them. */
export type History = components['schemas']['History'];

export type Candle = components['schemas']['Candle'];

export type HistoryInterval = components['schemas']['HistoryInterval'];

export type HistoryRange = components['schemas']['HistoryRange'];

/** One instrument found by a search. */
export type SearchResult = components['schemas']['SearchResult'];

/**
 * What history to fetch. `symbol` is canonical (upper-case). Exactly one of `range` and
 * `startMs`/`endMs` is set; the service has already checked the rules an upstream cannot serve
 * (1m beyond 7 days, intraday beyond 60 days, more than 5,000 candles).
 */
export interface HistoryQuery {
  symbol: string;
  interval: HistoryInterval;
  /** A named period ending now. */
  range?: HistoryRange;
  /** Start of the window, epoch milliseconds, inclusive. */
  startMs?: number;
  /** End of the window, epoch milliseconds, exclusive. */
  endMs?: number;
}

/**
 * A source of market data. Symbols handed in are canonical (upper-case, `[A-Z0-9^.=-]{1,32}`).
 * "Unknown symbol" is an answer (`undefined`), never an error; every upstream failure (error status,
 * timeout, refused connection, unparsable body, throttling) is a `DataSourceError`.
 */
export interface MarketDataProvider {
  /** Short name reported as `source` (`simulated`, `yahoo`). */
  readonly name: string;
  /** The current quote of `symbol`, or `undefined` when the provider does not know it. */
  getQuote(symbol: string): Promise<Quote | undefined>;
  /** Candles of `query.symbol` in ascending time, or `undefined` when the provider does not know it. */
  getHistory(query: HistoryQuery): Promise<History | undefined>;
  /** Instruments matching `query` (1 to 64 characters), best first, at most `limit` (1 to 25); `[]` for none. */
  search(query: string, limit: number): Promise<SearchResult[]>;
  /**
   * For a provider that routes each read among others (the provider router): the name of the provider
   * that gave `answer` (an object or list one of the methods above resolved to); `undefined` when unknown.
   */
  sourceOf?(answer: object): string | undefined;
}
