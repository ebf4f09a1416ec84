/**
 * The history store's side of live bars (DESIGN 26): one-minute bars built from a push stream are
 * stored as provider `live:<upstream>` in the series of the symbol's 1m bars, never marked covered, so
 * the upstream is still asked for every minute it keeps and its own bars replace the live ones. What
 * this adds to a read:
 *
 * - where the upstream cannot answer (beyond its reach, or failing), the stored live minutes answer;
 *   the minutes of the exchange's regular sessions with no bar are listed missing (`no_stream_data`),
 *   never invented; a 5m, 15m, 30m or 1h read there is built from the stored minutes;
 * - where the upstream's bar meets a live bar of the same minute, the two closes are compared and a
 *   divergence beyond QUALITY_DIVERGENCE_BPS is recorded (DESIGN 20); the upstream's bar answers.
 */
import { aggregateMinutes, absentMinutes, sessionSpans } from '../domain/live-bar-buckets.js';
import { isFromStream } from '../domain/live-bar.js';
import type { MissingSpan } from '../domain/missing-spans.js';
import type { CandleStore, StoredCandle, TimeSpan } from '../domain/ports/history-store.js';
import type { HistoryInterval } from '../domain/ports/market-data.js';
import { marketOfSymbol } from '../domain/provider-symbols.js';
import { divergentCloses, type QualityIssue } from '../domain/quality/data-issues.js';
import type { DataQuality } from './data-quality.js';
import { MINUTE_MS } from '../domain/durations.js';

/** The intervals a read builds from stored minutes where the upstream cannot answer, with their length. */
const BUILT_FROM_MINUTES: Partial<Record<HistoryInterval, number>> = {
  '1m': MINUTE_MS,
  '5m': 5 * MINUTE_MS,
  '15m': 15 * MINUTE_MS,
  '30m': 30 * MINUTE_MS,
  '1h': 60 * MINUTE_MS,
};

/** An upstream's bar and a live bar of the same minute. */
export interface StreamPair {
  upstream: StoredCandle;
  upstreamProvider: string;
  live: StoredCandle;
  liveProvider: string;
}

export interface StreamHistoryOptions {
  store: CandleStore;
  /** Where divergences are recorded; without it, nothing is compared. */
  quality?: DataQuality | undefined;
  /** How far apart (basis points) two closes may be before they diverge (QUALITY_DIVERGENCE_BPS). */
  divergenceBps?: number | undefined;
  now?: () => number;
}

export class StreamHistory {
  readonly #store: CandleStore;
  readonly #quality: DataQuality | undefined;
  readonly #divergenceBps: number;
  readonly #now: () => number;

  constructor(options: StreamHistoryOptions) {
    this.#store = options.store;
    this.#quality = options.quality;
    this.#divergenceBps = options.divergenceBps ?? 50;
    this.#now = options.now ?? Date.now;
  }

