/**
 * The studies themselves: pure functions from bars to series, one value per bar (`null` while the
 * study warms up), following TA-Lib's conventions (docs/indicators.md says each one):
 * - an EMA is seeded with the simple average of its first N values, then `ema += (x - ema) * 2/(N+1)`;
 * - Wilder's smoothing (RSI, ATR, ADX) is `avg = (avg * (N-1) + x) / N`, seeded with a simple average
 *   (ADX's directional movement with TA-Lib's running sums, whose ratio is the same);
 * - deviations (Bollinger) are population deviations; a ratio whose denominator is zero is 0, as TA-Lib gives.
 */

/** One value per bar; `null` where the study has no value yet. */
export type Series = Array<number | null>;

/** Bars in columns, oldest first: what every study reads. */
export interface Bars {
  high: readonly number[];
  low: readonly number[];
  close: readonly number[];
  /** Traded volume; 0 where unknown. */
  volume: readonly number[];
}

function empty(length: number): Series {
  return new Array<number | null>(length).fill(null);
}

/** The index of the first non-null value of `x` (x.length when none). */
function firstValue(x: Series | readonly number[]): number {
  let i = 0;
  while (i < x.length && x[i] === null) i++;
  return i;
}

/** Simple moving average of the last `n` values, from the first non-null value of `x` on. */
export function sma(x: Series | readonly number[], n: number): Series {
  const out = empty(x.length);
  const from = firstValue(x);
  // A compensated running sum (Neumaier): the error does not grow with the length of the history.
  let sum = 0;
  let carry = 0;
  const add = (v: number) => {
    const t = sum + v;
    carry += Math.abs(sum) >= Math.abs(v) ? sum - t + v : v - t + sum;
    sum = t;
  };
  for (let i = from; i < x.length; i++) {
    add(x[i] as number);
    if (i - from >= n) add(-(x[i - n] as number));
    if (i - from >= n - 1) out[i] = (sum + carry) / n;
  }
  return out;
}

/** An EMA-like recursion over `x` from its first non-null value: seeded with the SMA of the first `n`, then `step`. */
function seeded(x: Series | readonly number[], n: number, step: (prev: number, v: number) => number): Series {
  const out = empty(x.length);
  const from = firstValue(x);
  if (x.length - from < n) return out;
  let seed = 0;
  for (let i = from; i < from + n; i++) seed += x[i] as number;
  let prev = seed / n;
  out[from + n - 1] = prev;
  for (let i = from + n; i < x.length; i++) {
    prev = step(prev, x[i] as number);
    out[i] = prev;
  }
  return out;
}

/** Exponential moving average, k = 2/(n+1), seeded with the SMA of its first `n` values (TA-Lib's default). */
export function ema(x: Series | readonly number[], n: number): Series {
  const k = 2 / (n + 1);
  return seeded(x, n, (prev, v) => (v - prev) * k + prev);
}

/** Wilder's smoothing: `(prev * (n-1) + v) / n`, seeded with the SMA of the first `n` values. */
export function wilder(x: Series | readonly number[], n: number): Series {
  return seeded(x, n, (prev, v) => (prev * (n - 1) + v) / n);
}

/** Weighted moving average, weights 1..n (the newest weighs n). */
export function wma(x: readonly number[], n: number): Series {
  const out = empty(x.length);
  const divisor = (n * (n + 1)) / 2;
  for (let i = n - 1; i < x.length; i++) {
    let sum = 0;
    for (let j = 0; j < n; j++) sum += x[i - n + 1 + j]! * (j + 1);
    out[i] = sum / divisor;
  }
  return out;
}

/** Relative strength index with Wilder's smoothing of gains and losses; first value at bar n. */
export function rsi(close: readonly number[], n: number): Series {
  const gains: Series = [null];
  const losses: Series = [null];
  for (let i = 1; i < close.length; i++) {
    const change = close[i]! - close[i - 1]!;
    gains.push(change > 0 ? change : 0);
    losses.push(change < 0 ? -change : 0);
  }
  const g = wilder(gains, n);
  const l = wilder(losses, n);
  return g.map((gain, i) => {
    if (gain === null) return null;
    const total = gain + l[i]!;
    return total === 0 ? 0 : (100 * gain) / total;
  });
}

