/**
 * History read through the store: a window is answered from the stored bars, and only what the store
 * has not covered is asked of the upstream: spans before, after or between what was fetched before,
 * and the still-forming bars at the end (never marked covered, so they are asked again until they are
 * finished). A span asked and answered is recorded as covered, so a bar the upstream does not have
 * (a holiday, a halt) is not asked for again, and finished bars are never fetched twice.
 *
 * When the upstream cannot be asked (it fails, or the span lies beyond how far back it keeps bars of
 * that interval), what the store holds is served and the rest is reported as missing.
 *
 * Splits: bars are kept split-adjusted. A split that arrives with newly fetched bars re-bases the
 * stored bars before it that were fetched before it took effect (later-fetched ones already came on
 * the new basis), before the new bars are written, so no answer mixes the two.
 */
import type { CandleColumns, CandleStore, CorporateAction, InstrumentInfo, StoredCandle, TimeSpan } from '../domain/ports/history-store.js';
import type { History, HistoryInterval, HistoryQuery } from '../domain/ports/market-data.js';
import { tradingSessions } from '../domain/market-calendar.js';
import { listedMarketOfSymbol } from '../domain/provider-symbols.js';
import { subtractSpans } from '../domain/time-spans.js';
import type { QualityCounts, QualityFlag } from '../domain/quality/data-issues.js';
import type { DataQuality } from './data-quality.js';
import { isBackground } from '../domain/background-work.js';
import { mergeMissing, type MissingSpan } from '../domain/missing-spans.js';
import type { StreamHistory } from './stream-history.js';
import { MINUTE_MS, HOUR_MS, DAY_MS } from '../domain/durations.js';

/** How many days back `keepCurrent` reads: enough to cover a long holiday since the last run. */
const KEEP_CURRENT_DAYS = 10;

/** How long a bar of each interval lasts (a month at its longest): a bar that started later than this ago may still be forming. */
export const INTERVAL_MS: Record<HistoryInterval, number> = {
  '1m': MINUTE_MS,
  '5m': 5 * MINUTE_MS,
  '15m': 15 * MINUTE_MS,
  '30m': 30 * MINUTE_MS,
  '1h': HOUR_MS,
  '1d': DAY_MS,
  '1wk': 7 * DAY_MS,
  '1mo': 31 * DAY_MS,
};

/** What an upstream serves of one interval: how far back it keeps bars, and the longest window one call may ask. */
export interface UpstreamReach {
  /** Bars older than this are not kept upstream (ms before now); `Infinity` when it keeps them all. */
  retentionMs: number;
  /** The longest window one call may ask (ms); `Infinity` when any. */
  maxWindowMs: number;
}

/** What Yahoo (the reference upstream) serves: 1m bars for 30 days in 7-day windows, other intraday bars for 60 days. */
export function defaultReach(interval: HistoryInterval): UpstreamReach {
  if (interval === '1m') return { retentionMs: 30 * DAY_MS, maxWindowMs: 7 * DAY_MS };
  if (interval.endsWith('m') || interval === '1h') return { retentionMs: 60 * DAY_MS, maxWindowMs: 60 * DAY_MS };
  return { retentionMs: Infinity, maxWindowMs: Infinity };
}

export interface HistoryStoreOptions {
  store: CandleStore;
  /** Asks the upstream for one window (`startMs`/`endMs` set); `undefined` when it does not know the symbol. Throws on failure. */
  fetch: (query: HistoryQuery) => Promise<History | undefined>;
  /** The name of the upstream that gave `answer` (a router knows it per answer), recorded with it. */
  provider: (answer: History) => string;
  /** How far back the upstream keeps bars of `interval` of `symbol` (the provider plans' reach); default Yahoo's. */
  reach?: (interval: HistoryInterval, symbol: string) => UpstreamReach;
  /**
   * The error of a window wholly beyond the upstream's reach of which the store holds nothing (a 422
   * naming how to reach it); without it such a window answers as the store has it (empty, all missing).
   */
  beyondReach?: (symbol: string, interval: HistoryInterval) => Error;
  now?: () => number;
  /** The data-quality checks every fetched answer passes before it is stored (none: kept as given). */
  quality?: DataQuality | undefined;
  /**
   * The providers of the chain. Bars a provider outside it gave (the simulated demo's, once a real
   * provider is configured) are never served as the chain's: they are dropped and the span fetched again.
   */
  chain?: readonly string[] | undefined;
  /** Live bars as history (DESIGN 26): where the upstream cannot answer, stored live minutes do; its bars are compared with them. */
  stream?: StreamHistory | undefined;
}

