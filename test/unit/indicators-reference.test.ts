/**
 * Every study against an independent computation: pandas (clients/python/tests/indicator_reference.py,
 * written from the conventions in docs/indicators.md with pandas' rolling windows and ewm) over the
 * recorded AAPL and BTC-USD histories, to 1e-9 relative; and the warm-up rule: a window computed from
 * its warm-up bars alone equals the window computed over the whole history.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { computeStudy, parseStudies, SEED_WEIGHT, STUDIES, unstableBars, warmupOf, type Study } from '../../src/domain/indicators/catalogue.js';
import { sessionKeys } from '../../src/domain/indicators/sessions.js';
import type { Bars, Series } from '../../src/domain/indicators/studies.js';

const ROOT = resolve(import.meta.dirname, '../..');
const REFERENCE = resolve(ROOT, 'clients/python/tests/indicator_reference.py');

/** The first Python 3 with pandas (Debian's python3-pandas; a pyenv shim may come first on the PATH). */
const PYTHON = ['python3', '/usr/bin/python3'].find((bin) => spawnSync(bin, ['-c', 'import pandas'], { encoding: 'utf8' }).status === 0);

interface Recorded {
  times: number[];
  bars: Bars;
}

function columns(rows: Array<{ t: number; h: number; l: number; c: number; v: number }>): Recorded {
  return { times: rows.map((r) => r.t), bars: { high: rows.map((r) => r.h), low: rows.map((r) => r.l), close: rows.map((r) => r.c), volume: rows.map((r) => r.v) } };
}

/** A Yahoo chart recording's bars, those without a trade left out (as the history store keeps them). */
function yahoo(file: string): Recorded {
  const body = JSON.parse(readFileSync(resolve(ROOT, 'test/fixtures/yahoo/recorded', file), 'utf8')).response.body.chart.result[0];
  const q = body.indicators.quote[0];
  const rows = (body.timestamp as number[]).map((t, i) => ({ t: t * 1000, h: q.high[i], l: q.low[i], c: q.close[i], v: q.volume[i] ?? 0 })).filter((r) => r.c !== null && r.h !== null && r.l !== null);
  return columns(rows);
}

function tiingo(file: string): Recorded {
  const raw = JSON.parse(readFileSync(resolve(ROOT, 'test/fixtures/providers', file), 'utf8'));
  const prices = (Array.isArray(raw) && raw[0]?.priceData ? raw[0].priceData : raw) as Array<{ date: string; high: number; low: number; close: number; volume: number }>;
  return columns(prices.map((p) => ({ t: Date.parse(p.date), h: p.high, l: p.low, c: p.close, v: p.volume })));
}

/** Alpha Vantage's 15-minute AAPL bars of January 2023 (New York time, UTC-5 that month), oldest first. */
function alphaVantageIntraday(): Recorded {
  const lines = readFileSync(resolve(ROOT, 'test/fixtures/providers/alpha_vantage-intraday-AAPL-15min-2023-01.csv'), 'utf8').trim().split('\n').slice(1);
  const rows = lines.map((line) => {
    const [time, , high, low, close, volume] = line.split(',');
    return { t: Date.parse(`${time!.replace(' ', 'T')}-05:00`), h: Number(high), l: Number(low), c: Number(close), v: Number(volume) };
  });
  return columns(rows.sort((a, b) => a.t - b.t));
}

type Reference = Record<string, Series | Record<string, Series>>;

interface Case {
  recorded: Recorded;
  studies: Study[];
  session?: ReadonlyArray<number | null>;
}

/** Every case's studies computed by pandas, in one Python process (starting pandas takes a second or two). */
function pandas(cases: readonly Case[]): Reference[] {
  const input = JSON.stringify(cases.map((c) => ({ ...c.recorded.bars, session: c.session ?? null, studies: c.studies.map((s) => s.key) })));
  const r = spawnSync(PYTHON!, [REFERENCE], { input, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Reference[];
}

/** Relative to the larger magnitude, absolute below 1 (a MACD histogram crosses 0). */
function close(a: number | null, b: number | null): boolean {
  if (a === null || b === null) return a === b;
  return Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b), 1);
}

function expectSeries(label: string, ours: Series, theirs: Series): void {
  expect(ours.length, label).toBe(theirs.length);
  const bad = ours.map((v, i) => ({ i, ours: v, pandas: theirs[i] ?? null })).filter((x) => !close(x.ours, x.pandas));
  expect(bad.slice(0, 3), `${label}: ${bad.length} values differ`).toEqual([]);
}

const cases = new Map<string, Case>();
let references: Map<string, Reference> | undefined;

function setUp(name: string, recorded: Recorded, list: string, session?: ReadonlyArray<number | null>): void {
  cases.set(name, { recorded, studies: parseStudies(list, session !== undefined), ...(session !== undefined ? { session } : {}) });
}

