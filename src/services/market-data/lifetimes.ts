/**
 * How long a market data answer stays true in the cache (its lifetime policy): a quote lives longer
 * while its market is closed, history by its interval and its market's session.
 */
import { marketOf, marketStatus } from '../../domain/market-calendar.js';
import { listedMarketOfSymbol } from '../../domain/provider-symbols.js';
import type { HistoryInterval, HistoryQuery, Quote } from '../../domain/ports/market-data.js';
import { MINUTE_MS, HOUR_MS, DAY_MS } from '../../domain/durations.js';

/** How long an answer missing part of its window lives, so the missing part is asked for again soon. */
export const PARTIAL_TTL_MS = 30_000;
/** How long a search answer lives. */
export const SEARCH_TTL_MS = DAY_MS;
/** The longest the configured indices live when one of them failed upstream, so it comes back soon. */
export const DEGRADED_INDICES_TTL_MS = 5000;

export const INTRADAY: ReadonlySet<HistoryInterval> = new Set(['1m', '5m', '15m', '30m', '1h']);

/** The lifetimes of quotes as configured. */
export interface QuoteLifetimes {
  /** Lifetime of a quote while its market trades (CACHE_TTL_SECONDS in ms). */
  quoteTtlMs: number;
  /** The longest a closed market's quote is kept waiting for the next open. */
  closedQuoteMaxTtlMs: number;
}

/**
 * While the market trades (or in its extended sessions) a quote lives CACHE_TTL_SECONDS; while it
 * is closed it cannot change before the next open, so it lives until then, at most an hour.
 */
export function quoteLifetime(quote: Quote, lifetimes: QuoteLifetimes, now: number): number {
  if (quote.market_state !== 'closed') return lifetimes.quoteTtlMs;
  const market = marketOf(quote);
  const nextOpen = market === undefined ? null : marketStatus(market, now).nextOpen;
  if (nextOpen === null) return lifetimes.quoteTtlMs;
  return Math.min(lifetimes.closedQuoteMaxTtlMs, Math.max(lifetimes.quoteTtlMs, nextOpen.getTime() - now));
}

/**
 * Intraday candles change every minute; daily and longer ones change only while the market
 * trades: an hour while it is open, until the next open while it is closed (at most three days).
 * The market is the symbol's own, by the symbol rule.
 */
export function historyLifetime(query: HistoryQuery, now: number): number {
  if (INTRADAY.has(query.interval)) return MINUTE_MS;
  const market = listedMarketOfSymbol(query.symbol);
  if (market === undefined) return HOUR_MS;
  const status = marketStatus(market, now);
  if (status.state === 'open' || status.nextOpen === null) return HOUR_MS;
  return Math.min(3 * DAY_MS, Math.max(HOUR_MS, status.nextOpen.getTime() - now));
}
