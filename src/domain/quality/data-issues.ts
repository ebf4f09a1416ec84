/**
 * What the data-quality checks record (DESIGN 20): each bar an upstream answer gave that was repaired,
 * dropped or is suspect, with the rule that judged it, the bar before and after, and who gave it.
 */
import type { StoredCandle } from '../ports/history-store.js';
import type { HistoryInterval } from '../ports/market-data.js';

/**
 * The named rules. Repairs: `sub_unit_currency`, `unit_100x`, `unannounced_split`, `swapped_high_low`,
 * `ohlc_envelope`, `filled_price`, `missing_session` (filled from a second provider), `negative_volume`, `out_of_order`. Drops: `non_positive_price`,
 * `ohlc_order`, `duplicate`, `future`, `off_grid`, `outside_session`. Suspect: `spike`, `divergent`.
 */
export type QualityRule =
  | 'sub_unit_currency'
  | 'unit_100x'
  | 'unannounced_split'
  | 'swapped_high_low'
  | 'ohlc_envelope'
  | 'filled_price'
  | 'negative_volume'
  | 'out_of_order'
  | 'missing_session'
  | 'non_positive_price'
  | 'ohlc_order'
  | 'duplicate'
  | 'future'
  | 'off_grid'
  | 'outside_session'
  | 'spike'
  | 'divergent';

/** What was done with the bar. */
export type QualityAction = 'repaired' | 'dropped' | 'suspect';

/**
 * The flag a served candle carries for a repair or a suspicion (`filled_from_<provider>` for a price
 * taken from another provider). A clean candle carries none.
 */
export type QualityFlag = 'repaired_unit' | 'repaired_currency' | 'repaired_split' | 'repaired_ohlc' | 'suspect_spike' | 'divergent' | `filled_from_${string}`;

/** A bar's prices as recorded (before or after a rule). */
export type BarValues = Omit<StoredCandle, 'timeMs'>;

/** One provider's close of a bar. */
export interface ProviderClose {
  provider: string;
  close: number;
}

/** The closes a `divergent` finding compared: the stored bar's and each provider's that disagrees with it. */
export interface DivergentCloses {
  /** The stored bar's close and the provider that gave it. */
  stored: ProviderClose;
  /** Each provider whose close lies beyond the divergence bound, in the order they were asked. */
  others: ProviderClose[];
}

/** One finding on one bar of one answer. */
export interface QualityIssue {
  /** The bar's start, epoch ms. */
  timeMs: number;
  rule: QualityRule;
  action: QualityAction;
  /** The bar as the upstream gave it (null when it gave none, as for a session filled from another provider). */
  before: BarValues | null;
  /** The bar as stored and served; null when dropped. */
  after: BarValues | null;
  /** The flag the served candle carries, when any. */
  flag?: QualityFlag;
  /** Providers involved: the one that gave the bar first, then any other consulted. */
  providers: string[];
  /** For a `divergent` finding: both sides' closes, each with its provider. */
  closes?: DivergentCloses;
}

/**
 * What a `divergent` finding says of who disagrees: the stored bar's provider first, then each other
 * provider (once: a provider re-read by verify may disagree with its own stored bar), and both sides'
 * closes, each with its provider.
 */
export function divergentCloses(storedProvider: string, storedClose: number, others: readonly ProviderClose[]): Pick<QualityIssue, 'providers' | 'closes'> {
  return {
    providers: [...new Set([storedProvider, ...others.map((o) => o.provider)])],
    closes: { stored: { provider: storedProvider, close: storedClose }, others: others.map((o) => ({ provider: o.provider, close: o.close })) },
  };
}

/** A recorded issue, as the store keeps it. */
export interface DataIssue extends QualityIssue {
  symbol: string;
  interval: HistoryInterval;
  recordedAtMs: number;
}

/** Per-answer counts of what the checks did to the bars it serves. */
export interface QualityCounts {
  repaired: number;
  dropped: number;
  suspect: number;
}

/**
 * Where issues are kept (the users' database), so a repaired bar's record and raw value outlive a
 * restart. Every method throws an `AppError` when the database fails.
 */
export interface DataIssueStore {
  /** Appends `issues`; resolves to how many were written. */
  record(issues: readonly DataIssue[]): Promise<number>;
  /** Issues of `symbol` and `interval` whose bar lies in `[startMs, endMs)`, oldest bar first, then oldest record first. */
  forBars(symbol: string, interval: HistoryInterval, startMs: number, endMs: number): Promise<DataIssue[]>;
  /** The newest issues first (recorded at or after `sinceMs`, of `symbol` when given), at most `limit`. */
  list(filter: { symbol?: string; sinceMs?: number; limit: number }): Promise<DataIssue[]>;
}
