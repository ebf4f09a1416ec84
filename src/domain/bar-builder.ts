/**
 * The one-minute bar builder of DESIGN 26: pure (no clock, no I/O). It takes what a push upstream
 * sent, with its market time, and answers the bars that changed: the open bar of a minute while it is
 * built, the final bar once the minute has ended and its grace passed, and a final bar again
 * (`revised`) when a late trade changes it within the revision window.
 *
 * What it counts:
 * - a trade (Polygon/Massive `T`): its price, and its size as volume;
 * - a price tick with the day's cumulative volume (Yahoo's streamer): its price, and the rise of
 *   `dayVolume` since the last tick counted as volume (a fall is a new trading day: the new value is
 *   the base, nothing is counted for the tick that showed it);
 * - a minute aggregate (Polygon/Massive `AM`): taken as given, replacing what trades built for that
 *   minute; later trades of that minute change it no more.
 *
 * Each tick is counted once: ticks carrying a sequence are new when their sequence is past the last one
 * counted; ticks carrying a cumulative volume when it rose (or stayed, later); others when they are
 * later than the last one counted. A leader that takes over from the shared state (`SymbolBars`) thus
 * skips what its predecessor counted when the upstream sends it again.
 *
 * Never invented: a minute without a tick in a session has no bar; a tick outside every session is dropped.
 */
import type { BarSession, LiveBar } from './live-bar.js';
import { MINUTE_MS } from './durations.js';

/** One pushed price, as the builder takes it. */
export interface BarTick {
  symbol: string;
  price: number;
  /** Market time, epoch ms. */
  timeMs: number;
  /** Size of a trade (Polygon `s`): added to the minute's volume. */
  size?: number | undefined;
  /** The day's cumulative volume (Yahoo `dayVolume`): its rise is the minute's volume. */
  dayVolume?: number | undefined;
  /** The upstream's sequence of the trade (Polygon `q`), increasing per symbol. */
  sequence?: number | undefined;
  /** A minute aggregate (Polygon `AM`), taken as given for the minute starting at `startMs`. */
  aggregate?: { startMs: number; open: number; high: number; low: number; close: number; volume: number } | undefined;
}

/** One bar in the builder's state (what is shared so another leader continues it). */
export interface BuiltBar {
  /** Minute start, epoch ms. */
  t: number;
  o: number;
  h: number;
  l: number;
  c: number;
  /** Volume; null while no tick of the minute carried any. */
  v: number | null;
  s: BarSession;
  /** Final already published. */
  f: boolean;
  /** Given by an aggregate: trades no longer change it. */
  a: boolean;
  /** Market time of the tick that set the close: ticks of one minute may arrive out of order. */
  ct: number;
}

/** The builder's state of one symbol: plain JSON, stored as is in the shared cache. */
export interface SymbolBars {
  /** Bars not final yet and final bars still within the revision window, by ascending minute. */
  bars: BuiltBar[];
  /** The last sequence counted. */
  seq?: number;
  /** The market time of the last tick counted. */
  time?: number;
  /** The last cumulative day volume seen. */
  dayVol?: number;
}

/** What changed: `update` for an open bar, `final` for a bar just finalised or revised. */
export interface BarChange {
  kind: 'update' | 'final';
  bar: LiveBar;
}

export interface BarBuilderOptions {
  upstream: string;
  /** The session a minute of `symbol` lies in, or undefined when the market is closed then. */
  sessionOf: (symbol: string, minuteMs: number) => BarSession | undefined;
  /** How long after its minute's end a bar becomes final (LIVE_BAR_GRACE_MS). */
  graceMs: number;
  /** How long after it became final a bar may still be revised; a later tick of its minute is dropped. */
  revisionWindowMs: number;
}

export function emptySymbolBars(): SymbolBars {
  return { bars: [] };
}

function minuteOf(timeMs: number): number {
  return Math.floor(timeMs / MINUTE_MS) * MINUTE_MS;
}

/** The bar as published. */
export function liveBarOf(symbol: string, upstream: string, bar: BuiltBar, revised: boolean): LiveBar {
  return { symbol, interval: '1m', timeMs: bar.t, open: bar.o, high: bar.h, low: bar.l, close: bar.c, volume: bar.v, final: bar.f, revised, session: bar.s, upstream };
}

export type TickOutcome = 'counted' | 'duplicate' | 'closed' | 'too-late' | 'invalid';

