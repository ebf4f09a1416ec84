/**
 * Which studies exist, their parameters and defaults, their outputs, how many bars before the window
 * each needs (its warm-up), and the one parser of a `studies` list (`sma:20,rsi,macd:12:26:9`) into
 * normalised studies. docs/indicators.md explains the conventions and the warm-up rule.
 */
import { InvalidRequestError, type Violation } from '../errors.js';
import { adx, atr, bbands, cci, ema, macd, obv, roc, rsi, sma, stoch, vwap, willr, wma, type Bars, type Series } from './studies.js';

/** The most studies one request may ask for. */
export const MAX_STUDIES = 10;
/** The range of every period parameter. */
export const MIN_PERIOD = 1;
export const MAX_PERIOD = 500;
/** The range of Bollinger's width, in standard deviations. */
export const MIN_DEVIATIONS = 0.1;
export const MAX_DEVIATIONS = 10;

/**
 * The recursive studies (EMA, Wilder's smoothing) remember their seed for ever, shrinking its weight by
 * `decay` each bar. Their warm-up reaches back until that weight is below this: then the first value of
 * the window differs from the one computed over the whole history by less than 1e-12 of the seed's
 * distance from it (the tests ask for 1e-9 relative).
 */
export const SEED_WEIGHT = 1e-12;

/** How many bars a recursion of per-bar `decay` needs until its seed weighs less than SEED_WEIGHT (TA-Lib's "unstable period"). */
export function unstableBars(decay: number): number {
  if (decay <= 0) return 0;
  return Math.ceil(Math.log(SEED_WEIGHT) / Math.log(decay));
}

const emaDecay = (n: number) => (n - 1) / (n + 1);
const wilderDecay = (n: number) => (n - 1) / n;

interface Param {
  name: string;
  default: number;
  /** `period`: an integer 1..500; `deviations`: a number 0.1..10. */
  kind: 'period' | 'deviations';
}

/** What a study computes from: the bars, and for VWAP each bar's session (its open, or null outside every session). */
export interface StudyInput {
  bars: Bars;
  sessions: ReadonlyArray<number | null>;
}

export interface StudyDefinition {
  name: string;
  /** One line for the docs and the contract. */
  title: string;
  params: readonly Param[];
  /** Output names of a study with several outputs; absent for a single series. */
  outputs?: readonly string[];
  /** True for studies that only make sense within sessions (VWAP). */
  intradayOnly?: boolean;
  /** Bars before the window the first value in it needs, to equal the value over the whole history. */
  warmup: (p: readonly number[]) => number;
  compute: (input: StudyInput, p: readonly number[]) => Series | Record<string, Series>;
}

const period = (name: string, value: number): Param => ({ name, default: value, kind: 'period' });

