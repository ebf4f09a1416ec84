/**
 * `mds history verify` (DESIGN 20): re-reads a stored window from every provider of the chain that
 * serves it, passes each answer through the same validator, and compares the stored closes with what
 * each provider says now. A close further than the divergence bound from a provider's is reported
 * (recorded as a suspect `divergent` finding naming the stored bar's provider and each one that
 * disagrees, with both sides' closes); with `repair`, the stored bar is replaced by the one the
 * providers agree on (its own provider's, or the majority's when three or more answer) and the raw
 * stored bar is kept in the record.
 */
import type { CandleStore, StoredCandle, TimeSpan } from '../domain/ports/history-store.js';
import type { History, HistoryInterval, HistoryQuery } from '../domain/ports/market-data.js';
import { divergentCloses, type QualityIssue } from '../domain/quality/data-issues.js';
import type { DataQuality } from './data-quality.js';

/** One stored bar a provider disagrees with. */
export interface Divergence {
  timeMs: number;
  stored: number;
  /** The close each provider that disagrees gave, by provider. */
  fetched: Record<string, number>;
  /** True when the stored bar was replaced. */
  repaired: boolean;
}

export interface HistoryVerifyOptions {
  store: CandleStore;
  quality: DataQuality;
  /** The chain's providers, in order. */
  providers: readonly string[];
  /** Asks one provider of the chain; `undefined` when it does not serve the read or know the symbol. Throws on failure. */
  fetchFrom: (provider: string, query: HistoryQuery) => Promise<History | undefined>;
  /** How far apart (basis points of the stored close) two closes may be before they diverge. */
  divergenceBps: number;
}

export class HistoryVerify {
  readonly #options: HistoryVerifyOptions;

  constructor(options: HistoryVerifyOptions) {
    this.#options = options;
  }

  /** Compares (and with `repair` fixes) the stored bars of `symbol` in `span`; resolves to the bars that diverge, oldest first. */
  async verify(symbol: string, interval: HistoryInterval, span: TimeSpan, repair: boolean): Promise<{ checked: number; divergences: Divergence[]; providers: string[] }> {
    const { store, quality, providers, fetchFrom, divergenceBps } = this.#options;
    const stored = await store.getCandles(symbol, interval, span);
    const info = await store.getInstrument(symbol);
    const answers = new Map<string, Map<number, StoredCandle>>();
    for (const provider of providers) {
      const history = await fetchFrom(provider, { symbol, interval, startMs: span.startMs, endMs: span.endMs }).catch(() => undefined);
      if (history === undefined) continue;
      const candles = history.candles.map((c) => ({ timeMs: Date.parse(c.time), open: c.open, high: c.high, low: c.low, close: c.close, adjClose: c.adj_close, volume: c.volume }));
      const checked = await quality.check({ symbol, interval, span, currency: history.currency, timezone: history.timezone, candles, splits: [], provider });
      if (info !== undefined && checked.currency !== info.currency) continue;
      answers.set(provider, new Map(checked.candles.map((c) => [c.timeMs, c])));
    }
    const divergences: Divergence[] = [];
    const findings: QualityIssue[] = [];
    for (const bar of stored) {
      const fetched: Record<string, number> = {};
      const agreeing: StoredCandle[] = [];
      for (const [provider, bars] of answers) {
        const other = bars.get(bar.timeMs);
        if (other === undefined) continue;
        if (Math.abs(other.close - bar.close) * 10_000 > divergenceBps * bar.close) fetched[provider] = other.close;
        else agreeing.push(other);
      }
      const disagreeing = Object.keys(fetched);
      if (disagreeing.length === 0) continue;
      // The replacement: what the providers that answered agree on (all of them, or a majority of three or more).
      const answered = disagreeing.length + agreeing.length;
      const closes = disagreeing.map((p) => fetched[p] as number);
      const consensus = agreeing.length === 0 && closes.every((c) => Math.abs(c - (closes[0] as number)) * 10_000 <= divergenceBps * (closes[0] as number)) && (answered < 3 || disagreeing.length * 2 > answered);
      const replacement = consensus ? answers.get(disagreeing[0] as string)!.get(bar.timeMs) : undefined;
      const fix = repair && replacement !== undefined;
      divergences.push({ timeMs: bar.timeMs, stored: bar.close, fetched, repaired: fix });
      const { timeMs: _t, ...before } = bar;
      // Who gave the stored bar, read before a repair replaces it.
      const [storedBy = 'unknown'] = Object.keys(await store.providerCounts(symbol, interval, { startMs: bar.timeMs, endMs: bar.timeMs + 1 }));
      const compared = divergentCloses(storedBy, bar.close, disagreeing.map((provider) => ({ provider, close: fetched[provider] as number })));
      if (fix) {
        await store.putCandles(symbol, interval, [replacement], { provider: disagreeing[0] as string, fetchedAtMs: Date.now() });
        const { timeMs: _r, ...after } = replacement;
        findings.push({ timeMs: bar.timeMs, rule: 'divergent', action: 'repaired', before, after, ...compared });
      } else {
        findings.push({ timeMs: bar.timeMs, rule: 'divergent', action: 'suspect', before, after: before, flag: 'divergent', ...compared });
      }
    }
    await quality.record(symbol, interval, findings);
    return { checked: stored.length, divergences, providers: [...answers.keys()] };
  }
}