/** MACD: EMA(fast) - EMA(slow) from bar slow-1; signal = EMA(signal) of that line; histogram = line - signal. */
export function macd(close: readonly number[], fast: number, slow: number, signal: number): { macd: Series; signal: Series; histogram: Series } {
  const f = ema(close, fast);
  const s = ema(close, slow);
  const line: Series = s.map((v, i) => (v === null || f[i] === null ? null : f[i]! - v));
  const sig = ema(line, signal);
  return { macd: line, signal: sig, histogram: line.map((v, i) => (v === null || sig[i] === null ? null : v - sig[i]!)) };
}

/** Bollinger bands: SMA(n) ± k population standard deviations of the same n values. */
export function bbands(close: readonly number[], n: number, k: number): { upper: Series; middle: Series; lower: Series } {
  const middle = sma(close, n);
  const upper = empty(close.length);
  const lower = empty(close.length);
  for (let i = n - 1; i < close.length; i++) {
    // The mean of this window, summed afresh, so the deviation does not carry the running sum's error.
    let mean = 0;
    for (let j = i - n + 1; j <= i; j++) mean += close[j]!;
    mean /= n;
    let squares = 0;
    for (let j = i - n + 1; j <= i; j++) squares += (close[j]! - mean) ** 2;
    const sd = Math.sqrt(squares / n);
    upper[i] = middle[i]! + k * sd;
    lower[i] = middle[i]! - k * sd;
  }
  return { upper, middle, lower };
}

function highest(x: readonly number[], i: number, n: number): number {
  let h = -Infinity;
  for (let j = i - n + 1; j <= i; j++) if (x[j]! > h) h = x[j]!;
  return h;
}

function lowest(x: readonly number[], i: number, n: number): number {
  let l = Infinity;
  for (let j = i - n + 1; j <= i; j++) if (x[j]! < l) l = x[j]!;
  return l;
}

/** Stochastic oscillator (TA-Lib's STOCH with SMAs): fast %K over `kPeriod`, %K = SMA(kSmooth) of it, %D = SMA(dPeriod) of %K. */
export function stoch(bars: Bars, kPeriod: number, kSmooth: number, dPeriod: number): { k: Series; d: Series } {
  const fast = empty(bars.close.length);
  for (let i = kPeriod - 1; i < bars.close.length; i++) {
    const hh = highest(bars.high, i, kPeriod);
    const ll = lowest(bars.low, i, kPeriod);
    fast[i] = hh === ll ? 0 : (100 * (bars.close[i]! - ll)) / (hh - ll);
  }
  const k = sma(fast, kSmooth);
  return { k, d: sma(k, dPeriod) };
}

/** True range from bar 1 (bar 0 has no previous close). */
function trueRange(bars: Bars): Series {
  const tr: Series = [null];
  for (let i = 1; i < bars.close.length; i++) {
    const h = bars.high[i]!;
    const l = bars.low[i]!;
    const pc = bars.close[i - 1]!;
    tr.push(Math.max(h - l, Math.abs(h - pc), Math.abs(l - pc)));
  }
  return tr;
}

/** Average true range, Wilder-smoothed; first value at bar n (the mean of the first n true ranges). */
export function atr(bars: Bars, n: number): Series {
  return wilder(trueRange(bars), n);
}

/**
 * Average directional index (TA-Lib's ADX, PLUS_DI, MINUS_DI): directional movement and true range
 * kept as Wilder running sums (the first of n-1 values), DI = 100 * DM / TR from bar n,
 * DX = 100 * |DI+ - DI-| / (DI+ + DI-), ADX = the mean of the first n DX at bar 2n-1, then Wilder-smoothed.
 */