/** Every study, by name, in the order the docs list them. */
export const STUDIES: ReadonlyMap<string, StudyDefinition> = new Map(
  (
    [
      { name: 'sma', title: 'Simple moving average of the close', params: [period('period', 20)], warmup: ([n]) => n! - 1, compute: ({ bars }, [n]) => sma(bars.close, n!) },
      {
        name: 'ema',
        title: 'Exponential moving average of the close, seeded with the SMA of its first N closes',
        params: [period('period', 20)],
        warmup: ([n]) => n! - 1 + unstableBars(emaDecay(n!)),
        compute: ({ bars }, [n]) => ema(bars.close, n!),
      },
      { name: 'wma', title: 'Weighted moving average of the close (weights 1..N)', params: [period('period', 20)], warmup: ([n]) => n! - 1, compute: ({ bars }, [n]) => wma(bars.close, n!) },
      {
        name: 'rsi',
        title: "Relative strength index, Wilder's smoothing",
        params: [period('period', 14)],
        warmup: ([n]) => n! + unstableBars(wilderDecay(n!)),
        compute: ({ bars }, [n]) => rsi(bars.close, n!),
      },
      {
        name: 'macd',
        title: 'Moving average convergence/divergence: EMA(fast) - EMA(slow), its EMA(signal), and their difference',
        params: [period('fast', 12), period('slow', 26), period('signal', 9)],
        outputs: ['macd', 'signal', 'histogram'],
        warmup: ([f, s, g]) => Math.max(f!, s!) - 1 + g! - 1 + unstableBars(emaDecay(Math.max(f!, s!))) + unstableBars(emaDecay(g!)),
        compute: ({ bars }, [f, s, g]) => macd(bars.close, f!, s!, g!),
      },
      {
        name: 'bbands',
        title: 'Bollinger bands: SMA(N) and K population standard deviations either side',
        params: [period('period', 20), { name: 'deviations', default: 2, kind: 'deviations' }],
        outputs: ['upper', 'middle', 'lower'],
        warmup: ([n]) => n! - 1,
        compute: ({ bars }, [n, k]) => bbands(bars.close, n!, k!),
      },
      {
        name: 'stoch',
        title: 'Stochastic oscillator: %K (the fast %K over N bars smoothed by an SMA) and %D (an SMA of %K)',
        params: [period('k_period', 14), period('k_smooth', 3), period('d_period', 3)],
        outputs: ['k', 'd'],
        warmup: ([k, s, d]) => k! - 1 + s! - 1 + d! - 1,
        compute: ({ bars }, [k, s, d]) => stoch(bars, k!, s!, d!),
      },
      {
        name: 'atr',
        title: "Average true range, Wilder's smoothing",
        params: [period('period', 14)],
        warmup: ([n]) => n! + unstableBars(wilderDecay(n!)),
        compute: ({ bars }, [n]) => atr(bars, n!),
      },
      {
        name: 'adx',
        title: "Average directional index and the directional indicators, Wilder's smoothing",
        params: [period('period', 14)],
        outputs: ['adx', 'plus_di', 'minus_di'],
        warmup: ([n]) => 2 * n! - 1 + 2 * unstableBars(wilderDecay(n!)),
        compute: ({ bars }, [n]) => adx(bars, n!),
      },
      { name: 'obv', title: "On-balance volume, from the window's first bar", params: [], warmup: () => 0, compute: ({ bars }) => obv(bars) },
      {
        name: 'vwap',
        title: "Volume-weighted average price, anchored at each session's open (intraday intervals only)",
        params: [],
        intradayOnly: true,
        // The service reads back to the open of the window's first session instead.
        warmup: () => 0,
        compute: ({ bars, sessions }) => vwap(bars, sessions),
      },
      { name: 'roc', title: 'Rate of change over N bars, in percent', params: [period('period', 10)], warmup: ([n]) => n!, compute: ({ bars }, [n]) => roc(bars.close, n!) },
      { name: 'willr', title: 'Williams %R over N bars', params: [period('period', 14)], warmup: ([n]) => n! - 1, compute: ({ bars }, [n]) => willr(bars, n!) },
      { name: 'cci', title: 'Commodity channel index over N bars', params: [period('period', 20)], warmup: ([n]) => n! - 1, compute: ({ bars }, [n]) => cci(bars, n!) },
    ] satisfies StudyDefinition[]
  ).map((d) => [d.name, d]),
);

/** One study as asked for, normalised: its definition, its parameters (defaults filled in) and its key (`macd:12:26:9`). */
export interface Study {
  definition: StudyDefinition;
  params: number[];
  /** The normalised name: lower case, every parameter given. */
  key: string;
}

/** The column of a study's key (`sma:20`), or of one of its outputs (`macd:12:26:9`, `signal`): `sma_20`, `macd_12_26_9_signal`. */
export function columnName(key: string, output?: string): string {
  const base = key.replaceAll(':', '_');
  return output === undefined ? base : `${base}_${output}`;
}

/** A key's column names in exports: `sma_20`, `macd_12_26_9_signal`. */
export function columnsOf(study: Study): Array<{ column: string; output: string | undefined }> {
  if (study.definition.outputs === undefined) return [{ column: columnName(study.key), output: undefined }];
  return study.definition.outputs.map((output) => ({ column: columnName(study.key, output), output }));
}

