/**
 * A keyed provider's plan as the infrastructure applies it: the reach of its plan replaces the
 * retention its adapter declares, and the startup log line says the plan, the reach and the budget.
 */
import type { ProviderSettings } from '../../config.js';
import { withPlanReach, type ProviderPlan } from '../../domain/provider-plans.js';
import type { ProviderCapabilities } from '../../domain/ports/providers.js';

/** The adapter's capabilities with the plan's reach (unchanged without a plan). */
export function planCapabilities(capabilities: ProviderCapabilities, plan: ProviderPlan | undefined): ProviderCapabilities {
  return plan === undefined ? capabilities : withPlanReach(capabilities, plan);
}

/** The fields of a provider's startup log line: its plan, reach per interval kind, budget and background share. */
export function describePlan(
  settings: ProviderSettings,
  capabilities: ProviderCapabilities,
  background: { perWindow: number | null; windowS: number; perDay: number | null },
): Record<string, unknown> {
  const intervals = new Set(Object.values(capabilities.history).flatMap((byInterval) => Object.keys(byInterval ?? {})));
  return {
    plan: settings.plan?.name ?? null,
    reach: settings.plan === undefined ? null : { historyDays: settings.plan.historyDays, intradayDays: settings.plan.intradayDays, intervals: [...intervals] },
    maxRps: settings.maxRps,
    dailyLimit: settings.dailyLimit,
    background,
  };
}
