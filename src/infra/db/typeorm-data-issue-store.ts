/**
 * `DataIssueStore` on the users' database (SQLite or PostgreSQL), in plain SQL: appends in multi-row
 * INSERTs, reads by bar (the history read's flags) and by recording time (the admin list).
 */
import type { DataSource } from 'typeorm';
import type { HistoryInterval } from '../../domain/ports/market-data.js';
import type { BarValues, DataIssue, DataIssueStore, DivergentCloses, QualityAction, QualityFlag, QualityRule } from '../../domain/quality/data-issues.js';
import { storeFailure } from './db-errors.js';

interface Row {
  symbol: string;
  bar_interval: string;
  t: number | string;
  rule: string;
  action: string;
  flag: string | null;
  before_bar: string | null;
  after_bar: string | null;
  providers: string;
  recorded_at: number | string;
  closes: string | null;
}

const COLUMNS = 'symbol, bar_interval, t, rule, action, flag, before_bar, after_bar, providers, recorded_at, closes';
/** Rows per INSERT: eleven parameters each, well under SQLite's 32,766 and PostgreSQL's 65,535. */
const BATCH = 500;

function unavailable(err: unknown): never {
  throw storeFailure(err, 'Data issue store');
}

function bar(text: string | null): BarValues | null {
  return text === null ? null : (JSON.parse(text) as BarValues);
}

function toIssue(row: Row): DataIssue {
  return {
    symbol: row.symbol,
    interval: row.bar_interval as HistoryInterval,
    timeMs: Number(row.t),
    rule: row.rule as QualityRule,
    action: row.action as QualityAction,
    ...(row.flag !== null ? { flag: row.flag as QualityFlag } : {}),
    before: bar(row.before_bar),
    after: bar(row.after_bar),
    providers: row.providers.split(',').filter((p) => p.length > 0),
    ...(row.closes !== null ? { closes: JSON.parse(row.closes) as DivergentCloses } : {}),
    recordedAtMs: Number(row.recorded_at),
  };
}

export class TypeormDataIssueStore implements DataIssueStore {
  readonly #dataSource: DataSource;
  readonly #postgres: boolean;
  readonly #table: string;

  constructor(dataSource: DataSource) {
    this.#dataSource = dataSource;
    this.#postgres = dataSource.options.type === 'postgres';
    const schema = (dataSource.options as { schema?: string }).schema;
    this.#table = this.#postgres && schema ? `"${schema}"."data_issues"` : '"data_issues"';
  }

  #param(n: number): string {
    return this.#postgres ? `$${n}` : '?';
  }

  async record(issues: readonly DataIssue[]): Promise<number> {
    for (let start = 0; start < issues.length; start += BATCH) {
      const params: unknown[] = [];
      const values = issues.slice(start, start + BATCH).map((i) => {
        const at = params.length;
        params.push(i.symbol, i.interval, i.timeMs, i.rule, i.action, i.flag ?? null, i.before === null ? null : JSON.stringify(i.before), i.after === null ? null : JSON.stringify(i.after), i.providers.join(','), i.recordedAtMs, i.closes === undefined ? null : JSON.stringify(i.closes));
        return `(${Array.from({ length: 11 }, (_, k) => this.#param(at + k + 1)).join(', ')})`;
      });
      await this.#dataSource.query(`INSERT INTO ${this.#table} (${COLUMNS}) VALUES ${values.join(', ')}`, params).catch(unavailable);
    }
    return issues.length;
  }

  async forBars(symbol: string, interval: HistoryInterval, startMs: number, endMs: number): Promise<DataIssue[]> {
    const p = (n: number) => this.#param(n);
    const rows = (await this.#dataSource
      .query(`SELECT ${COLUMNS} FROM ${this.#table} WHERE symbol = ${p(1)} AND bar_interval = ${p(2)} AND t >= ${p(3)} AND t < ${p(4)} ORDER BY t, id`, [symbol, interval, startMs, endMs])
      .catch(unavailable)) as Row[];
    return rows.map(toIssue);
  }

  async list(filter: { symbol?: string; sinceMs?: number; limit: number }): Promise<DataIssue[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.symbol !== undefined) where.push(`symbol = ${this.#param(params.push(filter.symbol))}`);
    if (filter.sinceMs !== undefined) where.push(`recorded_at >= ${this.#param(params.push(filter.sinceMs))}`);
    const limit = this.#param(params.push(filter.limit));
    const rows = (await this.#dataSource
      .query(`SELECT ${COLUMNS} FROM ${this.#table}${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY recorded_at DESC, id DESC LIMIT ${limit}`, params)
      .catch(unavailable)) as Row[];
    return rows.map(toIssue);
  }
}
