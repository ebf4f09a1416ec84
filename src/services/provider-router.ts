/**
 * The provider router (DESIGN 15): one `MarketDataProvider` over the ordered chain of
 * MARKET_DATA_PROVIDERS, failing over inside the request. Each read asks, in order, the providers
 * that serve it for the symbol's asset class and can spell the symbol, until one answers. Pure logic
 * over ports: the breakers, budgets, pauses and key pools are the links' own (built in infra).
 */
import QuickLRU from 'quick-lru';
import { BeyondReachError, DataSourceError, ProvidersUnavailableError, SymbolNotServedError, type ProviderAttempt } from '../domain/errors.js';
import { PROVIDER_COVERAGE, reachVariables } from '../domain/provider-plans.js';
import { rangeStartMs } from '../domain/history-ranges.js';
import type { components } from '../generated/api.js';
import { NO_METRICS, type Metrics } from '../domain/ports/metrics.js';
import type { AssetClass, ProviderBreakerState, ProviderLink } from '../domain/ports/providers.js';
import type { History, HistoryInterval, HistoryQuery, HistoryRange, MarketDataProvider, Quote, SearchResult } from '../domain/ports/market-data.js';
import type { Logger } from '../domain/ports/logger.js';
import { UpstreamFailureError, UpstreamHeldBackError } from '../domain/upstream-failure.js';
import { HOUR_MS, DAY_MS } from '../domain/durations.js';

type DatasourceStatus = components['schemas']['DatasourceStatus'];
type ProviderStatus = components['schemas']['ProviderStatus'];
type Source = components['schemas']['Source'];

/** How each failure reads in the 503 message and the admin endpoint (never a key, never a URL). */
const REASON_WORDS: Readonly<Record<string, string>> = {
  timeout: 'timeout',
  refused: 'connection refused',
  server_error: '5xx',
  throttled: '429',
  unauthorized: 'key refused (401/403)',
  limit_reached: 'daily limit reached',
  garbage: 'unusable response',
  breaker_open: 'breaker open',
  paused: 'paused after 429',
  budget: 'request budget used up',
  error: 'error',
};

/** Options of `ProviderRouter`. */
export interface ProviderRouterOptions {
  /** The chain, first asked first (at least one). */
  links: readonly ProviderLink[];
  logger?: Logger | undefined;
  metrics?: Pick<Metrics, 'upstreamCall' | 'failover'> | undefined;
  /** How long "unknown symbol" from one provider is remembered (default one hour). */
  unknownTtlMs?: number;
  /** Unknown symbols remembered per provider and read kind at most (default 2000; quick-lru may hold twice that). */
  unknownMaxEntries?: number;
  /** Clock in epoch milliseconds (default `Date.now`). */
  now?: () => number;
}

/** What this instance counted for one provider since start. */
interface LinkCounts {
  calls: number;
  failures: number;
  failovers: number;
}

/**
 * Whether a provider can be asked for a read: it serves it; it cannot spell the symbol; it spells it
 * but does not serve that class or interval; or the window starts before its plan's reach.
 */
type Eligibility = 'serves' | 'unexpressed' | 'unserved' | 'beyond';

/** How one provider's attempt at a read ended. */
type Outcome<T> = { kind: 'answer'; value: T } | { kind: 'unknown' } | { kind: 'failed'; reason: string; error: DataSourceError };

/**
 * Routes quotes, history and search over the chain.
 *
 * - Eligible: a provider whose capabilities list the read for the symbol's asset class (and, for
 *   history, the interval and a retention that reaches the window's start) and that can spell the
 *   symbol. A symbol no provider can spell is unknown (404).
 * - Failover on every failure: timeout, refused, 5xx, 429 (the link pauses the provider fleet-wide
 *   until Retry-After), 401/403 (that key is set aside and the next key of the pool tried first),
 *   a daily limit reached (same, until the next UTC midnight), budget used up, breaker open, or an
 *   unusable body. A link held back (breaker open, paused, no budget) answers at once, so a
 *   provider known to be down costs nothing.
 * - "Unknown symbol" moves on as well (providers cover different symbols) and is remembered per
 *   provider for `unknownTtlMs` in a small LRU, so the miss is not asked again.
 * - The answer is `undefined` (404) only when every eligible provider said unknown; otherwise when
 *   none answered it is `ProvidersUnavailableError` naming each provider and why, with the soonest
 *   recovery as Retry-After. A chain of one rethrows its provider's own error (the message and
 *   Retry-After the single-provider service always gave).
 * - Answers name their provider: `sourceOf(answer)`, and with more than one provider each quote
 *   carries `source` (a batch may mix providers).
 */