export function adx(bars: Bars, n: number): { adx: Series; plus_di: Series; minus_di: Series } {
  const length = bars.close.length;
  const plusDi = empty(length);
  const minusDi = empty(length);
  const out = empty(length);
  const tr = trueRange(bars);
  let sumPlus = 0;
  let sumMinus = 0;
  let sumTr = 0;
  let dxSum = 0;
  let adxPrev = 0;
  for (let i = 1; i < length; i++) {
    const up = bars.high[i]! - bars.high[i - 1]!;
    const down = bars.low[i - 1]! - bars.low[i]!;
    const plus = up > down && up > 0 ? up : 0;
    const minus = down > up && down > 0 ? down : 0;
    if (i < n) {
      sumPlus += plus;
      sumMinus += minus;
      sumTr += tr[i]!;
      continue;
    }
    sumPlus = sumPlus - sumPlus / n + plus;
    sumMinus = sumMinus - sumMinus / n + minus;
    sumTr = sumTr - sumTr / n + tr[i]!;
    const p = sumTr === 0 ? 0 : (100 * sumPlus) / sumTr;
    const m = sumTr === 0 ? 0 : (100 * sumMinus) / sumTr;
    plusDi[i] = p;
    minusDi[i] = m;
    const dx = p + m === 0 ? 0 : (100 * Math.abs(p - m)) / (p + m);
    if (i < 2 * n - 1) {
      dxSum += dx;
    } else if (i === 2 * n - 1) {
      adxPrev = (dxSum + dx) / n;
      out[i] = adxPrev;
    } else {
      adxPrev = (adxPrev * (n - 1) + dx) / n;
      out[i] = adxPrev;
    }
  }
  return { adx: out, plus_di: plusDi, minus_di: minusDi };
}

/** On-balance volume from the first bar given (its volume), adding or taking each bar's volume by the close's direction. */
export function obv(bars: Bars): Series {
  const out = empty(bars.close.length);
  let total = 0;
  for (let i = 0; i < bars.close.length; i++) {
    if (i === 0) total = bars.volume[0]!;
    else if (bars.close[i]! > bars.close[i - 1]!) total += bars.volume[i]!;
    else if (bars.close[i]! < bars.close[i - 1]!) total -= bars.volume[i]!;
    out[i] = total;
  }
  return out;
}

/**
 * Volume-weighted average price of the typical price (h+l+c)/3, restarted at each session: bars with
 * the same `session` key (its open, epoch ms) accumulate together; a bar whose key is `null` (outside
 * every regular session) has no value, nor has a session whose volume so far is 0.
 */
export function vwap(bars: Bars, session: ReadonlyArray<number | null>): Series {
  const out = empty(bars.close.length);
  let current: number | null = null;
  let pv = 0;
  let v = 0;
  for (let i = 0; i < bars.close.length; i++) {
    const key = session[i] ?? null;
    if (key === null) continue;
    if (key !== current) {
      current = key;
      pv = 0;
      v = 0;
    }
    const typical = (bars.high[i]! + bars.low[i]! + bars.close[i]!) / 3;
    pv += typical * bars.volume[i]!;
    v += bars.volume[i]!;
    out[i] = v === 0 ? null : pv / v;
  }
  return out;
}

/** Rate of change in percent over n bars: 100 * (c - c[n ago]) / c[n ago] (0 when that close is 0). */
export function roc(close: readonly number[], n: number): Series {
  const out = empty(close.length);
  for (let i = n; i < close.length; i++) {
    const before = close[i - n]!;
    out[i] = before === 0 ? 0 : (100 * (close[i]! - before)) / before;
  }
  return out;
}

/** Williams %R over n bars: -100 * (HH - c) / (HH - LL), 0 when the range is flat. */
export function willr(bars: Bars, n: number): Series {
  const out = empty(bars.close.length);
  for (let i = n - 1; i < bars.close.length; i++) {
    const hh = highest(bars.high, i, n);
    const ll = lowest(bars.low, i, n);
    out[i] = hh === ll ? 0 : (-100 * (hh - bars.close[i]!)) / (hh - ll);
  }
  return out;
}

/** Commodity channel index over n bars: (TP - SMA(TP)) / (0.015 * mean deviation), 0 when the deviation is 0. */
export function cci(bars: Bars, n: number): Series {
  const length = bars.close.length;
  const tp = new Array<number>(length);
  for (let i = 0; i < length; i++) tp[i] = (bars.high[i]! + bars.low[i]! + bars.close[i]!) / 3;
  const out = empty(length);
  for (let i = n - 1; i < length; i++) {
    let mean = 0;
    for (let j = i - n + 1; j <= i; j++) mean += tp[j]!;
    mean /= n;
    let deviation = 0;
    for (let j = i - n + 1; j <= i; j++) deviation += Math.abs(tp[j]! - mean);
    deviation /= n;
    out[i] = deviation === 0 ? 0 : (tp[i]! - mean) / (0.015 * deviation);
  }
  return out;
}
