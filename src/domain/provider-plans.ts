/**
 * Provider plans (DESIGN 19): each keyed provider's published tiers, with how far back each reaches
 * (daily and longer bars, intraday bars), how fast it may be called and how much a day. The figures,
 * their sources and the dates they were read are in docs/provider-plans.md; a figure no source
 * confirmed is marked there. `<P>_PLAN` picks a tier; `<P>_HISTORY_DAYS`, `<P>_INTRADAY_DAYS`,
 * `<P>_MAX_RPS` and `<P>_DAILY_LIMIT` override its figures. Pure data and arithmetic, no I/O.
 */
import type { HistoryInterval } from './ports/market-data.js';
import type { ProviderCapabilities, RetentionDays } from './ports/providers.js';

/** One tier of one provider. */
export interface PlanFigures {
  /** Days of daily, weekly and monthly bars it reaches back; `null` = as far as the instrument goes. */
  historyDays: RetentionDays;
  /** Days of intraday bars (1m to 1h) it reaches back; `null` = no bound published. */
  intradayDays: RetentionDays;
  /** Requests per second, fleet-wide (fractions for per-minute and per-hour plans); 0 = no limit. */
  maxRps: number;
  /** Requests per key per UTC day; 0 = no limit. */
  dailyLimit: number;
}

/** A provider's tiers, its default (free) tier first. */
interface ProviderPlanTable {
  default: string;
  tiers: Readonly<Record<string, PlanFigures>>;
}

/** The keyed providers and their tiers (see docs/provider-plans.md for each figure's source). */
export const PROVIDER_PLANS = {
  polygon: {
    default: 'basic',
    tiers: {
      // 5 calls a minute, two years.
      basic: { historyDays: 730, intradayDays: 730, maxRps: 5 / 60, dailyLimit: 0 },
      starter: { historyDays: 1826, intradayDays: 1826, maxRps: 0, dailyLimit: 0 },
      developer: { historyDays: 3652, intradayDays: 3652, maxRps: 0, dailyLimit: 0 },
      advanced: { historyDays: 7305, intradayDays: 7305, maxRps: 0, dailyLimit: 0 },
    },
  },
  alpha_vantage: {
    default: 'free',
    tiers: {
      free: { historyDays: null, intradayDays: 9500, maxRps: 1, dailyLimit: 25 },
      premium: { historyDays: null, intradayDays: 9500, maxRps: 75 / 60, dailyLimit: 0 },
    },
  },
  tiingo: {
    default: 'free',
    tiers: {
      free: { historyDays: null, intradayDays: 30, maxRps: 50 / 3600, dailyLimit: 1000 },
      power: { historyDays: null, intradayDays: 30, maxRps: 5000 / 3600, dailyLimit: 0 },
    },
  },
  fmp: {
    default: 'basic',
    tiers: {
      basic: { historyDays: 1827, intradayDays: null, maxRps: 5, dailyLimit: 250 },
      starter: { historyDays: 1827, intradayDays: null, maxRps: 300 / 60, dailyLimit: 0 },
      premium: { historyDays: 10958, intradayDays: null, maxRps: 750 / 60, dailyLimit: 0 },
      ultimate: { historyDays: 10958, intradayDays: null, maxRps: 3000 / 60, dailyLimit: 0 },
    },
  },
} as const satisfies Readonly<Record<string, ProviderPlanTable>>;

/** A provider with plans (the keyed ones). */
export type PlannedProvider = keyof typeof PROVIDER_PLANS;

/** True for a provider whose tiers `PROVIDER_PLANS` knows. */
export function isPlannedProvider(name: string): name is PlannedProvider {
  return Object.hasOwn(PROVIDER_PLANS, name);
}

/** The tier names of `provider`, its default first. */
export function tiersOf(provider: PlannedProvider): string[] {
  const table: ProviderPlanTable = PROVIDER_PLANS[provider];
  return [table.default, ...Object.keys(table.tiers).filter((t) => t !== table.default)];
}

/** The figures of `tier` (the default tier when undefined); `undefined` for a tier the provider does not publish. */
export function planFigures(provider: PlannedProvider, tier?: string): PlanFigures | undefined {
  const table: ProviderPlanTable = PROVIDER_PLANS[provider];
  const name = tier ?? table.default;
  return Object.hasOwn(table.tiers, name) ? table.tiers[name] : undefined;
}

/** A provider's plan as configured: the tier and the reach it gives after the overrides. */
export interface ProviderPlan {
  /** The tier's name (`basic`, `developer`, ...). */
  name: string;
  /** Days back of daily and longer bars (`null`: no bound). */
  historyDays: RetentionDays;
  /** Days back of intraday bars (`null`: no bound). */
  intradayDays: RetentionDays;
}

const INTRADAY: ReadonlySet<HistoryInterval> = new Set(['1m', '5m', '15m', '30m', '1h']);

/** The reach of `plan` for `interval`, in days (`null`: no bound). */
export function reachDays(plan: Pick<ProviderPlan, 'historyDays' | 'intradayDays'>, interval: HistoryInterval): RetentionDays {
  return INTRADAY.has(interval) ? plan.intradayDays : plan.historyDays;
}

/**
 * `capabilities` with each interval's retention replaced by the plan's reach (what the adapter
 * serves is unchanged: which classes and intervals; how far back is the plan's).
 */
export function withPlanReach(capabilities: ProviderCapabilities, plan: Pick<ProviderPlan, 'historyDays' | 'intradayDays'>): ProviderCapabilities {
  const history: Record<string, Partial<Record<HistoryInterval, RetentionDays>>> = {};
  for (const [assetClass, intervals] of Object.entries(capabilities.history)) {
    history[assetClass] = Object.fromEntries(Object.keys(intervals ?? {}).map((interval) => [interval, reachDays(plan, interval as HistoryInterval)]));
  }
  return { ...capabilities, history };
}

/** The variables that extend a provider's reach for `interval` (`POLYGON_PLAN or POLYGON_HISTORY_DAYS`). */
export function reachVariables(provider: string, interval: HistoryInterval): string {
  const p = provider.toUpperCase();
  const days = INTRADAY.has(interval) ? `${p}_INTRADAY_DAYS` : `${p}_HISTORY_DAYS`;
  return isPlannedProvider(provider) ? `${p}_PLAN or ${days}` : days;
}

/**
 * Which markets each provider can express, in words, for the answer to a symbol no configured
 * provider serves (the adapters' `express` is the rule; this is its summary).
 */
export const PROVIDER_COVERAGE: Readonly<Record<string, string>> = {
  simulated: 'its demo directory of about 100 instruments',
  yahoo: 'every market Yahoo Finance lists',
  polygon: 'US stocks and ETFs, US indices (^GSPC, ^DJI, ^IXIC, ^NDX, ...), FX and crypto pairs',
  alpha_vantage: 'US stocks and ETFs',
  tiingo: 'US stocks and ETFs, FX and crypto pairs',
  fmp: 'US stocks and ETFs, indices, FX and crypto pairs',
  ecb: 'euro reference FX rates (pairs of the currencies the ECB publishes)',
};
