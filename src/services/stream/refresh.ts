/**
 * The refresh of subscribed symbols: keeps each fresh ahead of its cache expiry by polling the
 * upstream (unless a push upstream prices it), then compares the cached quote with the last one sent,
 * which heals a lost broadcast message: a lost announcement costs at most one refresh period.
 */
import { inBackground } from '../../domain/background-work.js';
import type { Logger } from '../../domain/ports/logger.js';
import type { Quote } from '../../domain/ports/market-data.js';
import type { StreamMarketData, StreamObserver } from './contracts.js';

/** How many subscribed symbols one refresh tick loads at a time. */
const REFRESH_CONCURRENCY = 4;

export interface RefreshOptions {
  market: StreamMarketData;
  /** The symbols this instance's subscribers follow now. */
  symbols: () => string[];
  /** Hands a cached quote to the fan-out, which sends it when it changed. */
  reconcile: (symbol: string, quote: Quote) => Promise<void>;
  /** True while a push upstream that prices `symbol` is connected somewhere in the fleet. */
  pushing: (symbol: string) => boolean;
  /** Interval of the ticks, in ms: a symbol whose entry expires within two of them is loaded again. */
  intervalMs: number;
  observer: StreamObserver;
  logger: Logger;
  /** True once the hub has closed. */
  closed: () => boolean;
}

export class Refresh {
  readonly #o: RefreshOptions;
  #refreshing = false;

  constructor(options: RefreshOptions) {
    this.#o = options;
  }

  /**
   * Keeps subscribed symbols fresh ahead of expiry as background work (the fleet lock makes one instance load each), then
   * compares each cached quote with the last one sent, which heals a lost broadcast message.
   */
  async tick(): Promise<void> {
    if (this.#refreshing || this.#o.closed()) return;
    this.#refreshing = true;
    // Decided once per symbol as the run begins. Pushed prices keep the cache current while a push
    // upstream that prices the symbol is connected: no upstream calls for it. A run that polls any
    // symbol counts as `poll`, one that polls none as `push`.
    const symbols = this.#o.symbols();
    const polled = new Set(symbols.filter((symbol) => !this.#o.pushing(symbol)));
    try {
      const horizonMs = this.#o.intervalMs * 2;
      let next = 0;
      const worker = async () => {
        while (next < symbols.length && !this.#o.closed()) {
          const symbol = symbols[next++] as string;
          try {
            // Background work (DESIGN 19): no caller waits on a tick, so its upstream calls count against
            // BACKGROUND_BUDGET_SHARE and are refused at once when the share is spent (the cached quote stays).
            if (polled.has(symbol)) await inBackground(() => this.#o.market.refreshQuote(symbol, horizonMs));
            const quote = await this.#o.market.quoteOf(symbol);
            if (quote !== undefined) await this.#o.reconcile(symbol, quote);
          } catch (err) {
            this.#o.logger.debug({ err: (err as Error).message, symbol }, 'stream refresh failed; the next tick retries');
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(REFRESH_CONCURRENCY, symbols.length) }, worker));
    } finally {
      this.#refreshing = false;
      if (symbols.length > 0) this.#o.observer.refresh?.(polled.size > 0 ? 'poll' : 'push');
    }
  }
}