/** Compares case `name` with pandas; resolves to how many non-null values were compared. */
function compare(name: string): number {
  if (references === undefined) {
    const all = pandas([...cases.values()]);
    references = new Map([...cases.keys()].map((key, i) => [key, all[i]!]));
  }
  const { recorded, studies, session } = cases.get(name)!;
  const reference = references.get(name)!;
  let values = 0;
  for (const study of studies) {
    const ours = computeStudy(study, { bars: recorded.bars, sessions: session ?? [] }, 0);
    const theirs = reference[study.key]!;
    if (Array.isArray(ours)) {
      expectSeries(study.key, ours, theirs as Series);
      values += ours.filter((v) => v !== null).length;
    } else {
      for (const [output, series] of Object.entries(ours)) {
        expectSeries(`${study.key} ${output}`, series, (theirs as Record<string, Series>)[output]!);
        values += series.filter((v) => v !== null).length;
      }
    }
  }
  return values;
}

const DEFAULTS = 'sma,ema,wma,rsi,macd,bbands,stoch,atr,adx,obv';
const MORE = 'roc,willr,cci,sma:5,ema:9,rsi:2,bbands:10:1.5,stoch:5:1:3,atr:3,adx:5';
const TINY = 'sma:1,sma:2,ema:1,ema:2,wma:2,rsi:1,macd:1:2:1,bbands:2:2,stoch:1:1:1,atr:1';
const TINY2 = 'adx:1,obv,roc:1,willr:2,cci:2,wma:1';

const RECORDINGS: Array<[string, () => Recorded]> = [
  ['Yahoo AAPL 1d, 2020-08-31 to 2020-11-07', () => yahoo('yahoo-chart-AAPL-1d-2020-08-31-to-2020-11-07.json')],
  ['Tiingo AAPL 1d, 2023-01 to 2023-06', () => tiingo('tiingo-daily-AAPL-2023-01-01-2023-06-06.json')],
  ['Tiingo BTC-USD 1d, 2023-01 to 2023-06', () => tiingo('tiingo-crypto-BTCUSD-1day-2023-01-01-2023-06-06.json')],
];

describe.skipIf(PYTHON === undefined)('studies against pandas (clients/python/tests/indicator_reference.py)', () => {
  beforeAll(() => {
    for (const [name, load] of RECORDINGS) {
      setUp(`${name} defaults`, load(), DEFAULTS);
      setUp(`${name} more`, load(), MORE);
    }
    const btc = yahoo('yahoo-chart-BTC-USD-1d.json');
    setUp('btc tiny', btc, TINY);
    setUp('btc tiny2', btc, TINY2);
    setUp('btc long', btc, 'sma,rsi,macd');
    const intraday = alphaVantageIntraday();
    setUp('vwap', intraday, 'vwap,sma,rsi,macd', sessionKeys('US', intraday.times));
  });

  it.each(RECORDINGS)('when every study runs over the recorded %s, then each value equals pandas to 1e-9', (name, load) => {
    expect(load().times.length).toBeGreaterThan(40);
    expect(compare(`${name} defaults`)).toBeGreaterThan(200);
    expect(compare(`${name} more`)).toBeGreaterThan(200);
  });

  it('when the studies run over the recorded Yahoo BTC-USD days (three bars), then the short studies equal pandas and the rest stay null', () => {
    expect(cases.get('btc tiny')!.recorded.times).toHaveLength(3);
    expect(compare('btc tiny')).toBeGreaterThan(5);
    expect(compare('btc tiny2')).toBeGreaterThan(5);
    expect(compare('btc long')).toBe(0);
  });

  it('when VWAP runs over recorded 15-minute AAPL bars, then it restarts at each New York open and equals pandas grouped by session', () => {
    const { recorded, session } = cases.get('vwap')!;
    // Twenty sessions of regular hours, every bar inside one.
    expect(session!.every((s) => s !== null)).toBe(true);
    expect(new Set(session).size).toBe(20);
    expect(compare('vwap')).toBeGreaterThan(500);
    // Bars outside every session (pre- and post-market) have no VWAP.
    const extended = computeStudy(parseStudies('vwap', true)[0]!, { bars: recorded.bars, sessions: [null, ...session!.slice(1)] }, 0) as Series;
    expect(extended[0]).toBeNull();
    expect(extended[1]).not.toBeNull();
  });
});

/** A deterministic random walk of `length` bars (no I/O, no clock). */
function walk(length: number, seed = 7): Bars {
  let x = seed;
  const random = () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x / 2147483648;
  };
  const high: number[] = [];
  const low: number[] = [];
  const closes: number[] = [];
  const volume: number[] = [];
  let price = 100;
  for (let i = 0; i < length; i++) {
    price = Math.max(1, price * (1 + (random() - 0.5) * 0.04));
    const spread = price * random() * 0.02;
    closes.push(price);
    high.push(price + spread);
    low.push(price - spread * random());
    volume.push(Math.round(random() * 1e6));
  }
  return { high, low, close: closes, volume };
}