/** The name of a study in a violation: what was asked, cut short (the contract bounds it anyway). */
function named(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}

/**
 * Parses a `studies` list. Normalises each entry (lower case, defaults filled in), drops repeats, and
 * sorts by key, so equivalent lists give one canonical list. Throws `InvalidRequestError` naming each
 * bad entry: an unknown study, too many parameters, a parameter out of range, more than 10 studies,
 * or a study for intraday bars asked of daily ones (`intraday` false).
 */
export function parseStudies(list: string, intraday: boolean, path = 'query.studies'): Study[] {
  const violations: Violation[] = [];
  const entries = list.split(',').map((e) => e.trim().toLowerCase());
  if (entries.length > MAX_STUDIES) violations.push({ path, message: `asks for ${entries.length} studies, at most ${MAX_STUDIES} are allowed` });
  const studies = new Map<string, Study>();
  for (const entry of entries) {
    if (entry === '') {
      violations.push({ path, message: 'has an empty study (two commas, or a comma at an end)' });
      continue;
    }
    const [name = '', ...given] = entry.split(':');
    const definition = STUDIES.get(name);
    if (definition === undefined) {
      violations.push({ path, message: `study "${named(entry)}": unknown study "${named(name)}" (known: ${[...STUDIES.keys()].join(', ')})` });
      continue;
    }
    if (given.length > definition.params.length) {
      violations.push({ path, message: `study "${named(entry)}": ${name} takes at most ${definition.params.length} parameter(s)${definition.params.length > 0 ? ` (${definition.params.map((p) => p.name).join(', ')})` : ''}` });
      continue;
    }
    if (definition.intradayOnly && !intraday) {
      violations.push({ path, message: `study "${named(entry)}": ${name} is anchored at each session's open and needs an intraday interval (1m to 1h)` });
      continue;
    }
    const params: number[] = [];
    let ok = true;
    definition.params.forEach((param, i) => {
      const text = given[i];
      if (text === undefined || text === '') {
        if (text === '' && i < given.length - 1) {
          ok = false;
          violations.push({ path, message: `study "${named(entry)}": ${param.name} is empty` });
        }
        params.push(param.default);
        return;
      }
      const value = param.kind === 'period' ? (/^\d{1,4}$/.test(text) ? Number(text) : NaN) : /^\d{1,3}(\.\d{1,6})?$/.test(text) ? Number(text) : NaN;
      const [min, max] = param.kind === 'period' ? [MIN_PERIOD, MAX_PERIOD] : [MIN_DEVIATIONS, MAX_DEVIATIONS];
      if (!(value >= min && value <= max)) {
        ok = false;
        violations.push({ path, message: `study "${named(entry)}": ${param.name} must be ${param.kind === 'period' ? 'a whole number' : 'a number'} from ${min} to ${max}` });
      }
      params.push(value);
    });
    if (!ok) continue;
    if (name === 'macd' && params[0]! >= params[1]!) {
      violations.push({ path, message: `study "${named(entry)}": the fast period must be shorter than the slow one` });
      continue;
    }
    const key = [name, ...params.map(String)].join(':');
    studies.set(key, { definition, params, key });
  }
  if (violations.length > 0) throw new InvalidRequestError(violations);
  return [...studies.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** The bars before the window that every study of `studies` needs (VWAP's session anchor aside). */
export function warmupOf(studies: readonly Study[]): number {
  return studies.reduce((most, s) => Math.max(most, s.definition.warmup(s.params)), 0);
}

/** The values of `study` over `input`, with the first `skip` bars (the warm-up) cut off. */
export function computeStudy(study: Study, input: StudyInput, skip: number): Series | Record<string, Series> {
  const cut = (s: Series): Series => s.slice(skip).map((v) => (v === null || !Number.isFinite(v) ? null : v));
  const result = study.definition.compute(input, study.params);
  if (Array.isArray(result)) return cut(result);
  const out: Record<string, Series> = {};
  for (const output of study.definition.outputs ?? Object.keys(result)) out[output] = cut(result[output]!);
  return out;
}
