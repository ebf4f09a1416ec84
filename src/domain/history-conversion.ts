/**
 * A history window in another currency (DESIGN 25): open, high, low, close and adj_close times each
 * bar's factor (`barFactors`), dividends at their ex-date's rate, volume and splits unchanged. A bar
 * without a rate close enough is left out and its span listed under `missing`; a bar that took an
 * earlier day's rate carries the flag `fx_carried`. Nothing is rounded.
 */
import { barFactors, type FxSummary, type RateTable } from './currencies.js';
import type { CandleColumns, TimeSpan } from './ports/history-store.js';
import type { Candle, History, HistoryInterval } from './ports/market-data.js';
import { emptyCandleColumns } from './candle-columns.js';
import type { MissingReason } from './missing-spans.js';

export const FX_CARRIED = 'fx_carried';

/** The most spans an answer's `missing` lists (the contract's bound). */
const MAX_MISSING = 100;

/** What converting a window's bars gave. */
export interface ConvertedColumns {
  columns: CandleColumns;
  /** Bar starts (ms) of the bars converted at an earlier day's rate. */
  carried: number[];
  /** Spans of the bars left out for want of a rate, oldest first. */
  missing: TimeSpan[];
  summary: FxSummary;
}

/** `columns` (oldest first) converted from `from` to `to`; the input is not changed. */
export function convertColumns(table: RateTable, columns: CandleColumns, interval: HistoryInterval, intervalMs: number, timeZone: string, from: string, to: string): ConvertedColumns {
  const { factors, carried, summary } = barFactors(table, columns.timeMs, interval, timeZone, from, to);
  const n = factors.length;
  let kept = 0;
  for (let i = 0; i < n; i++) if (!Number.isNaN(factors[i]!)) kept++;
  const out = emptyCandleColumns(kept);
  const carriedTimes: number[] = [];
  const missing: TimeSpan[] = [];
  let j = 0;
  for (let i = 0; i < n; i++) {
    const f = factors[i]!;
    const t = columns.timeMs[i]!;
    if (Number.isNaN(f)) {
      const open = missing[missing.length - 1];
      // A run of bars without a rate is one span, up to the next bar that has one.
      if (open !== undefined && i > 0 && Number.isNaN(factors[i - 1]!)) open.endMs = t + intervalMs;
      else missing.push({ startMs: t, endMs: t + intervalMs });
      continue;
    }
    out.timeMs[j] = t;
    out.open[j] = columns.open[i]! * f;
    out.high[j] = columns.high[i]! * f;
    out.low[j] = columns.low[i]! * f;
    out.close[j] = columns.close[i]! * f;
    // NaN (no adjusted close) stays NaN.
    out.adjClose[j] = columns.adjClose[i]! * f;
    out.volume[j] = columns.volume[i]!;
    if (carried[i] === 1) carriedTimes.push(t);
    j++;
  }
  return { columns: out, carried: carriedTimes, missing, summary };
}

/** Dividends of `history.events` at their ex-date's rate (the date in the exchange's zone); one without a rate is left out. */
export function convertDividends(table: RateTable, dividends: History['events']['dividends'], timeZone: string, from: string, to: string): History['events']['dividends'] {
  if (dividends.length === 0) return dividends;
  const times = dividends.map((d) => Date.parse(d.time));
  const { factors } = barFactors(table, times, '1d', timeZone, from, to);
  return dividends.flatMap((d, i) => (Number.isNaN(factors[i]!) ? [] : [{ ...d, amount: d.amount * factors[i]! }]));
}

/** `history` (candles as the contract spells them) converted to `to`, with `missing`, `partial`, the flags and `fx` set. */
export function convertHistory(table: RateTable, history: History, to: string, intervalMs: number): History {
  const from = history.currency;
  const { factors, carried, summary } = barFactors(table, history.candles.map((c) => Date.parse(c.time)), history.interval, history.timezone, from, to);
  const candles: Candle[] = [];
  const missing: TimeSpan[] = [];
  history.candles.forEach((c, i) => {
    const f = factors[i]!;
    const t = Date.parse(c.time);
    if (Number.isNaN(f)) {
      const open = missing[missing.length - 1];
      if (open !== undefined && i > 0 && Number.isNaN(factors[i - 1]!)) open.endMs = t + intervalMs;
      else missing.push({ startMs: t, endMs: t + intervalMs });
      return;
    }
    const converted: Candle = { ...c, open: c.open * f, high: c.high * f, low: c.low * f, close: c.close * f, adj_close: c.adj_close === null ? null : c.adj_close * f };
    if (carried[i] === 1) converted.flags = [...(c.flags ?? []), FX_CARRIED] as Candle['flags'];
    candles.push(converted);
  });
  const out: History = {
    ...history,
    currency: to,
    candles,
    events: { dividends: convertDividends(table, history.events.dividends, history.timezone, from, to), splits: history.events.splits },
  };
  withMissing(out, missing);
  out.fx = summary;
  return out;
}

/**
 * Adds `spans` to `history.missing` (in order, at most the contract's 100), and `partial` when any; the
 * spans already listed keep their reason (those added have none), and only spans of one reason merge.
 */
export function withMissing(history: History, spans: readonly TimeSpan[]): void {
  if (spans.length === 0) return;
  type Listed = TimeSpan & { reason?: MissingReason | undefined };
  const listed: Listed[] = (history.missing ?? []).map((m) => ({ startMs: Date.parse(m.start), endMs: Date.parse(m.end), reason: m.reason }));
  const all: Listed[] = [...listed, ...spans.map((s) => ({ startMs: s.startMs, endMs: s.endMs }))].sort((a, b) => a.startMs - b.startMs);
  const merged: Listed[] = [];
  for (const span of all) {
    const last = merged[merged.length - 1];
    if (last !== undefined && span.startMs <= last.endMs && span.reason === last.reason) last.endMs = Math.max(last.endMs, span.endMs);
    else merged.push({ ...span });
  }
  // Past the bound, the last span reaches to the end of the rest.
  if (merged.length > MAX_MISSING) {
    const tail = merged.splice(MAX_MISSING - 1);
    merged.push({ startMs: tail[0]!.startMs, endMs: Math.max(...tail.map((s) => s.endMs)) });
  }
  history.partial = true;
  history.missing = merged.map((m) => ({ start: new Date(m.startMs).toISOString(), end: new Date(m.endMs).toISOString(), ...(m.reason !== undefined ? { reason: m.reason } : {}) }));
}
