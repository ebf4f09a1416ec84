/**
 * Data quality (DESIGN 20): applies the one validator (`domain/quality/validate-history.ts`) to every
 * upstream history answer before it is cached or stored, records each repair, drop and suspicion (the
 * raw bar in the record), counts them by rule and provider, and tells a history read which of its
 * bars carry flags and how many were repaired, dropped or suspect.
 *
 * A second provider of the chain is asked for the same window only when a finding could use it (a
 * price to rebuild, a step to confirm), so a clean answer costs no upstream call.
 */
import { InvalidRequestError } from '../domain/errors.js';
import { parseInstant } from '../domain/instant.js';
import { assetClassOf } from '../domain/provider-symbols.js';
import { canonical } from '../domain/symbols.js';
import { marketOf } from '../domain/market-calendar.js';
import type { StoredCandle, TimeSpan } from '../domain/ports/history-store.js';
import type { Logger } from '../domain/ports/logger.js';
import type { History, HistoryInterval, HistoryQuery } from '../domain/ports/market-data.js';
import { divergentCloses, type DataIssue, type DataIssueStore, type QualityCounts, type QualityFlag, type QualityIssue } from '../domain/quality/data-issues.js';
import { validateHistory, type ValidationInput, type ValidationResult } from '../domain/quality/validate-history.js';

/** Counts of findings, by rule, action and the provider that gave the bar (Prometheus). */
export type CountDataIssue = (rule: string, action: string, provider: string) => void;

/** A second provider's answer for the same window. */
export interface ReferenceAnswer {
  history: History;
  provider: string;
}

export interface DataQualityOptions {
  store: DataIssueStore;
  /**
   * Asks the chain's providers other than `except` for `query`; `undefined` when none serves it or
   * knows the symbol. May throw (the finding then stands without a second opinion).
   */
  reference?: ((query: HistoryQuery, except: string) => Promise<ReferenceAnswer | undefined>) | undefined;
  /**
   * Asks every other provider of the chain that serves `query` (the cross-check of daily closes);
   * the answers that came, in chain order. Never throws (a provider that fails or is out of budget is left out).
   */
  others?: ((query: HistoryQuery, except: string) => Promise<ReferenceAnswer[]>) | undefined;
  /** How far apart (basis points) two providers' closes of one session may be before they diverge (QUALITY_DIVERGENCE_BPS). */
  divergenceBps?: number;
  count?: CountDataIssue | undefined;
  logger?: Logger | undefined;
  /** False turns every check off (answers are kept as given): for measuring what the checks cost. */
  enabled?: boolean;
  now?: () => number;
}

/** One answer to check, as the history store holds it. */
export interface AnswerToCheck {
  symbol: string;
  interval: HistoryInterval;
  /** The window asked. */
  span: TimeSpan;
  currency: string;
  timezone: string;
  candles: readonly StoredCandle[];
  /** Splits this answer carries. */
  splits: ReadonlyArray<{ timeMs: number; numerator: number; denominator: number }>;
  /** Splits the store knows of in the window: read only when a step in the prices needs them. */
  storedSplits?: () => Promise<ReadonlyArray<{ timeMs: number; numerator: number; denominator: number }>>;
  provider: string;
}

/** What a stored window's bars carry: flags per bar start, and the window's counts. */
export interface WindowQuality {
  flags: Map<number, QualityFlag[]>;
  counts: QualityCounts;
}

/** The calendar day (YYYY-MM-DD) of an instant in the exchange's zone: two providers' bars of one session share it. */
function sessionDay(timezone: string): (timeMs: number) => string {
  let format: Intl.DateTimeFormat;
  try {
    format = new Intl.DateTimeFormat('en-CA', { timeZone: timezone, year: 'numeric', month: '2-digit', day: '2-digit' });
  } catch {
    format = new Intl.DateTimeFormat('en-CA', { timeZone: 'UTC', year: 'numeric', month: '2-digit', day: '2-digit' });
  }
  return (timeMs) => format.format(timeMs);
}

/** Findings that a second provider's bars could settle. */
const NEEDS_REFERENCE = new Set(['non_positive_price', 'spike']);

export class DataQuality {
  readonly #store: DataIssueStore;
  readonly #reference: DataQualityOptions['reference'];
  readonly #count: CountDataIssue;
  readonly #logger: Logger | undefined;
  readonly #enabled: boolean;
  readonly #now: () => number;
  readonly #others: DataQualityOptions['others'];
  readonly #divergenceBps: number;

  constructor(options: DataQualityOptions) {
    this.#others = options.others;
    this.#divergenceBps = options.divergenceBps ?? 50;
    this.#store = options.store;
    this.#reference = options.reference;
    this.#count = options.count ?? (() => undefined);
    this.#logger = options.logger;
    this.#enabled = options.enabled ?? true;
    this.#now = options.now ?? Date.now;
  }

