/**
 * Builds the configured chain of market-data providers (MARKET_DATA_PROVIDERS; MARKET_DATA_PROVIDER
 * alone is a chain of one): each real provider behind its upstream guard, behind its circuit breaker
 * and health record, as one `ProviderLink` the provider router (services/provider-router.ts) asks in turn.
 */
import type { Config } from '../../config.js';
import type { Logger } from '../logger.js';
import type { MarketDataProvider } from '../../domain/ports/market-data.js';
import type { Metrics } from '../../domain/ports/metrics.js';
import type { SharedCounters } from '../../domain/ports/counters.js';
import type { ProviderName } from '../../config.js';
import { RedisSharedCounters } from '../counters/redis-shared-counters.js';
import { asProviderAdapter, createProviderAdapter, SIMULATED_CAPABILITIES, YAHOO_CAPABILITIES } from './provider-adapters.js';
import { GuardedProviderLink } from './provider-link.js';
import { SharedKeyPool } from './shared-key-pool.js';
import { describePlan, planCapabilities } from './provider-plans.js';
import { ResilientMarketDataProvider, type ResilientMarketDataProviderOptions } from './resilient-market-data-provider.js';
import { SimulatedMarketDataProvider } from './simulated-market-data-provider.js';
import { UpstreamGuard } from './upstream-guard.js';
import { YahooMarketDataProvider } from './yahoo-market-data-provider.js';

export { CircuitOpenError, ResilientMarketDataProvider } from './resilient-market-data-provider.js';
export type { BreakerState, DatasourceHealth, ResilientMarketDataProviderOptions } from './resilient-market-data-provider.js';
export { SIMULATED_DIRECTORY, SimulatedMarketDataProvider } from './simulated-market-data-provider.js';
export type { SimulatedInstrument, SimulatedMarketDataProviderOptions } from './simulated-market-data-provider.js';
export { UpstreamBusyError, UpstreamGuard, UpstreamRateLimitedError } from './upstream-guard.js';
export type { UpstreamGuardOptions } from './upstream-guard.js';
export { DEFAULT_USER_AGENT, YahooMarketDataProvider } from './yahoo-market-data-provider.js';
export { asProviderAdapter, createProviderAdapter, SIMULATED_CAPABILITIES, YAHOO_CAPABILITIES } from './provider-adapters.js';
export type { ProviderAdapterOptions } from './provider-adapters.js';
export { KeyPool, nextUtcMidnight } from './key-pool.js';
export { GuardedProviderLink } from './provider-link.js';
export { SharedKeyPool } from './shared-key-pool.js';
export { AlphaVantageMarketDataProvider } from './alpha-vantage-market-data-provider.js';
export { EcbMarketDataProvider } from './ecb-market-data-provider.js';
export { FmpMarketDataProvider } from './fmp-market-data-provider.js';
export { PolygonMarketDataProvider } from './polygon-market-data-provider.js';
export { TiingoMarketDataProvider } from './tiingo-market-data-provider.js';
export type { YahooMarketDataProviderOptions } from './yahoo-market-data-provider.js';

/** The part of the configuration the market-data adapters read. */
export type MarketConfig = Pick<Config['market'], 'provider' | 'baseUrl' | 'timeoutMs'> &
  Partial<Pick<Config['market'], 'providers' | 'breakerResetMs' | 'upstreamMaxRps' | 'upstreamMaxConcurrency' | 'providerSettings' | 'backgroundShare'>>;

/** Defaults of the upstream guard when the configuration leaves them out (as `loadConfig` does not). */
const GUARD_DEFAULTS = { maxRps: 5, maxConcurrency: 4 } as const;

/**
 * How long a call may wait for admission (a free slot, the next budget slot) when another provider can
 * be asked next. A budget used up for longer is refused at once (the guard knows it after one counter
 * read); this bound covers the counter's round trip and the spacing of calls within a second on a busy host.
 */
const CHAIN_BUDGET_WAIT_MS = 250;

/** Knobs for tests and special deployments; production uses the defaults. */
export interface CreateMarketDataProviderOptions extends Omit<ResilientMarketDataProviderOptions, 'timeoutMs' | 'logger'> {
  /** The fetch implementation the HTTP providers use (global `fetch` by default). */
  fetch?: typeof fetch;
  /** Where every instance shares the upstream budgets, daily key counts and pauses (the service's one `SharedCounters`); absent = this instance alone, in memory. */
  counters?: SharedCounters | undefined;
  /**
   * How long a call may wait for its provider's budget, in ms (default: the provider's timeout in a
   * chain of one, 250 ms when a next provider can be asked).
   */
  upstreamMaxWaitMs?: number;
}

/**
 * One link per provider of `market.providers` (or `market.provider` alone), in order.
 *
 * yahoo and the keyed providers: adapter behind a breaker whose calls an `UpstreamGuard` admits
 * (fleet-wide budget of `<P>_MAX_RPS`, concurrency cap, 429 pause shared by every instance). The
 * breaker is asked first, so an open one fails fast without spending budget; then the guard admits the
 * call and only then is the breaker fired, so a refusal of the guard is no call of the breaker's (see
 * `ResilientMarketDataProvider`), and the breaker's timeout covers the request alone. Keyed providers
 * draw their keys from a `SharedKeyPool` counting `<P>_DAILY_LIMIT` per key and UTC day fleet-wide.
 *
 * simulated: no guard (no upstream to protect). It logs that the data is demo data and how to switch
 * to live quotes.
 */
export function createProviderChain(market: MarketConfig, logger: Logger, options: CreateMarketDataProviderOptions = {}): GuardedProviderLink[] {
  const names = market.providers !== undefined && market.providers.length > 0 ? market.providers : [market.provider];
  const counters = options.counters ?? new RedisSharedCounters();
  const links = names.map((name) => buildLink(name, market, logger, { ...options, counters, shared: options.counters !== undefined }, names.length));
  if (links.length > 1) logger.info({ providers: names }, `Market data: providers in order ${names.join(', ')}, failing over inside each request`);
  return links;
}