export class ProviderRouter implements MarketDataProvider {
  /** `yahoo` for a chain of one; `polygon+yahoo` for a chain: the cache namespace of its answers. */
  readonly name: string;
  readonly #links: readonly ProviderLink[];
  readonly #logger: Logger | undefined;
  readonly #metrics: Pick<Metrics, 'upstreamCall' | 'failover'>;
  readonly #now: () => number;
  readonly #unknown = new Map<string, QuickLRU<string, true>>();
  readonly #counts = new Map<string, LinkCounts>();
  /** Which provider produced each answer handed out (entries go with the answers). */
  readonly #sources = new WeakMap<object, string>();

  constructor(options: ProviderRouterOptions) {
    if (options.links.length === 0) throw new RangeError('The provider router needs at least one provider');
    this.#links = options.links;
    this.name = options.links.map((link) => link.name).join('+');
    this.#logger = options.logger;
    this.#metrics = options.metrics ?? NO_METRICS;
    this.#now = options.now ?? Date.now;
    const maxAge = options.unknownTtlMs ?? HOUR_MS;
    const maxSize = options.unknownMaxEntries ?? 2000;
    for (const link of options.links) {
      this.#unknown.set(link.name, new QuickLRU({ maxSize, maxAge }));
      this.#counts.set(link.name, { calls: 0, failures: 0, failovers: 0 });
    }
  }

  /** The current quote from the first eligible provider that answers; `undefined` when every one says unknown. */
  async getQuote(symbol: string): Promise<Quote | undefined> {
    const routed = await this.#route(
      `quote:${symbol}`,
      (link) => this.#serves(link, symbol, (c) => c.quote),
      (link) => link.getQuote(symbol),
      () => {
        throw new SymbolNotServedError(symbol, 'quotes', this.#coverage());
      },
    );
    if (routed === undefined) return undefined;
    const quote = this.#links.length > 1 ? { ...routed.value, source: routed.source as Source } : routed.value;
    this.#sources.set(quote, routed.source);
    return quote;
  }

  /** Candles from the first eligible provider (interval and retention included) that answers. */
  async getHistory(query: HistoryQuery): Promise<History | undefined> {
    const routed = await this.#route(
      `history:${query.symbol}`,
      (link) => this.#servesHistory(link, query),
      (link) => link.getHistory(query),
      (verdicts) => {
        if (verdicts.includes('beyond')) throw this.beyondReach(query.symbol, query.interval);
        throw new SymbolNotServedError(query.symbol, `${query.interval} history`, this.#coverage());
      },
    );
    if (routed === undefined) return undefined;
    this.#sources.set(routed.value, routed.source);
    return routed.value;
  }

  /** Candles from `provider` alone (when it serves the read); `undefined` when it does not, or does not know the symbol. */
  async getHistoryFrom(query: HistoryQuery, provider: string): Promise<History | undefined> {
    const routed = await this.#route(`history:${query.symbol}`, (link) => (link.name === provider ? this.#servesHistory(link, query) : 'unserved'), (link) => link.getHistory(query));
    return routed?.value;
  }

  /**
   * Candles from the first eligible provider other than `except` that answers, and who gave them: a
   * second opinion for the data-quality checks. `undefined` when no other provider serves the read
   * or knows the symbol; rejects when none could answer.
   */
  async getHistoryElsewhere(query: HistoryQuery, except: string): Promise<{ history: History; provider: string } | undefined> {
    const routed = await this.#route(`history:${query.symbol}`, (link) => (link.name !== except ? this.#servesHistory(link, query) : 'unserved'), (link) => link.getHistory(query));
    return routed === undefined ? undefined : { history: routed.value, provider: routed.source };
  }