/** Series checked for bars of providers outside the chain, at most (then the memory starts over). */
const CHECKED_SERIES_MAX = 50_000;

/**
 * A window of history as the store can give it, its bars an array (`read`) or columns (`readColumns`).
 */
export interface StoredHistory<Bars = StoredCandle[]> {
  /** Currency and exchange zone; `undefined` when neither the store nor the upstream knows the symbol. */
  info: InstrumentInfo | undefined;
  /** Split-adjusted bars in the window, oldest first (at most `limit` when one was given). */
  candles: Bars;
  /** Dividends and splits known from the window's start until now, oldest first (splits after the window set the basis of `adjust=none`). */
  actions: CorporateAction[];
  /** Parts of the window the answer lacks, each with why (beyond the upstream's reach, its failure, no live bar), oldest first. */
  missing: MissingSpan[];
  /** True when the upstream was asked for any part of the window. */
  fetched: boolean;
  /** How many bars this read wrote to the store (fetched now). */
  written: number;
  /** The upstream's failure when one call failed; the rest of the window is still served. */
  failure?: unknown;
  /** The provider that answered the last window fetched by this read; absent when nothing was fetched. */
  source?: string;
  /** Flags of the bars the data-quality checks repaired or suspect, by bar start; absent when none. */
  flags?: Map<number, QualityFlag[]>;
  /** What the data-quality checks did to the window's bars; absent when nothing. */
  quality?: QualityCounts;
  /** The served bars by the provider that gave them; absent unless more than one did. */
  sources?: Record<string, number>;
  /** True when every served bar was built from a push stream (`source` then names `live:<upstream>`). */
  fromStream?: boolean;
  /** Where stream-built bars are served beside an upstream's: their start times, ascending. */
  streamTimes?: number[];
}

function splitsOf(actions: readonly CorporateAction[]): Array<Extract<CorporateAction, { kind: 'split' }>> {
  return actions.filter((a): a is Extract<CorporateAction, { kind: 'split' }> => a.kind === 'split');
}

/** A provider's history as rows for the store, keeping only the bars inside `span`. */
function toStored(history: History, span: TimeSpan): { candles: StoredCandle[]; actions: CorporateAction[] } {
  const candles: StoredCandle[] = [];
  for (const c of history.candles) {
    const timeMs = Date.parse(c.time);
    if (timeMs < span.startMs || timeMs >= span.endMs) continue;
    candles.push({ timeMs, open: c.open, high: c.high, low: c.low, close: c.close, adjClose: c.adj_close, volume: c.volume });
  }
  const actions: CorporateAction[] = [
    ...history.events.dividends.map((d) => ({ kind: 'dividend' as const, timeMs: Date.parse(d.time), amount: d.amount })),
    ...history.events.splits.map((s) => ({ kind: 'split' as const, timeMs: Date.parse(s.time), numerator: s.numerator, denominator: s.denominator })),
  ];
  return { candles, actions };
}

/** The history store's read and fill logic; see the module comment. */
export class HistoryStore {
  readonly #store: CandleStore;
  readonly #fetch: HistoryStoreOptions['fetch'];
  readonly #provider: (answer: History) => string;
  readonly #reach: (interval: HistoryInterval, symbol: string) => UpstreamReach;
  readonly #beyondReach: ((symbol: string, interval: HistoryInterval) => Error) | undefined;
  readonly #now: () => number;
  readonly #quality: DataQuality | undefined;
  readonly #chain: ReadonlySet<string> | undefined;
  readonly #stream: StreamHistory | undefined;
  /** Series whose stored bars were found to be the chain's own since this process started. */
  readonly #checked = new Set<string>();