function slice(bars: Bars, from: number): Bars {
  return { high: bars.high.slice(from), low: bars.low.slice(from), close: bars.close.slice(from), volume: bars.volume.slice(from) };
}

/** The largest relative difference between two aligned outputs of a study (null only where both are). */
function worst(a: Series | Record<string, Series>, b: Series | Record<string, Series>): number {
  const pairs: Array<[Series, Series]> = Array.isArray(a) ? [[a, b as Series]] : Object.keys(a).map((k) => [a[k]!, (b as Record<string, Series>)[k]!]);
  let most = 0;
  for (const [x, y] of pairs) {
    x.forEach((v, i) => {
      const w = y[i] ?? null;
      if (v === null || w === null) {
        if (v !== w) most = Infinity;
        return;
      }
      most = Math.max(most, Math.abs(v - w) / Math.max(Math.abs(v), Math.abs(w), 1));
    });
  }
  return most;
}

/** The window [start, end) computed over the whole history, and from its warm-up (`warmup` bars before start) alone. */
function bothWays(study: Study, bars: Bars, start: number, warmup: number) {
  const whole = computeStudy(study, { bars, sessions: [] }, 0);
  const window = (s: Series) => s.slice(start);
  const fromWhole = Array.isArray(whole) ? window(whole) : Object.fromEntries(Object.entries(whole).map(([k, s]) => [k, window(s)]));
  const fromWarmup = computeStudy(study, { bars: slice(bars, start - warmup), sessions: [] }, warmup);
  return { fromWhole, fromWarmup };
}

describe('the warm-up rule', () => {
  it('when a recursion decays by d per bar, then its warm-up is the bars until d^k < 1e-12 (TA-Lib calls them its unstable period)', () => {
    expect(SEED_WEIGHT).toBe(1e-12);
    // Wilder's RSI(14) decays by 13/14 a bar: 373 bars take the seed's weight below 1e-12.
    expect(unstableBars(13 / 14)).toBe(373);
    expect((13 / 14) ** 373).toBeLessThan(1e-12);
    expect((13 / 14) ** 372).toBeGreaterThan(1e-12);
    expect(unstableBars(0)).toBe(0);
    expect(warmupOf(parseStudies('rsi', false))).toBe(14 + 373);
    expect(warmupOf(parseStudies('sma:20', false))).toBe(19);
    expect(warmupOf(parseStudies('sma:20,ema:50,adx:30', false))).toBe(2 * 30 - 1 + 2 * unstableBars(29 / 30));
  });

  it('when every study (defaults and the longest periods) is computed from its warm-up alone, then the window equals the one over the whole history to 1e-9', () => {
    const bars = walk(40_000);
    const list = `${DEFAULTS.replace(',obv', '')},roc,willr,cci,ema:500,rsi:500,atr:500,adx:500,macd:12:500:9,sma:500,bbands:500:3,stoch:500:500:500`;
    for (const entry of list.split(',')) {
      const [study] = parseStudies(entry, false);
      const warmup = warmupOf([study!]);
      const start = bars.close.length - 500;
      expect(warmup, entry).toBeLessThan(start);
      const { fromWhole, fromWarmup } = bothWays(study!, bars, start, warmup);
      expect(worst(fromWhole, fromWarmup), entry).toBeLessThan(1e-9);
    }
  });

  it("when OBV is computed from the window's first bar, then it starts at that bar's volume and moves as over the whole history", () => {
    const bars = walk(2000);
    const [study] = parseStudies('obv', false);
    const { fromWhole, fromWarmup } = bothWays(study!, bars, 1500, warmupOf([study!]));
    const whole = fromWhole as Series;
    const anchored = fromWarmup as Series;
    expect(anchored[0]).toBe(bars.volume[1500]);
    for (let i = 1; i < anchored.length; i++) expect(anchored[i]! - anchored[i - 1]!).toBeCloseTo(whole[i]! - whole[i - 1]!, 6);
  });

  it('when a recursive study is given a quarter of its warm-up, then its window differs from the whole history by more than 1e-9 (the rule is what makes it exact)', () => {
    const bars = walk(40_000);
    for (const entry of ['ema:100', 'rsi:100', 'atr:100', 'adx:100']) {
      const [study] = parseStudies(entry, false);
      const warmup = Math.floor(warmupOf([study!]) / 4);
      const { fromWhole, fromWarmup } = bothWays(study!, bars, bars.close.length - 500, warmup);
      expect(worst(fromWhole, fromWarmup), entry).toBeGreaterThan(1e-9);
    }
  });

  it('when every study is listed, then each one has a documented warm-up that is a whole number of bars', () => {
    for (const [name, d] of STUDIES) {
      const w = d.warmup(d.params.map((p) => p.default));
      expect(Number.isInteger(w) && w >= 0, name).toBe(true);
    }
  });
});