  /**
   * Candles from each provider other than `except` that serves the read, asked at once, in chain order:
   * the cross-check's sources. A provider that fails, is out of budget or does not know the symbol is left out.
   */
  async getHistoryFromOthers(query: HistoryQuery, except: string): Promise<Array<{ history: History; provider: string }>> {
    const answers = await Promise.all(
      this.#links.filter((l) => l.name !== except).map((l) => this.getHistoryFrom(query, l.name).then((history) => (history === undefined ? undefined : { history, provider: l.name }), () => undefined)),
    );
    return answers.filter((a) => a !== undefined);
  }

  /** Search results from the first provider with a search that answers (an empty list is an answer). */
  async search(query: string, limit: number): Promise<SearchResult[]> {
    const routed = await this.#route(undefined, (link) => (link.capabilities.search.length > 0 ? 'serves' : 'unserved'), (link) => link.search(query, limit));
    if (routed === undefined) return [];
    this.#sources.set(routed.value, routed.source);
    return routed.value;
  }

  /**
   * How far back the chain reaches for `interval` bars of `symbol`, in days: the furthest reach of the
   * providers that serve them (`null`: one has no bound); `undefined` when none serves them.
   */
  reachDays(symbol: string, interval: HistoryInterval): number | null | undefined {
    let furthest: number | undefined;
    for (const link of this.#links) {
      const retention = this.#retention(link, symbol, interval);
      if (retention === null) return null;
      if (retention !== undefined) furthest = Math.max(furthest ?? 0, retention);
    }
    return furthest;
  }

