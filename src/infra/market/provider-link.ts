/**
 * One provider of the router's chain as the infrastructure builds it: the adapter says what it serves
 * and how it spells symbols; its calls go through the upstream guard (fleet-wide budget, concurrency
 * cap, 429 pause) and the circuit breaker.
 */
import { keys as keySpace } from '../../domain/key-space.js';
import type { ProviderPlan } from '../../domain/provider-plans.js';
import type { History, HistoryQuery, Quote, SearchResult } from '../../domain/ports/market-data.js';
import type { ProviderAdapter, ProviderBreakerState, ProviderCapabilities, ProviderHealth, ProviderKeyStatus, ProviderLink, ProviderUsage } from '../../domain/ports/providers.js';
import type { SharedCounters } from '../../domain/ports/counters.js';
import type { ResilientMarketDataProvider } from './resilient-market-data-provider.js';
import type { SharedKeyPool } from './shared-key-pool.js';

/** The parts of one link. */
export interface ProviderLinkParts {
  /** Capabilities, symbol spelling and keys. */
  adapter: ProviderAdapter;
  /** What the link serves when its plan changes the adapter's reach (default the adapter's own). */
  capabilities?: ProviderCapabilities | undefined;
  /** The plan of a keyed provider (`<P>_PLAN` and its overrides). */
  plan?: ProviderPlan | undefined;
  /** The same provider behind its guard and breaker: where calls go. */
  resilient: ResilientMarketDataProvider;
  budget: { maxRps: number; dailyLimit: number };
  /** Where its pause and its keys' daily use are shared; absent for a provider with no upstream. */
  counters?: SharedCounters | undefined;
  /** Its pool when it counts fleet-wide. */
  sharedKeys?: SharedKeyPool | undefined;
}

/** `ProviderLink` over an adapter and its guarded, breaker-wrapped calls. */
export class GuardedProviderLink implements ProviderLink {
  readonly name: string;
  readonly #parts: ProviderLinkParts;

  constructor(parts: ProviderLinkParts) {
    this.#parts = parts;
    this.name = parts.adapter.name;
  }

  get capabilities(): ProviderCapabilities {
    return this.#parts.capabilities ?? this.#parts.adapter.capabilities;
  }

  get plan(): ProviderPlan | undefined {
    return this.#parts.plan;
  }

  get keys() {
    return this.#parts.adapter.keys;
  }

  get budget() {
    return this.#parts.budget;
  }

  /** The breaker and health record, for the single-provider status and tests. */
  get resilient(): ResilientMarketDataProvider {
    return this.#parts.resilient;
  }

  express(symbol: string) {
    return this.#parts.adapter.express(symbol);
  }

  getQuote(symbol: string): Promise<Quote | undefined> {
    return this.#parts.resilient.getQuote(symbol);
  }

  getHistory(query: HistoryQuery): Promise<History | undefined> {
    return this.#parts.resilient.getHistory(query);
  }

  search(query: string, limit: number): Promise<SearchResult[]> {
    return this.#parts.resilient.search(query, limit);
  }

  get breakerState(): ProviderBreakerState {
    return this.#parts.resilient.state;
  }

  health(): ProviderHealth {
    const health = this.#parts.resilient.health();
    return { healthy: health.healthy, lastSuccessAtMs: health.last_success_at === null ? null : Date.parse(health.last_success_at), lastError: health.last_error };
  }

  async usage(): Promise<ProviderUsage> {
    const { counters, sharedKeys, adapter } = this.#parts;
    const [pausedUntilMs, keys] = await Promise.all([
      counters ? counters.pausedUntil(keySpace.upstream.pauseUntil(this.name)) : Promise.resolve(0),
      sharedKeys ? sharedKeys.fleetStatus() : Promise.resolve<ProviderKeyStatus[]>(adapter.keys.status()),
    ]);
    return { pausedUntilMs, usedToday: keys.reduce((sum, key) => sum + key.usedToday, 0), keys };
  }

  close(): void {
    this.#parts.resilient.close();
  }
}
