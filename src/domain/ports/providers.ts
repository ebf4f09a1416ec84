/**
 * The provider ports: what an upstream provider serves, its key pool, breaker, health and usage.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
import type { HistoryInterval, MarketDataProvider } from './market-data.js';

/** Asset classes a provider may serve. A plain ticker is `equity` (an ETF's symbol looks the same). */
export type AssetClass = 'equity' | 'etf' | 'index' | 'fx' | 'crypto';

/**
 * How far back a provider keeps bars of one interval, in days; `null` when it keeps them as far back
 * as the instrument goes (or documents no bound).
 */
export type RetentionDays = number | null;

/**
 * What a provider can serve, per asset class. An asset class missing from a list, or an interval
 * missing from `history[assetClass]`, is not served: the router skips the provider for it.
 */
export interface ProviderCapabilities {
  /** Asset classes whose current quote it serves. */
  quote: readonly AssetClass[];
  /** Per asset class, the history intervals it serves and each interval's retention. */
  history: Readonly<Partial<Record<AssetClass, Readonly<Partial<Record<HistoryInterval, RetentionDays>>>>>>;
  /** Asset classes its search finds. */
  search: readonly AssetClass[];
  /** Asset classes whose history carries dividends and splits (`events`); elsewhere `events` is empty. */
  events: readonly AssetClass[];
}

/** A Yahoo-style symbol as one provider spells it. */
export interface ProviderSymbol {
  /** The provider's own code (`I:SPX`, `X:BTCUSD`, `btcusd`, `EURUSD`). */
  code: string;
  assetClass: AssetClass;
}

/** One key of a provider's pool. `value` goes to the provider and nowhere else (never a log, error or answer). */
export interface ProviderKey {
  /** Position in the pool (0-based, the order of `<P>_API_KEYS`): what logs and errors name. */
  index: number;
  value: string;
}

/** Why a key was set aside. */
export type KeySetAsideReason = 'unauthorized' | 'limit_reached';

/** A key's state, fit to show an administrator. */
export interface ProviderKeyStatus {
  index: number;
  /** The key's last four characters. */
  lastFour: string;
  state: 'active' | 'set_aside';
  reason?: KeySetAsideReason;
  /** Epoch ms when a key set aside comes back by itself (a daily limit resets); absent = until restart. */
  untilMs?: number;
  /** Keys taken from this pool by this instance since the last UTC midnight. */
  usedToday: number;
}

/**
 * The API keys of one provider, used in turn. An adapter takes one key per upstream call; the router
 * sets keys aside (a 401/403 on that key, a daily limit) and may wrap the pool to count fleet-wide
 * budgets before handing a key out.
 */
export interface ProviderKeyPool {
  /** How many keys the pool holds, active or not. */
  readonly size: number;
  /**
   * The key for the next call, or `undefined` when every key is set aside (the adapter then fails
   * with `unauthorized` or `limit_reached`, whichever set the last key aside).
   */
  take(): Promise<ProviderKey | undefined>;
  /** Stops handing out key `index` (until `untilMs`, epoch ms, when given). */
  setAside(index: number, reason: KeySetAsideReason, untilMs?: number): void;
  /** Every key's state, in pool order. */
  status(): ProviderKeyStatus[];
  /** Why the pool has no key to give (`undefined` while some key is active). */
  exhaustedReason(): KeySetAsideReason | undefined;
}

/**
 * A market-data provider the router can choose among: it says what it serves and which symbols it
 * can express. Failures are `UpstreamFailureError`s (`domain/upstream-failure.ts`) with a reason
 * from a closed set; "unknown symbol" stays `undefined`.
 */
export interface ProviderAdapter extends MarketDataProvider {
  readonly capabilities: ProviderCapabilities;
  /** The provider's spelling of the Yahoo-style `symbol`, or `undefined` when it cannot express it (skip it). */
  express(symbol: string): ProviderSymbol | undefined;
  /** Its key pool, empty for a provider that needs no key. */
  readonly keys: ProviderKeyPool;
}

/** A provider's circuit breaker: `closed` lets calls through, `open` fails fast, `half-open` lets one probe through. */
export type ProviderBreakerState = 'closed' | 'open' | 'half-open';

/** One provider's health, known without I/O. */
export interface ProviderHealth {
  /** False after a failed call until the next success (true before the first call only for a local provider). */
  healthy: boolean;
  /** When its last call succeeded (epoch ms); `null` when none has. */
  lastSuccessAtMs: number | null;
  /** Why its last call failed (never a key); `null` after a success. */
  lastError: string | null;
}

/** What one provider may still be sent, read from the shared counters. */
export interface ProviderUsage {
  /** When the fleet-wide pause after its 429 ends (epoch ms); 0 when none is in force. */
  pausedUntilMs: number;
  /** Calls made this UTC day with all its keys, fleet-wide (0 for a keyless provider). */
  usedToday: number;
  /** Its keys in pool order, `usedToday` counted fleet-wide. */
  keys: ProviderKeyStatus[];
}

/**
 * One provider of the router's chain, built by the infrastructure: the adapter (what it serves, how it
 * spells symbols, its keys) whose calls go through its breaker, its fleet-wide budget, its concurrency
 * cap and its 429 pause. A call held back without reaching the provider rejects with
 * `UpstreamHeldBackError` (domain/upstream-failure.ts) at once.
 */
export interface ProviderLink extends ProviderAdapter {
  /** Its fleet-wide requests per second and calls per key per UTC day (0 = no limit). */
  readonly budget: { maxRps: number; dailyLimit: number };
  /** A keyed provider's plan (`<P>_PLAN`) and the reach it gives in days (`null`: no bound); absent for yahoo, ecb, simulated. */
  readonly plan?: { name: string; historyDays: RetentionDays; intradayDays: RetentionDays } | undefined;
  /** The breaker's state now, without I/O. */
  readonly breakerState: ProviderBreakerState;
  health(): ProviderHealth;
  /** Its pause and its keys' use, fleet-wide. Never rejects (the shared counters fall back to memory). */
  usage(): Promise<ProviderUsage>;
  /** Stops its timers; later calls reject. */
  close(): void;
}
