/**
 * The live bar builder (DESIGN 26) against reference bars built in the test from the same ticks: ticks
 * made from the recorded Yahoo streamer frame (times moved), Polygon trades with sequences and sizes,
 * minute aggregates, sessions, late ticks, a new trading day, and a state handed to another leader.
 */
import { describe, expect, it } from 'vitest';
import { applyTick, closeBars, emptySymbolBars, type BarBuilderOptions, type BarChange, type BarTick, type SymbolBars } from '../../src/domain/bar-builder.js';
import { barSessions } from '../../src/domain/bar-sessions.js';
import type { LiveBar } from '../../src/domain/live-bar.js';
import { btcReplay, referenceBars, throughTheWire, type ReplayTick } from '../helpers/bar-replay.js';

const MINUTE = 60_000;
const GRACE = 2000;
const options: BarBuilderOptions = { upstream: 'yahoo', sessionOf: barSessions(), graceMs: GRACE, revisionWindowMs: 5 * MINUTE };
/** A Wednesday, 15:00 UTC: US regular session, crypto every minute. */
const T0 = Date.UTC(2026, 10, 25, 15, 0);

function wireOf(bar: LiveBar) {
  return { time: new Date(bar.timeMs).toISOString(), open: bar.open, high: bar.high, low: bar.low, close: bar.close, volume: bar.volume };
}

/** Feeds ticks in order, each "arriving" 50 ms after its market time, closing bars as time passes. */
function run(ticks: readonly (BarTick | ReplayTick)[], state: SymbolBars = emptySymbolBars(), until?: number): { changes: BarChange[]; state: SymbolBars } {
  const changes: BarChange[] = [];
  for (const tick of ticks) {
    const now = tick.timeMs + 50;
    closeBars(options, tick.symbol, state, now, changes);
    applyTick(options, state, tick, now, changes);
  }
  if (until !== undefined) closeBars(options, ticks[0]!.symbol, state, until, changes);
  return { changes, state };
}

const finals = (changes: BarChange[]) => changes.filter((c) => c.kind === 'final').map((c) => c.bar);

