/**
 * What the parts of the market data service (quotes, history, exports) share: the one
 * representation cache, the provider, the memory of unknown symbols, the history store, the compute
 * pool and the clock.
 */
import type { components } from '../../generated/api.js';
import type { MarketDataProvider } from '../../domain/ports/market-data.js';
import type { ComputePool } from '../../domain/ports/compute.js';
import { historyAnswer } from '../../domain/history-answer.js';
import { sentBodyOf } from '../../domain/sent-json.js';
import type { RateTable } from '../../domain/currencies.js';
import { DataSourceError } from '../../domain/errors.js';
import type { Unknown } from '../cache/cache-types.js';
import type { RepresentationCache } from '../cache/representation-cache.js';
import type { HistoryStore } from '../history-store.js';
import type { UnknownSymbols } from '../unknown-symbols.js';

export type Source = components['schemas']['Source'];

export const UNKNOWN: Unknown = { outcome: 'unknown' };
export const REMEMBERED_UNKNOWN: Unknown = { outcome: 'unknown', fetched: false };

export interface MarketDataParts {
  engine: RepresentationCache;
  provider: MarketDataProvider;
  unknown?: UnknownSymbols | undefined;
  history?: HistoryStore | undefined;
  now?: () => number;
  /** The `source` of an answer no provider gave just now, when the provider's name is not a source itself. */
  source?: string | undefined;
  /** Where history answers of stored bars are written (DESIGN 24); without it, on the calling thread. */
  compute?: Pick<ComputePool, 'historyAnswer'> | undefined;
  /** The reference rates of `currency=` (DESIGN 25); without them, a conversion is a 503. */
  rates?: RateSource | undefined;
}

/** Where conversions get their rates: see `ReferenceRates.table`. */
export interface RateSource {
  table(): Promise<RateTable>;
}

/** Rates for a service built without any: every conversion is refused as unavailable. */
const NO_RATES: RateSource = {
  table: () => Promise.reject(new DataSourceError('No reference rates are configured: prices cannot be converted', { retryAfterSeconds: 60 })),
};

/** The history answer written on the calling thread, for a service built without a compute pool. */
const ON_THIS_THREAD: Pick<ComputePool, 'historyAnswer'> = {
  historyAnswer: async (task) => {
    const value = historyAnswer(task);
    return { value, sent: sentBodyOf(value) };
  },
};

/** The shared parts, with the few helpers every loader uses. */
export class MarketDataContext {
  readonly engine: RepresentationCache;
  readonly provider: MarketDataProvider;
  readonly unknown: UnknownSymbols | undefined;
  readonly history: HistoryStore | undefined;
  readonly now: () => number;
  readonly compute: Pick<ComputePool, 'historyAnswer'>;
  readonly rates: RateSource;
  readonly #defaultSource: string | undefined;

  constructor(parts: MarketDataParts) {
    this.engine = parts.engine;
    this.provider = parts.provider;
    this.unknown = parts.unknown;
    this.history = parts.history;
    this.now = parts.now ?? Date.now;
    this.compute = parts.compute ?? ON_THIS_THREAD;
    this.rates = parts.rates ?? NO_RATES;
    this.#defaultSource = parts.source;
  }

  /** The provider's name, as every response's `source`. */
  get source(): Source {
    // The port names providers with a plain string; the contract enumerates the ones we ship.
    return (this.#defaultSource ?? this.provider.name) as Source;
  }

  /** The provider that gave `answer` (the router knows it per answer), else the configured one. */
  sourceOf(answer: object): Source {
    return (this.provider.sourceOf?.(answer) ?? this.provider.name) as Source;
  }

  iso(): string {
    return new Date(this.now()).toISOString();
  }

  /** `REMEMBERED_UNKNOWN` when the memory of unknown symbols holds `member` in this process now. */
  remembered(member: string): Unknown | undefined {
    return this.unknown?.remembered(member) === true ? REMEMBERED_UNKNOWN : undefined;
  }
}
