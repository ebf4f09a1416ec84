/** Interim stand-in for the trading calendar (replaced by the real calendar in the next commit). */
import type { InstrumentType, MarketState } from '../ports.js';

export type MarketCode = 'US' | 'UK' | 'DE' | 'EU' | 'JP' | 'HK' | 'CN' | 'CRYPTO' | 'FX';
export interface MarketInfo {
  code: MarketCode;
  name: string;
  timezone: string;
}
export const MARKETS: readonly MarketInfo[] = [{ code: 'CRYPTO', name: 'Cryptocurrencies', timezone: 'UTC' }];
export interface MarketStatus {
  market: MarketCode;
  name: string;
  timezone: string;
  state: MarketState;
  nextOpen: Date | null;
  nextClose: Date | null;
}
export function marketStatus(code: MarketCode, _atMs: number): MarketStatus {
  const info = MARKETS.find((m) => m.code === code) ?? { code, name: code, timezone: 'UTC' };
  return { market: info.code, name: info.name, timezone: info.timezone, state: 'open', nextOpen: null, nextClose: null };
}
export function allMarketStatuses(atMs: number): MarketStatus[] {
  return MARKETS.map((m) => marketStatus(m.code, atMs));
}
export function marketOf(_instrument: { instrument_type: InstrumentType; timezone: string }): MarketCode | undefined {
  return undefined;
}