  /** The stream providers whose minutes of `symbol` the store holds in `span` (none: an empty list). */
  async streamProviders(symbol: string, span: TimeSpan): Promise<string[]> {
    if (span.endMs <= span.startMs) return [];
    return Object.keys(await this.#store.providerCounts(symbol, '1m', span)).filter(isFromStream);
  }

  /**
   * Which served bars were built from a stream, given the window's bars by provider (`sources`, over
   * `span`): `only`, the stream's provider, when all were; `times` of the stream's bars when they are
   * mixed with an upstream's; nothing when none was.
   */
  async provenance(symbol: string, interval: HistoryInterval, sources: Record<string, number>, span: TimeSpan): Promise<{ only?: string; times?: number[] }> {
    const providers = Object.keys(sources);
    const live = providers.filter(isFromStream);
    if (live.length === 0) return {};
    if (live.length === providers.length && live.length === 1) return { only: live[0]! };
    const times = (await Promise.all(live.map((p) => this.#store.providerTimes(symbol, interval, span, p)))).flat();
    return { times: times.sort((a, b) => a - b) };
  }

  /**
   * `missing` (the parts of a read of `interval` the upstream could not answer) with the stored live
   * minutes answering where there are any: a part holding live minutes is replaced by its session
   * minutes that have no bar (`no_stream_data` beyond the upstream's reach; still `upstream_failed`
   * where the upstream failed, since asking again may fill them); for intervals longer than a minute, its bars are first
   * built from the minutes and stored, uncovered, so the read's select serves them and the upstream is
   * still asked once it reaches them. Parts without live minutes stay as they are.
   */
  async fill(symbol: string, interval: HistoryInterval, missing: readonly MissingSpan[]): Promise<MissingSpan[]> {
    const intervalMs = BUILT_FROM_MINUTES[interval];
    if (intervalMs === undefined) return [...missing];
    const out: MissingSpan[] = [];
    for (const span of missing) {
      const live = span.reason === 'no_stream_data' ? [] : await this.streamProviders(symbol, span);
      if (live.length === 0) {
        out.push(span);
        continue;
      }
      const segments = sessionSpans(marketOfSymbol(symbol), span);
      let times: ArrayLike<number>;
      if (interval === '1m') {
        times = (await this.#store.getCandleColumns(symbol, '1m', span)).timeMs;
      } else {
        const minutes = await this.#store.getCandles(symbol, '1m', span);
        const bars = aggregateMinutes(minutes, intervalMs, segments).filter((b) => b.timeMs >= span.startMs);
        await this.#store.putCandles(symbol, interval, bars, { provider: live[0]!, fetchedAtMs: this.#now() });
        times = minutes.map((m) => m.timeMs);
      }
      // Beyond the upstream's reach only the stream could have had them; a failing upstream may still.
      const reason = span.reason === 'beyond_reach' ? 'no_stream_data' : span.reason;
      for (const absent of absentMinutes(segments, times)) out.push({ ...absent, reason });
    }
    return out;
  }

  /**
   * Compares what the upstream answered (`candles` of `provider`, about to be stored over whatever the
   * store holds) with the live bars stored for the same minutes, recording each divergence.
   */
  async crossCheck(symbol: string, interval: HistoryInterval, candles: readonly StoredCandle[], provider: string): Promise<void> {
    if (this.#quality === undefined || candles.length === 0 || isFromStream(provider)) return;
    const span = { startMs: candles[0]!.timeMs, endMs: candles[candles.length - 1]!.timeMs + 1 };
    const counts = await this.#store.providerCounts(symbol, interval, span);
    if (!Object.keys(counts).some(isFromStream)) return;
    const stored = new Map((await this.#store.getCandles(symbol, interval, span)).map((c) => [c.timeMs, c]));
    const pairs: StreamPair[] = [];
    for (const upstream of candles) {
      const live = stored.get(upstream.timeMs);
      if (live === undefined || this.#near(live.close, upstream.close)) continue;
      // Only a diverging bar is asked whose it is: the store keeps one bar per minute, whoever gave it.
      const [liveProvider] = Object.keys(await this.#store.providerCounts(symbol, interval, { startMs: upstream.timeMs, endMs: upstream.timeMs + 1 }));
      if (liveProvider !== undefined && isFromStream(liveProvider)) pairs.push({ upstream, upstreamProvider: provider, live, liveProvider });
    }
    await this.record(symbol, interval, pairs);
  }

  /** Records, for each pair whose closes lie further apart than the divergence bound, a `divergent` finding; the upstream's bar is the one served. */
  async record(symbol: string, interval: HistoryInterval, pairs: readonly StreamPair[]): Promise<void> {
    if (this.#quality === undefined) return;
    const findings: QualityIssue[] = [];
    for (const { upstream, upstreamProvider, live, liveProvider } of pairs) {
      if (this.#near(live.close, upstream.close)) continue;
      const { timeMs, ...served } = upstream;
      findings.push({ timeMs, rule: 'divergent', action: 'suspect', before: served, after: served, ...divergentCloses(upstreamProvider, upstream.close, [{ provider: liveProvider, close: live.close }]) });
    }
    await this.#quality.record(symbol, interval, findings);
  }

  #near(a: number, b: number): boolean {
    return Math.abs(a - b) * 10_000 <= this.#divergenceBps * Math.min(a, b);
  }
}