describe('live bar builder', () => {
  it('when recorded streamer frames (times moved) are replayed, then every final bar equals the reference built from the same ticks', () => {
    const ticks = btcReplay([T0, T0 + MINUTE, T0 + 2 * MINUTE], 25).map(throughTheWire);
    const { changes } = run(ticks, undefined, T0 + 3 * MINUTE + GRACE);
    const got = finals(changes);
    expect(got.map(wireOf)).toEqual(referenceBars(ticks));
    expect(got.every((b) => b.final && !b.revised && b.session === 'regular' && b.symbol === 'BTC-USD' && b.upstream === 'yahoo')).toBe(true);
    // Every other change was an open bar, never final.
    expect(changes.filter((c) => c.kind === 'update').every((c) => !c.bar.final)).toBe(true);
  });

  it('when a minute has no tick, then it has no bar: nothing is invented', () => {
    const ticks = btcReplay([T0, T0 + 3 * MINUTE], 5);
    const { changes } = run(ticks, undefined, T0 + 4 * MINUTE + GRACE);
    expect(finals(changes).map((b) => b.timeMs)).toEqual([T0, T0 + 3 * MINUTE]);
  });

  it('when a bar is not final before its minute end plus the grace, then it is final at that moment exactly', () => {
    const ticks = btcReplay([T0], 3);
    const { state } = run(ticks);
    const early: BarChange[] = [];
    closeBars(options, 'BTC-USD', state, T0 + MINUTE + GRACE - 1, early);
    expect(early).toEqual([]);
    closeBars(options, 'BTC-USD', state, T0 + MINUTE + GRACE, early);
    expect(finals(early).map(wireOf)).toEqual(referenceBars(ticks));
  });

  it('when a late tick arrives after the bar is final, then the bar is sent again revised; past the window the tick is dropped', () => {
    const ticks = btcReplay([T0], 4);
    const { state } = run(ticks, undefined, T0 + MINUTE + GRACE);
    const last = ticks[ticks.length - 1]!;
    const late: ReplayTick = { symbol: 'BTC-USD', price: 99_000, timeMs: T0 + 59_000, dayVolume: last.dayVolume + 500 };
    const changes: BarChange[] = [];
    applyTick(options, state, late, T0 + MINUTE + 10_000, changes);
    expect(changes).toHaveLength(1);
    const revised = changes[0]!.bar;
    expect(revised).toMatchObject({ final: true, revised: true, high: 99_000, close: 99_000 });
    expect(wireOf(revised)).toEqual(referenceBars([...ticks, late])[0]);
    const tooLate: BarChange[] = [];
    const outcome = applyTick(options, state, { ...late, price: 1, dayVolume: late.dayVolume + 1 }, T0 + MINUTE + GRACE + 5 * MINUTE, tooLate);
    expect(outcome).toBe('too-late');
    expect(tooLate).toEqual([]);
  });

  it('when the day volume falls, then a new day starts from the new value and no negative volume is counted', () => {
    const before = btcReplay([T0], 3);
    const after = btcReplay([T0 + MINUTE], 3, { dayVolume: 10 }).map((t) => t);
    const { changes } = run([...before, ...after], undefined, T0 + 2 * MINUTE + GRACE);
    const [first, second] = finals(changes);
    expect(first!.volume).toBe(before[2]!.dayVolume - before[0]!.dayVolume);
    // The tick that showed the fall is the new base; the rises after it are the minute's volume.
    expect(second!.volume).toBe(after[2]!.dayVolume - after[0]!.dayVolume);
  });

  it('when Polygon trades are replayed twice (a new leader hears them again), then each is counted once and the volume is the sum of sizes', () => {
    const trades: BarTick[] = [
      { symbol: 'AAPL', price: 227.41, size: 100, sequence: 11, timeMs: T0 + 1000 },
      { symbol: 'AAPL', price: 227.62, size: 50, sequence: 12, timeMs: T0 + 2000 },
      { symbol: 'AAPL', price: 227.3, size: 25, sequence: 13, timeMs: T0 + 30_000 },
      { symbol: 'AAPL', price: 227.55, size: 10, sequence: 14, timeMs: T0 + 50_000 },
    ];
    const { changes } = run([...trades.slice(0, 3), ...trades], undefined, T0 + MINUTE + GRACE);
    expect(finals(changes).map(wireOf)).toEqual([{ time: new Date(T0).toISOString(), open: 227.41, high: 227.62, low: 227.3, close: 227.55, volume: 185 }]);
  });

  it('when the state is handed to another leader mid-minute (as JSON), then it finishes the bar with no tick counted twice', () => {
    const ticks = btcReplay([T0, T0 + MINUTE], 20).map(throughTheWire);
    const cut = 27;
    const first = run(ticks.slice(0, cut));
    const handed = JSON.parse(JSON.stringify(first.state)) as SymbolBars;
    // The new leader's socket sends the last few frames again before new ones.
    const second = run(ticks.slice(cut - 4), handed, T0 + 2 * MINUTE + GRACE);
    const all = [...finals(first.changes), ...finals(second.changes)];
    expect(all.map(wireOf)).toEqual(referenceBars(ticks));
  });

  it('when a minute aggregate arrives, then it is taken as given for its minute, and trades of that minute change it no more', () => {
    const trades: BarTick[] = [
      { symbol: 'AAPL', price: 227.41, size: 100, sequence: 1, timeMs: T0 + 1000 },
      { symbol: 'AAPL', price: 227.62, size: 50, sequence: 2, timeMs: T0 + 2000 },
    ];
    const { state } = run(trades);
    const changes: BarChange[] = [];
    applyTick(options, state, { symbol: 'AAPL', price: 227.5, timeMs: T0 + MINUTE - 1, aggregate: { startMs: T0, open: 227.4, high: 227.7, low: 227.2, close: 227.5, volume: 900 } }, T0 + MINUTE + 500, changes);
    applyTick(options, state, { symbol: 'AAPL', price: 300, size: 5, sequence: 3, timeMs: T0 + 59_000 }, T0 + MINUTE + 600, changes);
    closeBars(options, 'AAPL', state, T0 + MINUTE + GRACE, changes);
    expect(finals(changes).map(wireOf)).toEqual([{ time: new Date(T0).toISOString(), open: 227.4, high: 227.7, low: 227.2, close: 227.5, volume: 900 }]);
  });

  it('when a US stock trades outside every session, then no bar is built; pre-market minutes are flagged pre', () => {
    const saturday = Date.UTC(2026, 10, 28, 15, 0);
    const closed = run([{ symbol: 'AAPL', price: 1, size: 1, sequence: 1, timeMs: saturday + 1000 }], undefined, saturday + MINUTE + GRACE);
    expect(closed.changes).toEqual([]);
    const preMarket = Date.UTC(2026, 10, 25, 12, 0); // 07:00 in New York
    const pre = run([{ symbol: 'AAPL', price: 2, size: 1, sequence: 1, timeMs: preMarket + 1000 }], undefined, preMarket + MINUTE + GRACE);
    expect(finals(pre.changes).map((b) => b.session)).toEqual(['pre']);
  });

  it('when an index tick carries no volume, then the bar volume is null', () => {
    const { changes } = run([{ symbol: '^GSPC', price: 5767.5, timeMs: T0 + 5000 }], undefined, T0 + MINUTE + GRACE);
    expect(finals(changes).map((b) => b.volume)).toEqual([null]);
  });
});