  constructor(options: HistoryStoreOptions) {
    this.#chain = options.chain === undefined ? undefined : new Set(options.chain);
    this.#quality = options.quality;
    this.#stream = options.stream;
    this.#store = options.store;
    this.#fetch = options.fetch;
    this.#provider = options.provider;
    this.#reach = options.reach ?? defaultReach;
    this.#beyondReach = options.beyondReach;
    this.#now = options.now ?? Date.now;
  }

  /**
   * The oldest instant the upstream still serves bars of `interval` for (`-Infinity` when it keeps all):
   * a read or backfill reaching further back gets only what the store already holds before it.
   */
  oldestFetchableMs(interval: HistoryInterval, symbol: string): number {
    return this.#now() - this.#reach(interval, symbol).retentionMs;
  }

  /**
   * The bars of `symbol` in `span`, fetching what the store lacks. Resolves with `info` undefined when
   * the symbol is unknown upstream and nothing is stored; rejects with the upstream's failure only
   * when nothing of the window could be served. `sources: false` skips counting the bars by provider
   * (`sources` stays absent): a reader that does not answer with them (indicators) spares the store a
   * pass over every bar of the window.
   */
  read(symbol: string, interval: HistoryInterval, span: TimeSpan, limit?: number, options: { sources?: boolean } = {}): Promise<StoredHistory> {
    return this.#read(symbol, interval, span, options, (window) => this.#store.getCandles(symbol, interval, window, limit), (candles) => ({
      count: candles.length,
      firstMs: candles[0]?.timeMs,
      lastMs: candles[candles.length - 1]?.timeMs,
    }));
  }

  /**
   * As `read`, the bars as columns: no object per bar, for a window read to be computed on (the
   * indicators and their warm-up, the candles of a history answer). `offLoop`: the bars go to a
   * compute thread whatever their number, so the store reads them off the event loop where it can.
   */
  readColumns(symbol: string, interval: HistoryInterval, span: TimeSpan, limit?: number, options: { sources?: boolean; offLoop?: boolean } = {}): Promise<StoredHistory<CandleColumns>> {
    const offLoop = options.offLoop === true ? { offLoop: true } : undefined;
    return this.#read(symbol, interval, span, options, (window) => this.#store.getCandleColumns(symbol, interval, window, limit, offLoop), (columns) => {
      const count = columns.timeMs.length;
      return { count, firstMs: count === 0 ? undefined : columns.timeMs[0], lastMs: count === 0 ? undefined : columns.timeMs[count - 1] };
    });
  }

  async #read<Bars>(
    symbol: string,
    interval: HistoryInterval,
    span: TimeSpan,
    options: { sources?: boolean },
    select: (window: TimeSpan) => Promise<Bars>,
    extent: (bars: Bars) => { count: number; firstMs: number | undefined; lastMs: number | undefined },
  ): Promise<StoredHistory<Bars>> {
    const now = this.#now();
    const window = { startMs: span.startMs, endMs: Math.min(span.endMs, now + INTERVAL_MS[interval]) };
    await this.#dropForeign(symbol, interval);
    const covered = window.endMs > window.startMs ? await this.#store.coverage(symbol, interval, window) : [];
    const gaps = subtractSpans(window, covered);
    const reach = this.#reach(interval, symbol);
    const oldestKept = now - reach.retentionMs;
    let missing: MissingSpan[] = [];
    let fetched = false;
    let unknown = false;
    let failure: unknown;
    let fetchedInfo: InstrumentInfo | undefined;
    let source: string | undefined;
    let written = 0;
    let beyondReach = false;
    for (const gap of gaps) {
      if (failure !== undefined || unknown) {
        if (failure !== undefined) missing.push({ ...gap, reason: 'upstream_failed' });
        continue;
      }
      if (gap.endMs <= oldestKept) {
        missing.push({ ...gap, reason: 'beyond_reach' });
        beyondReach = true;
        continue;
      }
      if (gap.startMs < oldestKept) missing.push({ startMs: gap.startMs, endMs: oldestKept, reason: 'beyond_reach' });
      for (let from = Math.max(gap.startMs, oldestKept); from < gap.endMs; from += reach.maxWindowMs) {
        const chunk = { startMs: from, endMs: Math.min(gap.endMs, from + reach.maxWindowMs) };
        fetched = true;
        let history: History | undefined;
        try {
          history = await this.#fetch({ symbol, interval, startMs: chunk.startMs, endMs: chunk.endMs });
        } catch (err) {
          failure = err;
          missing.push({ startMs: chunk.startMs, endMs: gap.endMs, reason: 'upstream_failed' });
          break;
        }
        if (history === undefined) {
          unknown = true;
          break;
        }
        source = this.#provider(history);
        const kept = await this.#keep(symbol, interval, chunk, history, now);
        fetchedInfo = { currency: kept.currency, timezone: history.timezone };
        written += kept.written;
      }
    }
    if (this.#stream !== undefined) missing = await this.#stream.fill(symbol, interval, missing);
    const [candles, actions, storedInfo, quality] = await Promise.all([
      select(window),
      this.#store.getActions(symbol, { startMs: window.startMs, endMs: Math.max(window.endMs, now + 1) }),
      fetchedInfo === undefined ? this.#store.getInstrument(symbol) : Promise.resolve(fetchedInfo),
      this.#quality?.window(symbol, interval, window),
    ]);
    const { count, firstMs, lastMs } = extent(candles);
    if (failure !== undefined && count === 0 && storedInfo === undefined) throw failure;
    // Nothing of the window is stored and none of it is within reach: say how to reach it, never "unknown".
    if (beyondReach && !fetched && count === 0 && this.#beyondReach !== undefined) throw this.#beyondReach(symbol, interval);
    const info = unknown && count === 0 ? undefined : storedInfo;
    // Where the served bars came from more than one provider, the answer counts them by provider; bars all built from a stream name it.
    const sources = count > 0 && options.sources !== false ? await this.#store.providerCounts(symbol, interval, { startMs: firstMs!, endMs: lastMs! + 1 }) : {};
    const streamed = count > 0 ? await this.#stream?.provenance(symbol, interval, sources, { startMs: firstMs!, endMs: lastMs! + 1 }) : undefined;
    const judged = quality !== undefined && quality.counts.repaired + quality.counts.dropped + quality.counts.suspect > 0;
    return {
      info,
      candles,
      actions,
      missing: mergeMissing(missing),
      fetched,
      written,
      ...(failure !== undefined ? { failure } : {}),
      ...(streamed?.only !== undefined ? { source: streamed.only, fromStream: true } : source !== undefined ? { source } : {}),
      ...(streamed?.times !== undefined ? { streamTimes: streamed.times } : {}),
      ...(judged ? { flags: quality.flags, quality: quality.counts } : {}),
      ...(Object.keys(sources).length > 1 ? { sources } : {}),
    };
  }

  /**
   * Keeps the daily history of `symbols` current: each symbol already in the store whose market closed
   * a session since `sinceMs` has its last days read again (only the new bars are fetched); the market
   * is the symbol's, by the symbol rule (crypto closes each UTC day). Symbols of an exchange not listed
   * here are read once a UTC day. Resolves to how many symbols were read;
   * one symbol's failure does not stop the others.
   */
  async keepCurrent(symbols: Iterable<string>, sinceMs: number): Promise<number> {
    const now = this.#now();
    let read = 0;
    for (const symbol of new Set(symbols)) {
      const info = await this.#store.getInstrument(symbol);
      if (info === undefined) continue;
      const market = listedMarketOfSymbol(symbol);
      const closed =
        market === undefined
          ? Math.floor(sinceMs / DAY_MS) < Math.floor(now / DAY_MS)
          : tradingSessions(market, sinceMs, now).some((s) => {
              const end = s.segments[s.segments.length - 1]!.endMs;
              return end > sinceMs && end <= now;
            });
      if (!closed) continue;
      await this.read(symbol, '1d', { startMs: now - KEEP_CURRENT_DAYS * DAY_MS, endMs: now }, 1).catch(() => undefined);
      read++;
    }
    return read;
  }

  /** Drops, once per series and process, what providers outside the chain stored of `symbol` and `interval`. */
  async #dropForeign(symbol: string, interval: HistoryInterval): Promise<void> {
    const chain = this.#chain;
    if (chain === undefined) return;
    const key = `${symbol}\u0000${interval}`;
    if (this.#checked.has(key)) return;
    for (const provider of await this.#store.coverageProviders(symbol, interval)) {
      if (!chain.has(provider)) await this.#store.purgeProvider(provider, { symbol, interval });
    }
    if (this.#checked.size >= CHECKED_SERIES_MAX) this.#checked.clear();
    this.#checked.add(key);
  }

  /**
   * True when the store has covered all of `span`, or holds live minutes in it that answer intraday
   * reads beyond the upstream's reach (what it holds is served even there).
   */
  async holds(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<boolean> {
    if (span.endMs <= span.startMs) return true;
    if (subtractSpans(span, await this.#store.coverage(symbol, interval, span)).length === 0) return true;
    return this.#stream !== undefined && INTERVAL_MS[interval] <= HOUR_MS && (await this.#stream.streamProviders(symbol, span)).length > 0;
  }

  /** How many stored bars `span` holds. */
  count(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<number> {
    return this.#store.countCandles(symbol, interval, span);
  }

  /** The stored bars of `span` as columns, oldest first, `pageSize` at a time (for exports too large to hold whole). */
  async *pages(symbol: string, interval: HistoryInterval, span: TimeSpan, pageSize: number): AsyncGenerator<CandleColumns> {
    let from = span.startMs;
    while (from < span.endMs) {
      const page = await this.#store.getCandleColumns(symbol, interval, { startMs: from, endMs: span.endMs }, pageSize);
      const count = page.timeMs.length;
      // Read before the page is yielded: its columns may be handed to a compute thread, which empties them here.
      const next = count === 0 ? span.endMs : page.timeMs[count - 1]! + 1;
      if (count > 0) yield page;
      if (count < pageSize) return;
      from = next;
    }
  }

  /** Writes what one call answered: new splits re-base older stored bars first, then bars, events and coverage. */
  async #keep(symbol: string, interval: HistoryInterval, chunk: TimeSpan, history: History, now: number): Promise<{ written: number; currency: string }> {
    const source = { provider: this.#provider(history), fetchedAtMs: now };
    const stored = toStored(history, chunk);
    const { actions } = stored;
    let { candles } = stored;
    let currency = history.currency;
    const newSplits = splitsOf(actions);
    if (this.#quality !== undefined) {
      const checked = await this.#quality.check({
        symbol,
        interval,
        span: chunk,
        currency,
        timezone: history.timezone,
        candles,
        splits: newSplits,
        storedSplits: async () => splitsOf(await this.#store.getActions(symbol, { startMs: chunk.startMs - INTERVAL_MS[interval], endMs: chunk.endMs + INTERVAL_MS[interval] })),
        provider: source.provider,
      });
      candles = checked.candles;
      currency = checked.currency;
      // Background work (backfill, keep-current) also compares the daily closes with the chain's other providers.
      if (isBackground()) candles = await this.#quality.crossCheck({ symbol, interval, span: chunk, currency, timezone: history.timezone, candles, provider: source.provider });
    }
    await this.#stream?.crossCheck(symbol, interval, candles, source.provider);
    if (newSplits.length > 0) {
      const known = new Set(splitsOf(await this.#store.getActions(symbol, { startMs: chunk.startMs, endMs: chunk.endMs })).map((s) => s.timeMs));
      for (const split of newSplits.sort((a, b) => a.timeMs - b.timeMs)) {
        if (known.has(split.timeMs) || split.numerator <= 0 || split.denominator <= 0) continue;
        // Bars fetched before the split took effect carry the old basis; 4-for-1 divides their prices by 4.
        await this.#store.rescale(symbol, { barsBeforeMs: split.timeMs, fetchedBeforeMs: split.timeMs }, split.denominator / split.numerator);
      }
    }
    await this.#store.putInstrument(symbol, { currency, timezone: history.timezone }, source);
    await this.#store.putActions(symbol, actions, source);
    await this.#store.putCandles(symbol, interval, candles, source);
    // Bars that may still be forming are stored but not covered: they are asked for again until finished.
    const settledBefore = now - INTERVAL_MS[interval];
    const finished = { startMs: chunk.startMs, endMs: Math.min(chunk.endMs, settledBefore) };
    if (finished.endMs > finished.startMs) await this.#store.markCovered(symbol, interval, finished, source);
    return { written: candles.length, currency };
  }
}
