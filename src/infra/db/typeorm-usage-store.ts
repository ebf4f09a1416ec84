/**
 * `UsageStore` on the users' database (SQLite or PostgreSQL), in plain SQL: the upsert that only
 * raises counts is one statement in both dialects (`max` in SQLite, `GREATEST` in PostgreSQL). Two
 * tables: `usage_daily` (a caller's day) and `usage_operations` (that day by door and operation).
 */
import type { DataSource } from 'typeorm';
import type { Door, UsageCallerKind, UsageOperationRow, UsageRow, UsageStore } from '../../domain/ports/usage.js';
import { storeFailure } from './db-errors.js';

type Count = number | string;

interface DailyRow {
  day: string;
  caller_kind: UsageCallerKind;
  caller: string;
  requests: Count;
  points: Count;
  rate_limited: Count;
}

interface OperationRow extends DailyRow {
  door: Door;
  operation: string;
}

/** A database failure as the error the port promises, without the SQL or its parameters. */
function unavailable(err: unknown): never {
  throw storeFailure(err, 'Usage store');
}

/** Parameters per INSERT at most: well under SQLite's 32,766 and PostgreSQL's 65,535. */
const MAX_PARAMS = 4000;

/** One table's upsert: the key columns that name a row, the count columns that only grow. */
interface Shape {
  table: string;
  keys: readonly string[];
  counts: readonly string[];
}

export class TypeormUsageStore implements UsageStore {
  readonly #dataSource: DataSource;
  readonly #postgres: boolean;
  readonly #daily: Shape;
  readonly #operations: Shape;

  constructor(dataSource: DataSource) {
    this.#dataSource = dataSource;
    this.#postgres = dataSource.options.type === 'postgres';
    const schema = (dataSource.options as { schema?: string }).schema;
    const table = (name: string): string => (this.#postgres && schema ? `"${schema}"."${name}"` : `"${name}"`);
    this.#daily = { table: table('usage_daily'), keys: ['day', 'caller_kind', 'caller'], counts: ['requests', 'points', 'rate_limited'] };
    this.#operations = { table: table('usage_operations'), keys: ['day', 'caller_kind', 'caller', 'door', 'operation'], counts: ['requests', 'points', 'rate_limited'] };
  }

  /** `?` for SQLite, `$n` for PostgreSQL. */
  #param(n: number): string {
    return this.#postgres ? `$${n}` : '?';
  }

  async raiseTotals(rows: readonly UsageRow[], operations: readonly UsageOperationRow[] = []): Promise<void> {
    await this.#raise(
      this.#daily,
      rows.map((row) => [row.day, row.callerKind, row.caller, row.requests, row.points, row.rateLimited]),
    );
    // After the callers' rows: a failure in between leaves a caller's day without its breakdown, never a breakdown without its day.
    await this.#raise(
      this.#operations,
      operations.map((row) => [row.day, row.callerKind, row.caller, row.door, row.operation, row.requests, row.points, row.rateLimited]),
    );
  }

  /** Inserts `values` (in the shape's column order), raising the counts of rows that exist. */
  async #raise(shape: Shape, values: readonly unknown[][]): Promise<void> {
    const columns = [...shape.keys, ...shape.counts];
    const larger = this.#postgres ? 'GREATEST' : 'max';
    const update = shape.counts.map((c) => `${c} = ${larger}(${shape.table}.${c}, excluded.${c})`).join(', ');
    const batch = Math.floor(MAX_PARAMS / columns.length);
    for (let start = 0; start < values.length; start += batch) {
      const params: unknown[] = [];
      const tuples = values.slice(start, start + batch).map((row) => {
        const at = params.length;
        params.push(...row);
        return `(${row.map((_, i) => this.#param(at + i + 1)).join(', ')})`;
      });
      const sql = `INSERT INTO ${shape.table} (${columns.join(', ')}) VALUES ${tuples.join(', ')} ON CONFLICT (${shape.keys.join(', ')}) DO UPDATE SET ${update}`;
      await this.#dataSource.query(sql, params).catch(unavailable);
    }
  }

  async list(sinceDay: string): Promise<UsageRow[]> {
    const rows = (await this.#dataSource
      .query(`SELECT day, caller_kind, caller, requests, points, rate_limited FROM ${this.#daily.table} WHERE day >= ${this.#param(1)} ORDER BY day DESC, caller_kind, caller`, [sinceDay])
      .catch(unavailable)) as DailyRow[];
    return rows.map((row) => ({ day: row.day, callerKind: row.caller_kind, caller: row.caller, requests: Number(row.requests), points: Number(row.points), rateLimited: Number(row.rate_limited) }));
  }

  async listOperations(sinceDay: string): Promise<UsageOperationRow[]> {
    const rows = (await this.#dataSource
      .query(
        `SELECT day, caller_kind, caller, door, operation, requests, points, rate_limited FROM ${this.#operations.table} WHERE day >= ${this.#param(1)} ` +
          'ORDER BY day DESC, caller_kind, caller, door, operation',
        [sinceDay],
      )
      .catch(unavailable)) as OperationRow[];
    return rows.map((row) => ({
      day: row.day,
      callerKind: row.caller_kind,
      caller: row.caller,
      door: row.door,
      operation: row.operation,
      requests: Number(row.requests),
      points: Number(row.points),
      rateLimited: Number(row.rate_limited),
    }));
  }

  async deleteBefore(day: string): Promise<number> {
    await this.#dataSource.query(`DELETE FROM ${this.#operations.table} WHERE day < ${this.#param(1)}`, [day]).catch(unavailable);
    const where = `FROM ${this.#daily.table} WHERE day < ${this.#param(1)}`;
    const [{ n }] = (await this.#dataSource.query(`SELECT count(*) AS n ${where}`, [day]).catch(unavailable)) as [{ n: Count }];
    if (Number(n) > 0) await this.#dataSource.query(`DELETE ${where}`, [day]).catch(unavailable);
    return Number(n);
  }
}
