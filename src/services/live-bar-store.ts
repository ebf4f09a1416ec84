/**
 * Final live bars into the history store (DESIGN 26): the `LiveBarSink` the bar builder calls. A bar
 * is stored in its symbol's 1m series as provider `live:<upstream>` and never marks coverage: a live
 * bar is not the upstream's bar, so the upstream is still asked for the minutes it keeps, and its own
 * bars replace the live ones when they come (see `stream-history.ts`). A minute that already holds
 * the upstream's bar keeps it: the live bar is only compared with it, and a divergence recorded.
 */
import { isFromStream, liveProvider, type LiveBar, type LiveBarSink } from '../domain/live-bar.js';
import type { CandleStore, StoredCandle } from '../domain/ports/history-store.js';
import type { StreamHistory, StreamPair } from './stream-history.js';
import { MINUTE_MS } from '../domain/durations.js';

export interface LiveBarStoreOptions {
  store: CandleStore;
  stream: StreamHistory;
  now?: () => number;
}

function toStored(bar: LiveBar): StoredCandle {
  return { timeMs: bar.timeMs, open: bar.open, high: bar.high, low: bar.low, close: bar.close, adjClose: null, volume: bar.volume };
}

export class LiveBarStore implements LiveBarSink {
  readonly #store: CandleStore;
  readonly #stream: StreamHistory;
  readonly #now: () => number;

  constructor(options: LiveBarStoreOptions) {
    this.#store = options.store;
    this.#stream = options.stream;
    this.#now = options.now ?? Date.now;
  }

  /** Stores the final bars (a bar not yet final is left for its final sending); rejects when the database fails. */
  async storeFinal(bars: readonly LiveBar[]): Promise<void> {
    const groups = new Map<string, { symbol: string; provider: string; bars: Map<number, StoredCandle> }>();
    for (const bar of bars) {
      if (!bar.final || bar.interval !== '1m') continue;
      const provider = liveProvider(bar.upstream);
      const key = `${bar.symbol}\u0000${provider}`;
      const group = groups.get(key) ?? { symbol: bar.symbol, provider, bars: new Map() };
      // A later sending of the same minute (a revision) in one batch wins.
      group.bars.set(bar.timeMs, toStored(bar));
      groups.set(key, group);
    }
    for (const { symbol, provider, bars: byTime } of groups.values()) {
      const candles = [...byTime.values()].sort((a, b) => a.timeMs - b.timeMs);
      const kept = await this.#keepUpstreams(symbol, provider, candles);
      if (kept.length > 0) await this.#store.putCandles(symbol, '1m', kept, { provider, fetchedAtMs: this.#now() });
    }
  }

  /** `candles` less the minutes whose stored bar is an upstream's (compared, not replaced). */
  async #keepUpstreams(symbol: string, provider: string, candles: readonly StoredCandle[]): Promise<StoredCandle[]> {
    const span = { startMs: candles[0]!.timeMs, endMs: candles[candles.length - 1]!.timeMs + MINUTE_MS };
    const counts = await this.#store.providerCounts(symbol, '1m', span);
    if (Object.keys(counts).every(isFromStream)) return [...candles];
    const stored = new Map((await this.#store.getCandles(symbol, '1m', span)).map((c) => [c.timeMs, c]));
    const kept: StoredCandle[] = [];
    const pairs: StreamPair[] = [];
    for (const live of candles) {
      const upstream = stored.get(live.timeMs);
      const [owner] = upstream === undefined ? [] : Object.keys(await this.#store.providerCounts(symbol, '1m', { startMs: live.timeMs, endMs: live.timeMs + 1 }));
      if (upstream === undefined || owner === undefined || isFromStream(owner)) kept.push(live);
      else pairs.push({ upstream, upstreamProvider: owner, live, liveProvider: provider });
    }
    await this.#stream.record(symbol, '1m', pairs);
    return kept;
  }
}
