/**
 * Which session a live bar's minute lies in (DESIGN 26): the regular session, the exchange's pre- or
 * post-market hours (flagged), or none (no bar). Crypto trades every minute; FX every minute of its week.
 */
import type { BarSession } from './live-bar.js';
import { marketStatus, type MarketCode } from './market-calendar.js';
import { marketOfSymbol } from './provider-symbols.js';

/** Minutes remembered per market: the builder asks once per tick, the calendar answers once per minute. */
const MEMO_MAX = 4096;

/** A session lookup with a small memo by market and minute. */
export function barSessions(): (symbol: string, minuteMs: number) => BarSession | undefined {
  const memo = new Map<string, BarSession | null>();
  const markets = new Map<string, MarketCode>();
  return (symbol, minuteMs) => {
    let market = markets.get(symbol);
    if (market === undefined) {
      market = marketOfSymbol(symbol);
      if (markets.size >= MEMO_MAX) markets.clear();
      markets.set(symbol, market);
    }
    const key = `${market}:${minuteMs}`;
    let session = memo.get(key);
    if (session === undefined) {
      const state = marketStatus(market, minuteMs).state;
      session = state === 'open' ? 'regular' : state === 'pre' || state === 'post' ? state : null;
      if (memo.size >= MEMO_MAX) memo.clear();
      memo.set(key, session);
    }
    return session ?? undefined;
  };
}