  /**
   * The bars of `answer` to keep and the currency they are in, after the validator; every finding is
   * recorded before this resolves (so a bar is never stored repaired without its record).
   */
  async check(answer: AnswerToCheck): Promise<{ candles: StoredCandle[]; currency: string }> {
    if (!this.#enabled) return { candles: answer.candles.slice(), currency: answer.currency };
    const nowMs = this.#now();
    const assetClass = assetClassOf(answer.symbol);
    const market = assetClass === 'fx' || assetClass === 'crypto' ? undefined : marketOf({ instrument_type: 'equity', timezone: answer.timezone });
    const input: ValidationInput = { interval: answer.interval, currency: answer.currency, market, candles: answer.candles, splits: answer.splits, provider: answer.provider, nowMs };
    let result: ValidationResult = validateHistory(input);
    if (answer.storedSplits !== undefined && result.issues.some((i) => i.rule === 'spike')) {
      input.splits = [...answer.splits, ...(await answer.storedSplits())];
      result = validateHistory(input);
    }
    if (this.#reference !== undefined && (result.missingSessions > 0 || result.issues.some((i) => NEEDS_REFERENCE.has(i.rule)))) {
      const other = await this.#reference({ symbol: answer.symbol, interval: answer.interval, startMs: answer.span.startMs, endMs: answer.span.endMs }, answer.provider).catch((err: unknown) => {
        this.#logger?.warn({ symbol: answer.symbol, err: err instanceof Error ? err.message : String(err) }, 'Data quality: no second provider could be asked');
        return undefined;
      });
      if (other !== undefined) {
        const candles = other.history.candles.map((c) => ({ timeMs: Date.parse(c.time), open: c.open, high: c.high, low: c.low, close: c.close, adjClose: c.adj_close, volume: c.volume }));
        result = validateHistory({ ...input, reference: { provider: other.provider, candles, currency: other.history.currency } });
      }
    }
    if (result.issues.length > 0) await this.#record(answer.symbol, answer.interval, result.issues, nowMs);
    return { candles: result.candles, currency: result.currency };
  }

  /**
   * The cross-check (DESIGN 20): the daily closes of `answer` (already through `check`) compared with
   * every other provider of the chain that serves the window, session by session (the exchange's
   * calendar day). A close further than the divergence bound from another provider's is recorded as a
   * suspect `divergent` finding naming both providers and both closes (`closes`), the stored bar as
   * `before` and `after`; where three or more answer and a majority agree against `answer`'s bar,
   * the bar is replaced by the majority's (recorded as repaired, the raw bar as `before`). Resolves to
   * the bars to store. Called for background work only (backfill, keep-current), whose upstream calls
   * count against the background share of each provider's budget.
   */
  async crossCheck(answer: Pick<AnswerToCheck, 'symbol' | 'interval' | 'span' | 'currency' | 'timezone' | 'candles' | 'provider'>): Promise<StoredCandle[]> {
    if (!this.#enabled || this.#others === undefined || answer.interval !== '1d' || answer.candles.length === 0) return answer.candles.slice();
    const query = { symbol: answer.symbol, interval: answer.interval, startMs: answer.span.startMs, endMs: answer.span.endMs };
    const others = (await this.#others(query, answer.provider)).filter((o) => o.history.currency === answer.currency && o.history.candles.length > 0);
    if (others.length === 0) return answer.candles.slice();
    const dayOf = sessionDay(answer.timezone);
    const byDay = others.map((o) => {
      const bars = new Map<string, StoredCandle>();
      for (const c of o.history.candles) {
        const timeMs = Date.parse(c.time);
        if (Number.isFinite(c.close) && c.close > 0) bars.set(dayOf(timeMs), { timeMs, open: c.open, high: c.high, low: c.low, close: c.close, adjClose: c.adj_close, volume: c.volume });
      }
      return { provider: o.provider, bars };
    });
    const bps = this.#divergenceBps;
    const near = (a: number, b: number) => Math.abs(a - b) * 10_000 <= bps * Math.min(a, b);
    const findings: QualityIssue[] = [];
    const kept = answer.candles.map((bar) => {
      const day = dayOf(bar.timeMs);
      const seen = byDay.flatMap((o) => {
        const other = o.bars.get(day);
        return other === undefined ? [] : [{ provider: o.provider, bar: other }];
      });
      const diverging = seen.filter((o) => !near(o.bar.close, bar.close));
      if (diverging.length === 0) return bar;
      const { timeMs: _t, ...stored } = bar;
      const compared = divergentCloses(answer.provider, bar.close, diverging.map((d) => ({ provider: d.provider, close: d.bar.close })));
      // Three or more sources and a majority of them agreeing on another close: the outlier is replaced.
      const answered = seen.length + 1;
      const majority = answered >= 3 ? diverging.find((d) => diverging.filter((o) => near(o.bar.close, d.bar.close)).length * 2 > answered) : undefined;
      if (majority !== undefined) {
        const replacement = { ...majority.bar, timeMs: bar.timeMs };
        const { timeMs: _r, ...after } = replacement;
        findings.push({ timeMs: bar.timeMs, rule: 'divergent', action: 'repaired', before: stored, after, flag: `filled_from_${majority.provider}`, ...compared });
        return replacement;
      }
      // The stored bar is flagged unless a majority of the sources vouch for it (then only the outliers are on record).
      const vouched = answered >= 3 && (answered - diverging.length) * 2 > answered;
      findings.push({ timeMs: bar.timeMs, rule: 'divergent', action: 'suspect', before: stored, after: stored, ...(vouched ? {} : { flag: 'divergent' as const }), ...compared });
      return bar;
    });
    if (findings.length > 0) await this.#record(answer.symbol, answer.interval, findings, this.#now());
    return kept;
  }

  /** Records findings made elsewhere (a cross-check, a verify run), counted like the validator's. */
  async record(symbol: string, interval: HistoryInterval, issues: readonly QualityIssue[]): Promise<void> {
    if (issues.length > 0) await this.#record(symbol, interval, issues, this.#now());
  }

  /** The flags and counts of the stored window `span`: what was recorded of its bars, the latest finding of a bar and rule winning. */
  async window(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<WindowQuality> {
    const flags = new Map<number, QualityFlag[]>();
    const counts: QualityCounts = { repaired: 0, dropped: 0, suspect: 0 };
    if (!this.#enabled) return { flags, counts };
    const issues = await this.#store.forBars(symbol, interval, span.startMs, span.endMs);
    if (issues.length === 0) return { flags, counts };
    // A bar is counted once, under its latest judgement: dropped wins over repaired, repaired over suspect.
    const verdict = new Map<number, keyof QualityCounts>();
    const rank = { dropped: 3, repaired: 2, suspect: 1 } as const;
    for (const issue of issues) {
      const previous = verdict.get(issue.timeMs);
      if (previous === undefined || rank[issue.action] >= rank[previous]) verdict.set(issue.timeMs, issue.action);
      if (issue.flag !== undefined && issue.action !== 'dropped') {
        const list = flags.get(issue.timeMs) ?? [];
        if (!list.includes(issue.flag)) list.push(issue.flag);
        flags.set(issue.timeMs, list);
      }
    }
    for (const action of verdict.values()) counts[action]++;
    return { flags, counts };
  }

  /**
   * The newest recorded findings first, as an administrator asks for them: `symbol` (any case) and
   * `since` (an instant or a date) narrow them, `limit` (default 200) bounds them. Throws
   * `InvalidRequestError` for a `since` that is no date.
   */
  list(params: { symbol?: string | undefined; since?: string | undefined; limit?: number | undefined }): Promise<DataIssue[]> {
    const sinceMs = params.since === undefined ? undefined : parseInstant(params.since);
    if (params.since !== undefined && sinceMs === undefined) throw new InvalidRequestError([{ path: 'query.since', message: 'is not a valid date or date-time' }]);
    return this.#store.list({
      ...(params.symbol !== undefined ? { symbol: canonical(params.symbol) } : {}),
      ...(sinceMs !== undefined ? { sinceMs } : {}),
      limit: params.limit ?? 200,
    });
  }

  async #record(symbol: string, interval: HistoryInterval, found: readonly QualityIssue[], nowMs: number): Promise<void> {
    // A bar judged the same way before (a forming bar asked again, a GBp series read on) is recorded once:
    // the table grows with the bars judged, not with the reads.
    let firstMs = Infinity;
    let lastMs = -Infinity;
    for (const i of found) {
      firstMs = Math.min(firstMs, i.timeMs);
      lastMs = Math.max(lastMs, i.timeMs);
    }
    const known = new Set((await this.#store.forBars(symbol, interval, firstMs, lastMs + 1)).map((i) => `${i.timeMs} ${i.rule} ${i.action} ${JSON.stringify(i.after)}`));
    const issues = found.filter((i) => !known.has(`${i.timeMs} ${i.rule} ${i.action} ${JSON.stringify(i.after)}`));
    if (issues.length === 0) return;
    await this.#store.record(issues.map((i) => ({ ...i, symbol, interval, recordedAtMs: nowMs })));
    for (const issue of issues) this.#count(issue.rule, issue.action, issue.providers[0] ?? 'unknown');
    this.#logger?.info({ symbol, interval, issues: issues.length, rules: [...new Set(issues.map((i) => i.rule))] }, `Data quality: ${issues.length} finding(s) on ${symbol} ${interval}`);
  }
}
