/**
 * The indicators answer of one window (`GET /api/indicators`): the studies over the warm-up and the
 * window's bars, each cut to the window, as JSON. A compute task (`ComputePool.indicators`): the
 * worst request (10 studies of period 500 over 3 days of 1-minute bars, 33,000 bars with the warm-up)
 * computes for about 100 ms, which must not hold the event loop.
 */
import { candlesOf, columnsLength } from '../candle-columns.js';
import { adjustCandles } from '../history-adjustment.js';
import { isoInstant } from '../instant.js';
import { MARKETS, type MarketCode } from '../market-calendar.js';
import type { IndicatorTask, StudySpec } from '../ports/compute.js';
import type { components } from '../../generated/api.js';
import { computeStudy, STUDIES, type Study } from './catalogue.js';
import { sessionKeys } from './sessions.js';
import type { Bars, Series } from './studies.js';

type IndicatorsResponse = components['schemas']['IndicatorsResponse'];

/** `studies` as plain data, for a task. */
export function studySpecs(studies: readonly Study[]): StudySpec[] {
  return studies.map((s) => ({ key: s.key, name: s.definition.name, params: [...s.params] }));
}

/** The study a spec names again; throws on a name the catalogue does not know (a spec comes from `studySpecs`). */
function studyOf(spec: StudySpec): Study {
  const definition = STUDIES.get(spec.name);
  if (definition === undefined) throw new Error(`unknown study '${spec.name}'`);
  return { definition, params: spec.params, key: spec.key };
}

function marketCode(code: string): MarketCode {
  const found = MARKETS.find((m) => m.code === code);
  if (found === undefined) throw new Error(`unknown market '${code}'`);
  return found.code;
}

function sliceBars(bars: Bars, from: number): Bars {
  return { high: bars.high.slice(from), low: bars.low.slice(from), close: bars.close.slice(from), volume: bars.volume.slice(from) };
}

/** The JSON of the indicators answer of `task`. */
export function indicatorsAnswer(task: IndicatorTask): string {
  const studies = task.studies.map(studyOf);
  const warmupBars = columnsLength(task.warmup);
  const candles = adjustCandles([...candlesOf(task.warmup), ...candlesOf(task.candles)], task.actions, task.adjust);
  const bars: Bars = {
    high: candles.map((c) => c.high),
    low: candles.map((c) => c.low),
    close: candles.map((c) => c.close),
    volume: candles.map((c) => c.volume ?? 0),
  };
  const sessions = studies.some((s) => s.definition.intradayOnly) ? sessionKeys(marketCode(task.market), candles.map((c) => c.timeMs)) : [];
  const computed: Record<string, Series | Record<string, Series>> = {};
  for (const study of studies) {
    // Each study from its own warm-up, so its values do not depend on the studies asked with it (OBV
    // starts at the window's first bar); VWAP reads back to its session's open, as far as the warm-up goes.
    const own = study.definition.intradayOnly ? warmupBars : Math.min(warmupBars, study.definition.warmup(study.params));
    const from = warmupBars - own;
    const input = from === 0 ? { bars, sessions } : { bars: sliceBars(bars, from), sessions: sessions.slice(from) };
    computed[study.key] = computeStudy(study, input, own);
  }
  const times: string[] = [];
  for (let i = warmupBars; i < candles.length; i++) times.push(isoInstant(candles[i]!.timeMs));
  const body: IndicatorsResponse = {
    success: true,
    data: { symbol: task.symbol, interval: task.interval, times, studies: computed },
    source: task.source,
    updated_at: task.updatedAt,
  };
  return JSON.stringify(body);
}