/** The first provider of the chain alone, behind its guard and breaker (the upstream-guard tests, the CLI). */
export function createMarketDataProvider(market: MarketConfig, logger: Logger, options: CreateMarketDataProviderOptions = {}): ResilientMarketDataProvider {
  const counters = options.counters ?? new RedisSharedCounters();
  return buildLink(market.provider, market, logger, { ...options, counters, shared: options.counters !== undefined }, 1).resilient;
}

/** A link over a provider a test hands in (no network): every class and interval, behind a breaker. */
export function createTestProviderLink(provider: MarketDataProvider, options: ResilientMarketDataProviderOptions & { metrics?: Pick<Metrics, 'upstreamRequest'> }): GuardedProviderLink {
  return new GuardedProviderLink({
    adapter: asProviderAdapter(provider, SIMULATED_CAPABILITIES),
    resilient: new ResilientMarketDataProvider(provider, options),
    budget: { maxRps: 0, dailyLimit: 0 },
  });
}

function buildLink(
  name: ProviderName,
  market: MarketConfig,
  logger: Logger,
  options: CreateMarketDataProviderOptions & { counters: SharedCounters; /** False when the counters are this instance's own. */ shared: boolean },
  chainLength: number,
): GuardedProviderLink {
  const { fetch: fetchImpl, counters, shared, upstreamMaxWaitMs, ...rest } = options;
  const breaker = { ...(market.breakerResetMs !== undefined ? { resetTimeoutMs: market.breakerResetMs } : {}), ...rest };
  const maxConcurrency = market.upstreamMaxConcurrency ?? GUARD_DEFAULTS.maxConcurrency;
  const waitFor = (timeoutMs: number) => upstreamMaxWaitMs ?? (chainLength > 1 ? CHAIN_BUDGET_WAIT_MS : timeoutMs);

  if (name === 'simulated') {
    logger.info(
      { provider: 'simulated' },
      'Market data: SIMULATED demo data (a deterministic random walk, not real quotes); set MARKET_DATA_PROVIDER=yahoo for live quotes from Yahoo Finance',
    );
    const simulated = new SimulatedMarketDataProvider({});
    return new GuardedProviderLink({
      adapter: asProviderAdapter(simulated, SIMULATED_CAPABILITIES),
      resilient: new ResilientMarketDataProvider(simulated, { ...breaker, timeoutMs: market.timeoutMs, logger }),
      budget: { maxRps: 0, dailyLimit: 0 },
    });
  }

  if (name === 'yahoo') {
    // Yahoo's own variables win; without them (tests building the provider alone) the MARKET_DATA_* ones.
    const settings = market.providerSettings?.yahoo;
    const baseUrl = settings?.baseUrl ?? market.baseUrl;
    const timeoutMs = settings?.timeoutMs ?? market.timeoutMs;
    const maxRps = settings?.maxRps ?? market.upstreamMaxRps ?? GUARD_DEFAULTS.maxRps;
    const maxWaitMs = waitFor(timeoutMs);
    logger.info({ provider: 'yahoo', baseUrl, timeoutMs, maxRps, maxConcurrency, sharedBudget: shared }, 'Market data: live quotes from Yahoo Finance');
    const yahoo = new YahooMarketDataProvider({ baseUrl, timeoutMs, ...(fetchImpl ? { fetch: fetchImpl } : {}) });
    const guard = new UpstreamGuard({ name: 'yahoo', maxRps, maxConcurrency, maxWaitMs, refuseWhenFull: chainLength > 1, counters, logger, backgroundShare: market.backgroundShare ?? 1 });
    return new GuardedProviderLink({
      adapter: asProviderAdapter(yahoo, YAHOO_CAPABILITIES),
      resilient: new ResilientMarketDataProvider(yahoo, { ...breaker, timeoutMs, guard, logger }),
      budget: { maxRps, dailyLimit: 0 },
      counters,
    });
  }

  const settings = market.providerSettings?.[name];
  if (!settings) throw new Error(`No settings for market-data provider '${name}'`);
  const maxWaitMs = waitFor(settings.timeoutMs);
  const sharedKeys = new SharedKeyPool({ provider: name, keys: settings.apiKeys, dailyLimit: settings.dailyLimit, counters });
  const adapter = createProviderAdapter(name, settings, { keys: sharedKeys, ...(fetchImpl ? { fetch: fetchImpl } : {}) });
  const guard = new UpstreamGuard({
    name,
    maxRps: settings.maxRps,
    maxConcurrency,
    maxWaitMs,
    refuseWhenFull: chainLength > 1,
    counters,
    logger,
    backgroundShare: market.backgroundShare ?? 1,
    dailyLimit: settings.dailyLimit * settings.apiKeys.length,
  });
  const capabilities = planCapabilities(adapter.capabilities, settings.plan);
  logger.info(
    { provider: name, baseUrl: settings.baseUrl, timeoutMs: settings.timeoutMs, keys: settings.apiKeys.length, ...describePlan(settings, capabilities, guard.backgroundBudget) },
    `Market data: live data from ${name}${settings.plan ? ` on its ${settings.plan.name} plan` : ''}`,
  );
  return new GuardedProviderLink({
    adapter,
    capabilities,
    plan: settings.plan,
    resilient: new ResilientMarketDataProvider(adapter, { ...breaker, timeoutMs: settings.timeoutMs, guard, logger }),
    budget: { maxRps: settings.maxRps, dailyLimit: settings.dailyLimit },
    counters,
    sharedKeys,
  });
}
