/**
 * How often background work may run on the providers' budgets (DESIGN 19): the index refresh asks
 * each configured index of the provider that would answer it; on a small budget (Polygon's 5 calls a
 * minute, Alpha Vantage's 25 a day) the refresh runs less often, so that its calls fit in
 * BACKGROUND_BUDGET_SHARE of each provider's rate and daily limit and callers keep the rest.
 */
import type { ProviderLink } from '../domain/ports/providers.js';

const DAY_S = 86_400;

/** The refresh interval to use, and why it differs from the configured one (undefined when it does not). */
export interface BackgroundSchedule {
  intervalMs: number;
  /** One sentence for the startup log when the interval was lengthened. */
  reason?: string;
}

/** The guard's budget window for a rate: a second, or a minute or an hour for rates under one a second. */
function windowOf(maxRps: number): { windowS: number; perWindow: number } {
  const windowS = Number.isInteger(maxRps) ? 1 : maxRps * 60 >= 1 ? 60 : 3600;
  return { windowS, perWindow: Math.max(1, Math.floor(maxRps * windowS + 1e-9)) };
}

/**
 * The index refresh's interval: the configured one, or longer when the calls of one refresh (one quote
 * per index, to the first provider of the chain that serves it) would not fit in `share` of a
 * provider's rate or of its keys' daily limit at that interval. At most a day.
 */
export function indexRefreshSchedule(links: readonly ProviderLink[], indices: readonly string[], configuredMs: number, share: number): BackgroundSchedule {
  const calls = new Map<ProviderLink, number>();
  for (const symbol of indices) {
    const link = links.find((l) => {
      const target = l.express(symbol);
      return target !== undefined && l.capabilities.quote.includes(target.assetClass);
    });
    if (link !== undefined) calls.set(link, (calls.get(link) ?? 0) + 1);
  }
  let intervalS = configuredMs / 1000;
  let reason: string | undefined;
  const need = (seconds: number, why: string) => {
    if (seconds > intervalS) {
      intervalS = seconds;
      reason = why;
    }
  };
  const shareWords = `${Math.round(share * 100)} % (BACKGROUND_BUDGET_SHARE=${share})`;
  for (const [link, n] of calls) {
    const { maxRps, dailyLimit } = link.budget;
    if (maxRps > 0) {
      const { windowS, perWindow } = windowOf(maxRps);
      const allowed = Math.floor(perWindow * share + 1e-9);
      const per = windowS === 1 ? 'a second' : windowS === 60 ? 'a minute' : 'an hour';
      need(allowed === 0 ? DAY_S : Math.ceil((n * windowS) / allowed), `its ${n} quote calls to ${link.name} must fit in ${shareWords} of ${link.name}'s ${perWindow} calls ${per}`);
    }
    if (dailyLimit > 0) {
      const allowed = Math.floor(dailyLimit * Math.max(1, link.keys.size) * share + 1e-9);
      need(allowed === 0 ? DAY_S : Math.ceil((n * DAY_S) / allowed), `its ${n} quote calls to ${link.name} must fit in ${shareWords} of ${link.name}'s ${dailyLimit * Math.max(1, link.keys.size)} calls a day`);
    }
  }
  const intervalMs = Math.min(DAY_S, intervalS) * 1000;
  if (reason === undefined || intervalMs <= configuredMs) return { intervalMs: configuredMs };
  return { intervalMs, reason: `the index refresh runs every ${intervalMs / 1000} s instead of every ${configuredMs / 1000} s (REFRESH_INTERVAL_SECONDS): ${reason}` };
}
