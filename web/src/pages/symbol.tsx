/**
 * One symbol: its quote with the market state, and a candlestick chart with volume, dividend and
 * split markers, interval and range buttons, studies chosen from a menu (overlays on the price, panes
 * below it; the choice remembered in localStorage), and a CSV download of the bars shown.
 */
import {
  CandlestickSeries,
  ColorType,
  createChart,
  createSeriesMarkers,
  HistogramSeries,
  LineSeries,
  type IChartApi,
  type SeriesMarker,
  type UTCTimestamp,
} from 'lightweight-charts';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { components } from '../../../src/generated/api.ts';
import { api, ApiError, call } from '../api.ts';
import { formatNumber, Page, Problem, signClass, useApi } from '../ui.tsx';
import { currencyQuery, CurrencySelect, useCurrency } from '../currency.tsx';

type Interval = components['schemas']['HistoryInterval'];
type Range = components['schemas']['HistoryRange'];
type History = components['schemas']['History'];
type HistoryResponse = components['schemas']['HistoryResponse'];
type Indicators = components['schemas']['Indicators'];
type IndicatorsResponse = components['schemas']['IndicatorsResponse'];
type Values = Array<number | null>;

/** The studies the menu offers: where each is drawn, its lines and their colours. */
const STUDY_MENU = [
  { id: 'sma', label: 'SMA 20', study: 'sma:20', pane: false, lines: [{ output: undefined, color: '#d97706' }] },
  { id: 'ema', label: 'EMA 50', study: 'ema:50', pane: false, lines: [{ output: undefined, color: '#1d4ed8' }] },
  {
    id: 'bbands',
    label: 'Bollinger 20, 2',
    study: 'bbands:20:2',
    pane: false,
    lines: [
      { output: 'upper', color: '#64748b' },
      { output: 'middle', color: '#94a3b8' },
      { output: 'lower', color: '#64748b' },
    ],
  },
  { id: 'rsi', label: 'RSI 14', study: 'rsi:14', pane: true, lines: [{ output: undefined, color: '#7c3aed' }] },
  {
    id: 'macd',
    label: 'MACD 12, 26, 9',
    study: 'macd:12:26:9',
    pane: true,
    lines: [
      { output: 'macd', color: '#0e7490' },
      { output: 'signal', color: '#be185d' },
    ],
  },
] as const;
type StudyId = (typeof STUDY_MENU)[number]['id'];
const STUDIES_KEY = 'mds.studies';

function loadStudies(): StudyId[] {
  try {
    const stored = JSON.parse(localStorage.getItem(STUDIES_KEY) ?? '[]') as unknown;
    return Array.isArray(stored) ? STUDY_MENU.map((m) => m.id).filter((id) => stored.includes(id)) : [];
  } catch {
    return [];
  }
}

const INTERVALS: Array<{ value: Interval; label: string }> = [
  { value: '5m', label: '5 min' },
  { value: '1h', label: '1 hour' },
  { value: '1d', label: 'Day' },
  { value: '1wk', label: 'Week' },
  { value: '1mo', label: 'Month' },
];
const RANGES: Array<{ value: Range; label: string }> = [
  { value: '5d', label: '5D' },
  { value: '1mo', label: '1M' },
  { value: '3mo', label: '3M' },
  { value: '6mo', label: '6M' },
  { value: '1y', label: '1Y' },
  { value: '5y', label: '5Y' },
  { value: 'max', label: 'Max' },
];

/** Intraday bars reach back 60 days at most (the API's rule): these ranges fit them. */
const INTRADAY: ReadonlySet<Interval> = new Set(['1m', '5m', '15m', '30m', '1h']);
const INTRADAY_RANGES: ReadonlySet<Range> = new Set(['1d', '5d', '1mo']);

/** The range to show with `interval`: kept when it fits, else the longest that does. */
function fittingRange(interval: Interval, range: Range): Range {
  return INTRADAY.has(interval) && !INTRADAY_RANGES.has(range) ? '1mo' : range;
}