/** Applies one tick to a symbol's state (mutated); pushes what changed to `out`. */
export function applyTick(o: BarBuilderOptions, state: SymbolBars, tick: BarTick, nowMs: number, out: BarChange[]): TickOutcome {
  if (tick.aggregate !== undefined) return applyAggregate(o, state, tick.symbol, tick.aggregate, nowMs, out);
  if (!Number.isFinite(tick.price) || tick.price <= 0 || !Number.isFinite(tick.timeMs)) return 'invalid';
  let volume: number | null = null;
  if (tick.sequence !== undefined) {
    if (state.seq !== undefined && tick.sequence <= state.seq) return 'duplicate';
    if (tick.size !== undefined && tick.size >= 0) volume = tick.size;
  } else if (tick.dayVolume !== undefined) {
    const last = state.dayVol;
    if (last !== undefined) {
      if (tick.dayVolume > last) volume = tick.dayVolume - last;
      else if (tick.dayVolume === last) {
        if (state.time !== undefined && tick.timeMs <= state.time) return 'duplicate';
        volume = 0;
      } else if (state.time !== undefined && tick.timeMs <= state.time) return 'duplicate';
      else volume = 0; // a new trading day: the new value is the base
    } else volume = 0;
  } else {
    if (state.time !== undefined && tick.timeMs <= state.time) return 'duplicate';
    if (tick.size !== undefined && tick.size >= 0) volume = tick.size;
  }
  const minute = minuteOf(tick.timeMs);
  const session = o.sessionOf(tick.symbol, minute);
  if (session === undefined) {
    markCounted(state, tick);
    return 'closed';
  }
  let bar = state.bars.find((b) => b.t === minute);
  if (bar === undefined) {
    // A minute whose bar is no longer kept (past the window), or older than every kept one, stays as it was.
    if (nowMs >= minute + MINUTE_MS + o.graceMs + o.revisionWindowMs) {
      markCounted(state, tick);
      return 'too-late';
    }
    bar = { t: minute, o: tick.price, h: tick.price, l: tick.price, c: tick.price, v: volume, s: session, f: false, a: false, ct: tick.timeMs };
    insertBar(state, bar);
    markCounted(state, tick);
    if (nowMs >= minute + MINUTE_MS + o.graceMs) {
      // A late trade for a minute that had none: it is final at once.
      bar.f = true;
      out.push({ kind: 'final', bar: liveBarOf(tick.symbol, o.upstream, bar, false) });
    } else out.push({ kind: 'update', bar: liveBarOf(tick.symbol, o.upstream, bar, false) });
    return 'counted';
  }
  markCounted(state, tick);
  if (bar.a) return 'counted';
  if (bar.f && nowMs >= bar.t + MINUTE_MS + o.graceMs + o.revisionWindowMs) return 'too-late';
  bar.h = Math.max(bar.h, tick.price);
  bar.l = Math.min(bar.l, tick.price);
  // Ticks of one minute may arrive out of order: the close is the latest in market time.
  if (tick.timeMs >= bar.ct) {
    bar.c = tick.price;
    bar.ct = tick.timeMs;
  }
  if (volume !== null) bar.v = (bar.v ?? 0) + volume;
  out.push({ kind: bar.f ? 'final' : 'update', bar: liveBarOf(tick.symbol, o.upstream, bar, bar.f) });
  return 'counted';
}

function markCounted(state: SymbolBars, tick: BarTick): void {
  if (tick.sequence !== undefined) state.seq = Math.max(state.seq ?? tick.sequence, tick.sequence);
  state.time = Math.max(state.time ?? tick.timeMs, tick.timeMs);
  if (tick.dayVolume !== undefined) state.dayVol = tick.dayVolume;
}

function insertBar(state: SymbolBars, bar: BuiltBar): void {
  state.bars.push(bar);
  state.bars.sort((a, b) => a.t - b.t);
}

function applyAggregate(o: BarBuilderOptions, state: SymbolBars, symbol: string, agg: NonNullable<BarTick['aggregate']>, nowMs: number, out: BarChange[]): TickOutcome {
  const values = [agg.open, agg.high, agg.low, agg.close];
  if (values.some((x) => !Number.isFinite(x) || x <= 0) || !Number.isFinite(agg.volume) || agg.volume < 0) return 'invalid';
  const minute = minuteOf(agg.startMs);
  const session = o.sessionOf(symbol, minute);
  if (session === undefined) return 'closed';
  if (nowMs >= minute + MINUTE_MS + o.graceMs + o.revisionWindowMs) return 'too-late';
  let bar = state.bars.find((b) => b.t === minute);
  const given = { o: agg.open, h: agg.high, l: agg.low, c: agg.close, v: agg.volume };
  if (bar !== undefined && bar.a && bar.o === given.o && bar.h === given.h && bar.l === given.l && bar.c === given.c && bar.v === given.v) return 'duplicate';
  if (bar === undefined) {
    bar = { t: minute, ...given, s: session, f: false, a: true, ct: minute + MINUTE_MS - 1 };
    insertBar(state, bar);
  } else Object.assign(bar, given, { a: true });
  const revised = bar.f;
  if (!bar.f && nowMs >= minute + MINUTE_MS + o.graceMs) bar.f = true;
  out.push({ kind: bar.f ? 'final' : 'update', bar: liveBarOf(symbol, o.upstream, bar, revised) });
  return 'counted';
}

/**
 * Finalises the bars whose minute ended `graceMs` ago or more, and forgets final bars past the
 * revision window. Pushes each bar finalised now to `out`.
 */
export function closeBars(o: BarBuilderOptions, symbol: string, state: SymbolBars, nowMs: number, out: BarChange[]): void {
  for (const bar of state.bars) {
    if (bar.f || nowMs < bar.t + MINUTE_MS + o.graceMs) continue;
    bar.f = true;
    out.push({ kind: 'final', bar: liveBarOf(symbol, o.upstream, bar, false) });
  }
  state.bars = state.bars.filter((bar) => !bar.f || nowMs < bar.t + MINUTE_MS + o.graceMs + o.revisionWindowMs);
}

/** When the next bar of `state` becomes final (epoch ms), or undefined when none waits. */
export function nextCloseAt(o: BarBuilderOptions, state: SymbolBars): number | undefined {
  let next: number | undefined;
  for (const bar of state.bars) if (!bar.f) next = Math.min(next ?? Infinity, bar.t + MINUTE_MS + o.graceMs);
  return next;
}