  /** The 422 of a window no provider reaches: each provider's reach for `interval` and the variable that extends it. */
  beyondReach(symbol: string, interval: HistoryInterval): BeyondReachError {
    const reaches = this.#links.flatMap((link) => {
      const days = this.#retention(link, symbol, interval);
      return typeof days === 'number' ? [{ provider: link.name, days, plan: link.plan?.name, variables: reachVariables(link.name, interval) }] : [];
    });
    return new BeyondReachError(interval, reaches);
  }

  sourceOf(answer: object): string | undefined {
    return this.#sources.get(answer);
  }

  /** The chain's health for /api/health and the admin status: healthy while any provider is. */
  health(): DatasourceStatus {
    const healths = this.#links.map((link) => ({ name: link.name, ...link.health() }));
    const lastSuccess = Math.max(...healths.map((h) => h.lastSuccessAtMs ?? -Infinity));
    const failing = healths.filter((h) => h.lastError !== null);
    return {
      provider: this.name,
      healthy: healths.some((h) => h.healthy),
      last_success_at: Number.isFinite(lastSuccess) ? new Date(lastSuccess).toISOString() : null,
      last_error: failing.length === 0 ? null : this.#links.length === 1 ? (failing[0]?.lastError ?? null) : failing.map((h) => `${h.name}: ${h.lastError}`).join('; ').slice(0, 500),
    };
  }

  /** The breaker of a chain of one; for a chain, `open` only while every breaker is open. */
  get state(): ProviderBreakerState {
    const states = this.#links.map((link) => link.breakerState);
    if (states.length === 1) return states[0] as ProviderBreakerState;
    if (states.every((s) => s === 'open')) return 'open';
    return states.includes('closed') ? 'closed' : 'half-open';
  }

  /** Each provider in order with its capabilities, health, counts, budget and keys (last four characters only). */
  async providers(): Promise<ProviderStatus[]> {
    return Promise.all(
      this.#links.map(async (link, index): Promise<ProviderStatus> => {
        const usage = await link.usage();
        const health = link.health();
        const counts = this.#counts.get(link.name) as LinkCounts;
        const paused = usage.pausedUntilMs > this.#now();
        const breaker = link.breakerState;
        return {
          name: link.name as Source,
          position: index + 1,
          capabilities: capabilitiesOf(link),
          plan: link.plan === undefined ? null : { name: link.plan.name, history_days: link.plan.historyDays, intraday_days: link.plan.intradayDays },
          healthy: health.healthy && breaker !== 'open' && !paused,
          breaker: breaker === 'half-open' ? 'half_open' : breaker,
          paused_until: paused ? new Date(usage.pausedUntilMs).toISOString() : null,
          calls: counts.calls,
          failures: counts.failures,
          failovers: counts.failovers,
          last_success_at: health.lastSuccessAtMs === null ? null : new Date(health.lastSuccessAtMs).toISOString(),
          last_error: health.lastError === null ? null : health.lastError.slice(0, 500),
          budget: {
            max_rps: link.budget.maxRps > 0 ? link.budget.maxRps : null,
            daily_limit: link.budget.dailyLimit > 0 ? link.budget.dailyLimit : null,
            used_today: usage.usedToday,
          },
          keys: usage.keys.map((key) => ({
            last4: key.lastFour,
            state: key.state,
            used_today: key.usedToday,
            set_aside_until: key.state === 'set_aside' && key.untilMs !== undefined ? new Date(key.untilMs).toISOString() : null,
          })),
        };
      }),
    );
  }

  /** Stops every link's timers. */
  close(): void {
    for (const link of this.#links) link.close();
  }

  #serves(link: ProviderLink, symbol: string, classes: (c: ProviderLink['capabilities']) => readonly AssetClass[]): Eligibility {
    const target = link.express(symbol);
    if (target === undefined) return 'unexpressed';
    return classes(link.capabilities).includes(target.assetClass) ? 'serves' : 'unserved';
  }

  /** A link's retention of `interval` bars of `symbol` in days (`null`: no bound); `undefined` when it does not serve them. */
  #retention(link: ProviderLink, symbol: string, interval: HistoryInterval): number | null | undefined {
    const target = link.express(symbol);
    if (target === undefined) return undefined;
    const intervals = link.capabilities.history[target.assetClass];
    if (intervals === undefined || !(interval in intervals)) return undefined;
    return intervals[interval] ?? null;
  }

  #servesHistory(link: ProviderLink, query: HistoryQuery): Eligibility {
    if (link.express(query.symbol) === undefined) return 'unexpressed';
    const retentionDays = this.#retention(link, query.symbol, query.interval);
    if (retentionDays === undefined) return 'unserved';
    if (retentionDays === null) return 'serves';
    const now = this.#now();
    const startMs =
      query.startMs ?? (query.range === undefined || query.range === 'max' ? undefined : rangeStartMs(query.range, now));
    // A day of slack: a window that starts on the retention's first day is still served.
    return startMs === undefined || startMs >= now - (retentionDays + 1) * DAY_MS ? 'serves' : 'beyond';
  }

  /** What each configured provider covers, for the answer to a symbol none of them serves. */
  #coverage(): Array<{ provider: string; covers: string }> {
    return this.#links.map((link) => ({ provider: link.name, covers: PROVIDER_COVERAGE[link.name] ?? 'its own symbols' }));
  }

  /**
   * Asks the eligible providers in turn. `unknownKey` names the read in the per-provider memory of
   * unknown symbols (none for search). Resolves to the answer and who gave it, or `undefined` when
   * every eligible provider asked said unknown; rejects when none could answer. With no eligible
   * provider at all, `noneEligible` says why (a symbol none can serve, a window beyond every reach:
   * never "unknown"); without it the answer is `undefined`.
   */
  async #route<T>(
    unknownKey: string | undefined,
    eligible: (link: ProviderLink) => Eligibility,
    call: (link: ProviderLink) => Promise<T | undefined>,
    noneEligible?: (verdicts: Eligibility[]) => never,
  ): Promise<{ value: T; source: string } | undefined> {
    const verdicts = this.#links.map(eligible);
    const candidates = this.#links.filter((_, i) => verdicts[i] === 'serves');
    if (candidates.length === 0) {
      noneEligible?.(verdicts);
      return undefined;
    }
    const attempts: ProviderAttempt[] = [];
    let soonestS = Infinity;
    let lastError: DataSourceError | undefined;
    for (const [i, link] of candidates.entries()) {
      const unknown = this.#unknown.get(link.name) as QuickLRU<string, true>;
      // A chain of one has nobody to move on to: its unknowns are the market-data service's to cache.
      const remember = unknownKey !== undefined && this.#links.length > 1;
      if (remember && unknown.has(unknownKey)) continue;
      const outcome = await this.#ask(link, call);
      if (outcome.kind === 'answer') return { value: outcome.value, source: link.name };
      if (outcome.kind === 'unknown') {
        if (remember) unknown.set(unknownKey, true);
        continue;
      }
      attempts.push({ provider: link.name, reason: REASON_WORDS[outcome.reason] ?? outcome.reason });
      soonestS = Math.min(soonestS, outcome.error.retryAfterSeconds);
      lastError = outcome.error;
      const next = candidates[i + 1]?.name ?? 'none';
      (this.#counts.get(link.name) as LinkCounts).failovers++;
      this.#metrics.failover(link.name, next);
      // Never a key: the reason is one of a closed set, the error's message never holds one.
      this.#logger?.warn({ from: link.name, to: next, reason: outcome.reason, err: outcome.error.message }, `Market data: ${link.name} could not answer (${outcome.reason}), ${next === 'none' ? 'no provider left' : `asking ${next}`}`);
    }
    if (attempts.length === 0) return undefined;
    if (this.#links.length === 1 && lastError !== undefined) throw lastError;
    throw new ProvidersUnavailableError(attempts, Number.isFinite(soonestS) ? soonestS : 5, { cause: lastError });
  }

  /** One provider's answer to a read; a refused key is set aside and the next key of its pool tried. */
  async #ask<T>(link: ProviderLink, call: (link: ProviderLink) => Promise<T | undefined>): Promise<Outcome<T>> {
    const counts = this.#counts.get(link.name) as LinkCounts;
    // Each key at most once per read: a pool whose every key is refused ends the loop.
    for (let tries = 0; tries <= link.keys.size; tries++) {
      counts.calls++;
      try {
        const value = await call(link);
        this.#metrics.upstreamCall(link.name, value === undefined ? 'unknown' : 'success');
        return value === undefined ? { kind: 'unknown' } : { kind: 'answer', value };
      } catch (err) {
        const error = err instanceof DataSourceError ? err : new DataSourceError(`Market data provider '${link.name}' failed`, { cause: err });
        const reason = err instanceof UpstreamFailureError ? err.reason : err instanceof UpstreamHeldBackError ? err.holdReason : 'error';
        this.#metrics.upstreamCall(link.name, reason);
        counts.failures++;
        if ((reason === 'unauthorized' || reason === 'limit_reached') && err instanceof UpstreamFailureError && err.keyIndex !== undefined) {
          const untilMs = reason === 'limit_reached' ? (Math.floor(this.#now() / DAY_MS) + 1) * DAY_MS : undefined;
          link.keys.setAside(err.keyIndex, reason, untilMs);
          this.#logger?.warn({ provider: link.name, keyIndex: err.keyIndex, reason }, `Market data: ${link.name} refused key #${err.keyIndex} (${reason}): set aside`);
          if (link.keys.exhaustedReason() === undefined) continue;
        }
        return { kind: 'failed', reason, error };
      }
    }
    return { kind: 'failed', reason: 'unauthorized', error: new DataSourceError(`Market data provider '${link.name}' refused every key`) };
  }
}

/** A link's capabilities as the contract spells them. */
function capabilitiesOf(link: ProviderLink): ProviderStatus['capabilities'] {
  const { capabilities } = link;
  return {
    quote: [...capabilities.quote],
    history: Object.entries(capabilities.history).map(([assetClass, intervals]) => ({
      asset_class: assetClass as AssetClass,
      intervals: Object.entries(intervals ?? {}).map(([interval, retentionDays]) => ({
        interval: interval as ProviderStatus['capabilities']['history'][number]['intervals'][number]['interval'],
        retention_days: retentionDays ?? null,
      })),
    })),
    search: [...capabilities.search],
    events: [...capabilities.events],
  };
}