/** The interval to show over `range`: kept when it fits, else daily bars. */
function fittingInterval(interval: Interval, range: Range): Interval {
  return INTRADAY.has(interval) && !INTRADAY_RANGES.has(range) ? '1d' : interval;
}

const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000) as UTCTimestamp;

/** Draws the chosen studies: overlays on the price pane, each pane study in a pane of its own below it. */
function drawStudies(chart: IChartApi, studies: Indicators, chosen: readonly StudyId[]): number {
  let panes = 1;
  for (const item of STUDY_MENU) {
    if (!chosen.includes(item.id)) continue;
    const values = studies.studies[item.study];
    if (values === undefined) continue;
    const pane = item.pane ? panes++ : 0;
    for (const line of item.lines) {
      const series: Values = line.output === undefined ? (values as Values) : ((values as Record<string, Values>)[line.output] ?? []);
      const drawn = chart.addSeries(LineSeries, { color: line.color, lineWidth: 2, priceLineVisible: false, lastValueVisible: false, crosshairMarkerVisible: false }, pane);
      drawn.setData(studies.times.flatMap((t, i) => (series[i] === null || series[i] === undefined ? [] : [{ time: seconds(t), value: series[i]! }])));
    }
    if (item.id === 'macd') {
      const histogram = (values as Record<string, Values>)['histogram'] ?? [];
      const bars = chart.addSeries(HistogramSeries, { priceLineVisible: false, lastValueVisible: false }, pane);
      bars.setData(studies.times.flatMap((t, i) => (histogram[i] == null ? [] : [{ time: seconds(t), value: histogram[i]!, color: histogram[i]! >= 0 ? '#a7d8c0' : '#f3b7b7' }])));
    }
  }
  return panes;
}

function Chart({ history, studies, chosen }: { history: History; studies: Indicators | undefined; chosen: readonly StudyId[] }) {
  const box = useRef<HTMLDivElement>(null);
  const [panes, setPanes] = useState(1);
  useEffect(() => {
    if (!box.current) return;
    // TradingView is credited by the link under the chart: the library's own logo is a <style> element the policy refuses.
    const created = createChart(box.current, {
      autoSize: true,
      layout: { attributionLogo: false, background: { type: ColorType.Solid, color: '#ffffff' }, textColor: '#1f2933' },
      grid: { vertLines: { color: '#eef1f4' }, horzLines: { color: '#eef1f4' } },
      timeScale: { timeVisible: !['1d', '1wk', '1mo'].includes(history.interval), borderColor: '#c9d1d9' },
      rightPriceScale: { borderColor: '#c9d1d9' },
    });
    const candles = created.addSeries(CandlestickSeries, { upColor: '#0a7d3b', downColor: '#c62828', borderVisible: false, wickUpColor: '#0a7d3b', wickDownColor: '#c62828' });
    candles.setData(history.candles.map((c) => ({ time: seconds(c.time), open: c.open, high: c.high, low: c.low, close: c.close })));
    const volume = created.addSeries(HistogramSeries, { priceScaleId: 'volume', priceFormat: { type: 'volume' }, lastValueVisible: false, priceLineVisible: false });
    volume.priceScale().applyOptions({ scaleMargins: { top: 0.8, bottom: 0 } });
    volume.setData(history.candles.filter((c) => c.volume !== null).map((c) => ({ time: seconds(c.time), value: c.volume ?? 0, color: c.close >= c.open ? '#8fd0a9' : '#f1a3a3' })));
    const markers: Array<SeriesMarker<UTCTimestamp>> = [
      ...history.events.dividends.map((d) => ({ time: seconds(d.time), position: 'aboveBar' as const, shape: 'circle' as const, color: '#0b5394', text: `D ${formatNumber(d.amount)}` })),
      ...history.events.splits.map((s) => ({ time: seconds(s.time), position: 'belowBar' as const, shape: 'arrowUp' as const, color: '#7b3fa0', text: `Split ${s.numerator}:${s.denominator}` })),
    ].sort((a, b) => a.time - b.time);
    createSeriesMarkers(candles, markers);
    const drawn = studies === undefined ? 1 : drawStudies(created, studies, chosen);
    // The price pane keeps most of the height; each study pane below it takes a fixed share.
    for (const pane of created.panes().slice(1)) pane.setHeight(130);
    setPanes(drawn);
    created.timeScale().fitContent();
    return () => created.remove();
  }, [history, studies, chosen]);
  const shown = studies === undefined ? [] : STUDY_MENU.filter((m) => chosen.includes(m.id) && studies.studies[m.study] !== undefined);
  return (
    <div
      ref={box}
      class={`chart panes-${panes}`}
      role="img"
      aria-label={`Candlestick chart of ${history.symbol}, ${history.candles.length} bars, with volume${shown.length > 0 ? ` and ${shown.map((m) => m.label).join(', ')}` : ''}`}
      data-candles={history.candles.length}
      data-studies={shown.map((m) => m.study).join(',')}
      data-panes={panes}
    />
  );
}

