/** Which regular session each bar belongs to, for the studies anchored at a session's open (VWAP). */
import { tradingSessions, type MarketCode, type TradingSession } from '../market-calendar.js';
import { DAY_MS } from '../durations.js';

function openOf(s: TradingSession): number {
  return s.segments[0]!.startMs;
}

function closeOf(s: TradingSession): number {
  return s.segments[s.segments.length - 1]!.endMs;
}

/**
 * Each bar's session key: the open (epoch ms) of the regular session of `market` whose open..close
 * holds the bar's start, `null` outside every session (pre- and post-market bars). `times` ascending.
 */
export function sessionKeys(market: MarketCode, times: readonly number[]): Array<number | null> {
  if (times.length === 0) return [];
  const sessions = tradingSessions(market, times[0]!, times[times.length - 1]! + 1);
  const out: Array<number | null> = [];
  let s = 0;
  for (const t of times) {
    while (s < sessions.length && closeOf(sessions[s]!) <= t) s++;
    const session = sessions[s];
    out.push(session !== undefined && openOf(session) <= t ? openOf(session) : null);
  }
  return out;
}

/** The open of the regular session holding `timeMs`; `undefined` outside every session. */
export function sessionOpenAt(market: MarketCode, timeMs: number): number | undefined {
  const session = tradingSessions(market, timeMs - DAY_MS, timeMs + 1).find((s) => openOf(s) <= timeMs && timeMs < closeOf(s));
  return session === undefined ? undefined : openOf(session);
}
