/**
 * What a Yahoo-style symbol names, read from its spelling alone, so each provider adapter can say
 * whether and how it expresses it: `^GSPC` an index, `EURUSD=X` a currency pair, `BTC-USD` a
 * cryptocurrency in a fiat or stable coin, `AAPL`/`BRK-B` a US-listed share, `VOD.L` a share on another
 * exchange. Pure: no I/O.
 */
import type { AssetClass } from './ports/providers.js';
import type { MarketCode } from './market-calendar.js';

/** Quote currencies Yahoo spells crypto pairs in (`BTC-USD`); a share class (`BRK-B`) is never one of them. */
const CRYPTO_QUOTES = new Set(['USD', 'EUR', 'GBP', 'JPY', 'CAD', 'AUD', 'CHF', 'KRW', 'INR', 'CNY', 'HKD', 'SGD', 'USDT', 'USDC', 'BTC', 'ETH']);

/** Yahoo's exchange suffixes and the market each trades on. */
const SUFFIX_MARKETS: Readonly<Record<string, MarketCode>> = {
  L: 'UK',
  DE: 'DE',
  F: 'DE',
  PA: 'EU',
  AS: 'EU',
  BR: 'EU',
  MI: 'EU',
  MC: 'EU',
  T: 'JP',
  HK: 'HK',
  SS: 'CN',
  SZ: 'CN',
};

/** Indices whose market is not the US. */
const INDEX_MARKETS: Readonly<Record<string, MarketCode>> = {
  '^FTSE': 'UK',
  '^GDAXI': 'DE',
  '^FCHI': 'EU',
  '^STOXX50E': 'EU',
  '^N225': 'JP',
  '^HSI': 'HK',
};

/** A currency pair: `EURUSD=X` is EUR in USD; Yahoo's short form `JPY=X` is USD in JPY. */
export interface CurrencyPair {
  base: string;
  quote: string;
}

/** The pair of an FX symbol (`EURUSD=X`, `JPY=X`), or `undefined` for anything else. */
export function fxPairOf(symbol: string): CurrencyPair | undefined {
  const upper = symbol.toUpperCase();
  const long = /^([A-Z]{3})([A-Z]{3})=X$/.exec(upper);
  if (long?.[1] !== undefined && long[2] !== undefined) return { base: long[1], quote: long[2] };
  const short = /^([A-Z]{3})=X$/.exec(upper);
  if (short?.[1] !== undefined) return { base: 'USD', quote: short[1] };
  return undefined;
}

/** The pair of a crypto symbol (`BTC-USD`), or `undefined` for anything else (`BRK-B` included). */
export function cryptoPairOf(symbol: string): CurrencyPair | undefined {
  const match = /^([A-Z0-9]{2,10})-([A-Z]{3,4})$/.exec(symbol.toUpperCase());
  if (match?.[1] === undefined || match[2] === undefined || !CRYPTO_QUOTES.has(match[2])) return undefined;
  return { base: match[1], quote: match[2] };
}

/**
 * A share (or ETF) listed in the US as the providers of this codebase spell it: `AAPL`, or a class
 * share `BRK-B` (`base` BRK, `shareClass` B). `undefined` for exchange suffixes, indices, pairs.
 */
export function usTickerOf(symbol: string): { base: string; shareClass?: string } | undefined {
  const match = /^([A-Z]{1,6})(?:-([A-Z]{1,2}))?$/.exec(symbol.toUpperCase());
  if (match?.[1] === undefined || cryptoPairOf(symbol) !== undefined) return undefined;
  return match[2] === undefined ? { base: match[1] } : { base: match[1], shareClass: match[2] };
}

/** The asset class the spelling of `symbol` says. ETFs cannot be told from shares: both are `equity`. */
export function assetClassOf(symbol: string): AssetClass {
  const upper = symbol.toUpperCase();
  if (upper.startsWith('^')) return 'index';
  if (fxPairOf(upper)) return 'fx';
  if (cryptoPairOf(upper)) return 'crypto';
  return 'equity';
}

/** The market whose sessions a symbol's daily bars follow (a US market when its spelling names none this codebase lists). */
export function marketOfSymbol(symbol: string): MarketCode {
  return listedMarketOfSymbol(symbol) ?? 'US';
}

/**
 * The market a symbol's spelling names, by the symbol rule: crypto and currency pairs, the indices
 * listed here (any other index is a US one), an exchange suffix listed here, a plain ticker (US).
 * `undefined` for an exchange suffix this codebase does not list (`BHP.AX`): its sessions are unknown.
 */
export function listedMarketOfSymbol(symbol: string): MarketCode | undefined {
  const upper = symbol.toUpperCase();
  const assetClass = assetClassOf(upper);
  if (assetClass === 'crypto') return 'CRYPTO';
  if (assetClass === 'fx') return 'FX';
  if (assetClass === 'index') return INDEX_MARKETS[upper] ?? 'US';
  const suffix = /\.([A-Z]{1,2})$/.exec(upper)?.[1];
  return suffix !== undefined ? SUFFIX_MARKETS[suffix] : 'US';
}