function StudyMenu({ chosen, onChange }: { chosen: readonly StudyId[]; onChange: (next: StudyId[]) => void }) {
  return (
    <fieldset class="studies">
      <legend>Studies</legend>
      {STUDY_MENU.map((m) => (
        <label key={m.id} class="check">
          <input
            type="checkbox"
            name="study"
            value={m.id}
            checked={chosen.includes(m.id)}
            onChange={(e) => onChange(STUDY_MENU.map((x) => x.id).filter((id) => (id === m.id ? (e.currentTarget as HTMLInputElement).checked : chosen.includes(id))))}
          />{' '}
          {m.label}
        </label>
      ))}
    </fieldset>
  );
}

/** What a conversion did, in a line under the chart. */
function FxLegend({ fx }: { fx: components['schemas']['Fx'] }) {
  return (
    <p class="muted legend fx" data-fx-to={fx.to}>
      Prices converted from {fx.from} to {fx.to} at the ECB's reference rate of each bar's date ({fx.first_date ?? '–'} to {fx.last_date ?? '–'}
      {fx.carried > 0 ? `; ${fx.carried} bars at the previous published rate` : ''})
    </p>
  );
}

function QuoteHeader({ quote }: { quote: components['schemas']['Quote'] | undefined }) {
  const q = quote;
  if (!q) return <p class="loading">Loading the quote…</p>;
  return (
    <div class="quote" data-symbol={q.symbol}>
      <p class="quote-name">
        {q.name} <span class="muted">{[q.exchange, q.currency].filter(Boolean).join(' · ')}</span>
      </p>
      {q.fx ? (
        <p class="muted quote-fx">
          From {q.fx.from} at {q.fx.rate?.toPrecision(6) ?? '–'} ({q.fx.source}, {q.fx.rate_time ?? q.fx.last_date})
        </p>
      ) : null}
      <p class="quote-price">
        <span class="price">{formatNumber(q.price)}</span>{' '}
        <span class={signClass(q.change)}>
          {formatNumber(q.change)} ({formatNumber(q.change_percent)}%)
        </span>{' '}
        <span class={`state state-${q.market_state}`}>Market {q.market_state}</span>
      </p>
    </div>
  );
}

