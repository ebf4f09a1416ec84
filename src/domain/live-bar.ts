/**
 * Live bars (DESIGN 26): one-minute OHLCV bars built from pushed prices by the leader of a push
 * upstream, published to every instance, and stored as history once final. This file is the shape the
 * builder, the streams and the history store share.
 */

/** Where in the exchange's day a bar lies: crypto and FX bars are always `regular`. */
export type BarSession = 'regular' | 'pre' | 'post';

/** One bar as built, published and stored. */
export interface LiveBar {
  /** Canonical (upper-case) symbol. */
  symbol: string;
  interval: '1m';
  /** The minute's start, epoch milliseconds UTC. */
  timeMs: number;
  open: number;
  high: number;
  low: number;
  close: number;
  /** Shares (or units) traded within the minute; null where the upstream gives no volume (indices, FX). */
  volume: number | null;
  /** True once the minute has ended and its grace passed: the bar no longer changes unless revised. */
  final: boolean;
  /** True when a final bar is sent again because a late trade changed it. */
  revised: boolean;
  session: BarSession;
  /** The push upstream the prices came from (`yahoo`, `polygon`); stored as provider `live:<upstream>`. */
  upstream: string;
}

/** Where final bars go: the history store, as provider `live:<upstream>`. */
export interface LiveBarSink {
  /** Stores final (or revised) bars; a bar for the same symbol and minute replaces the one stored. */
  storeFinal(bars: readonly LiveBar[]): Promise<void>;
}

/** The provider name under which a live upstream's bars are stored. */
export function liveProvider(upstream: string): string {
  return `live:${upstream}`;
}

/** Whether stored data came from a push stream rather than an upstream's own bars. */
export function isFromStream(provider: string): boolean {
  return provider.startsWith('live:');
}
