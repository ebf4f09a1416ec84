/**
 * `UsageStore` on the users' database (SQLite or PostgreSQL), in plain SQL: the upsert that only
 * raises counts is one statement in both dialects (`max` in SQLite, `GREATEST` in PostgreSQL).
 */
import type { DataSource } from 'typeorm';
import type { UsageCallerKind, UsageRow, UsageStore } from '../../domain/ports/usage.js';
import { AppError } from '../../domain/errors.js';
import { reasonOf } from './db-errors.js';

interface Row {
  day: string;
  caller_kind: UsageCallerKind;
  caller: string;
  requests: number | string;
  rate_limited: number | string;
}

/** A database failure as the error the port promises, without the SQL or its parameters. */
function unavailable(err: unknown): never {
  throw new AppError('DATABASE_UNAVAILABLE', `Usage store: ${reasonOf(err)}`, { cause: err });
}

/** Rows per INSERT: five parameters each, well under SQLite's 32,766 and PostgreSQL's 65,535. */
const BATCH = 500;

export class TypeormUsageStore implements UsageStore {
  readonly #dataSource: DataSource;
  readonly #postgres: boolean;
  readonly #table: string;

  constructor(dataSource: DataSource) {
    this.#dataSource = dataSource;
    this.#postgres = dataSource.options.type === 'postgres';
    const schema = (dataSource.options as { schema?: string }).schema;
    this.#table = this.#postgres && schema ? `"${schema}"."usage_daily"` : '"usage_daily"';
  }

  /** `?` for SQLite, `$n` for PostgreSQL. */
  #param(n: number): string {
    return this.#postgres ? `$${n}` : '?';
  }

  async raiseTotals(rows: readonly UsageRow[]): Promise<void> {
    const larger = this.#postgres ? 'GREATEST' : 'max';
    for (let start = 0; start < rows.length; start += BATCH) {
      const chunk = rows.slice(start, start + BATCH);
      const params: unknown[] = [];
      const values = chunk.map((row) => {
        const at = params.length;
        params.push(row.day, row.callerKind, row.caller, row.requests, row.rateLimited);
        return `(${[1, 2, 3, 4, 5].map((i) => this.#param(at + i)).join(', ')})`;
      });
      const sql =
        `INSERT INTO ${this.#table} (day, caller_kind, caller, requests, rate_limited) VALUES ${values.join(', ')} ` +
        `ON CONFLICT (day, caller_kind, caller) DO UPDATE SET requests = ${larger}(${this.#table}.requests, excluded.requests), ` +
        `rate_limited = ${larger}(${this.#table}.rate_limited, excluded.rate_limited)`;
      await this.#dataSource.query(sql, params).catch(unavailable);
    }
  }

  async list(sinceDay: string): Promise<UsageRow[]> {
    const rows = (await this.#dataSource
      .query(`SELECT day, caller_kind, caller, requests, rate_limited FROM ${this.#table} WHERE day >= ${this.#param(1)} ORDER BY day DESC, caller_kind, caller`, [sinceDay])
      .catch(unavailable)) as Row[];
    return rows.map((row) => ({ day: row.day, callerKind: row.caller_kind, caller: row.caller, requests: Number(row.requests), rateLimited: Number(row.rate_limited) }));
  }

  async deleteBefore(day: string): Promise<number> {
    const where = `FROM ${this.#table} WHERE day < ${this.#param(1)}`;
    const [{ n }] = (await this.#dataSource.query(`SELECT count(*) AS n ${where}`, [day]).catch(unavailable)) as [{ n: number | string }];
    if (Number(n) > 0) await this.#dataSource.query(`DELETE ${where}`, [day]).catch(unavailable);
    return Number(n);
  }
}