export function SymbolPage({ symbol }: { symbol: string }) {
  const [interval, setBarInterval] = useState<Interval>('1d');
  const [range, setRange] = useState<Range>('6mo');
  const [currency, chooseCurrency] = useCurrency();
  const inCurrency = currencyQuery(currency);
  const quote = useApi((signal) => call(api.GET('/api/quotes/{symbol}', { params: { path: { symbol }, query: inCurrency }, signal })), [symbol, currency]);
  // An interval and a range always fit together: choosing one moves the other where it must.
  const chooseInterval = (next: Interval) => {
    setBarInterval(next);
    setRange((current) => fittingRange(next, current));
  };
  const chooseRange = (next: Range) => {
    setRange(next);
    setBarInterval((current) => fittingInterval(current, next));
  };
  const [download, setDownload] = useState<{ busy: boolean; problem?: ApiError }>({ busy: false });
  const [chosen, setChosen] = useState<StudyId[]>(loadStudies);
  const choose = (next: StudyId[]) => {
    setChosen(next);
    localStorage.setItem(STUDIES_KEY, JSON.stringify(next));
  };
  const studyList = STUDY_MENU.filter((m) => chosen.includes(m.id))
    .map((m) => m.study)
    .join(',');
  const indicators = useApi(
    (signal) =>
      studyList === ''
        ? Promise.resolve(undefined)
        : (call(api.GET('/api/indicators/{symbol}', { params: { path: { symbol }, query: { interval, range, studies: studyList, ...inCurrency } }, signal })) as Promise<IndicatorsResponse>),
    [symbol, interval, range, studyList, currency],
  );
  const history = useApi(
    // Without `format` the answer is JSON (the contract's other media type is the CSV below).
    (signal) => call(api.GET('/api/history/{symbol}', { params: { path: { symbol }, query: { interval, range, ...inCurrency } }, signal })) as Promise<HistoryResponse>,
    [symbol, interval, range, currency],
  );

  const downloadCsv = async () => {
    setDownload({ busy: true });
    try {
      const blob = await call(api.GET('/api/history/{symbol}', { params: { path: { symbol }, query: { interval, range, format: 'csv', ...inCurrency } }, parseAs: 'blob' }));
      const url = URL.createObjectURL(blob as Blob);
      const link = document.createElement('a');
      link.href = url;
      link.download = `${symbol}-${interval}-${range}${currency === '' ? '' : `-${currency}`}.csv`;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      setDownload({ busy: false });
    } catch (err) {
      setDownload({ busy: false, problem: err instanceof ApiError ? err : new ApiError(0, String(err)) });
    }
  };

  // A symbol nobody serves is said once, without controls for a chart that cannot exist.
  if (quote.error?.status === 404) {
    return (
      <Page title={symbol}>
        <Problem error={quote.error} />
        <p>
          <a href="/app/watchlist">Find a symbol from the watchlist's search</a>
        </p>
      </Page>
    );
  }

  return (
    <Page title={symbol}>
      {quote.error ? <Problem error={quote.error} onRetry={quote.reload} /> : <QuoteHeader quote={quote.data?.data} />}
      <div class="toolbar">
        <div role="group" aria-label="Interval" class="buttons">
          {INTERVALS.map((i) => (
            <button type="button" key={i.value} aria-pressed={interval === i.value} onClick={() => chooseInterval(i.value)}>
              {i.label}
            </button>
          ))}
        </div>
        <div role="group" aria-label="Range" class="buttons">
          {RANGES.map((r) => (
            <button type="button" key={r.value} aria-pressed={range === r.value} onClick={() => chooseRange(r.value)}>
              {r.label}
            </button>
          ))}
        </div>
        <CurrencySelect value={currency} onChange={chooseCurrency} />
        <button type="button" class="download" onClick={downloadCsv} disabled={download.busy}>
          Download CSV
        </button>
      </div>
      <StudyMenu chosen={chosen} onChange={choose} />
      {indicators.error ? <Problem error={indicators.error} onRetry={indicators.reload} /> : null}
      {download.problem ? <Problem error={download.problem} /> : null}
      {history.error ? <Problem error={history.error} onRetry={history.reload} /> : null}
      {history.data ? (
        history.data.data.candles.length > 0 ? (
          <Chart history={history.data.data} studies={studyList === '' ? undefined : indicators.data?.data} chosen={chosen} />
        ) : (
          <p>No bars in this range.</p>
        )
      ) : history.loading ? (
        <p class="loading">Loading the chart…</p>
      ) : null}
      {history.data ? (
        <p class="muted legend">
          {history.data.data.candles.length} bars · {history.data.data.events.dividends.length} dividends · {history.data.data.events.splits.length} splits · source {history.data.source}
        </p>
      ) : null}
      {history.data?.data.fx ? <FxLegend fx={history.data.data.fx} /> : null}
      <p class="attribution">
        Charting by{' '}
        <a href="https://www.tradingview.com/" rel="noopener noreferrer">
          TradingView Lightweight Charts™
        </a>{' '}
        (Apache-2.0), Copyright © 2025 TradingView, Inc.
      </p>
    </Page>
  );
}
