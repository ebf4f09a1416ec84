/**
 * `FxRateStore` on the users' database (SQLite or PostgreSQL), in plain SQL: one row per (source,
 * currency, day), written in multi-row upserts inside one transaction, read whole (about 200,000 rows
 * for the ECB's history since 1999).
 */
import type { DataSource } from 'typeorm';
import type { RateDay } from '../../domain/currencies.js';
import type { FxRateStore } from '../../domain/ports/fx-rates.js';
import { storeOperations } from './serial-queue.js';

/** Rows per INSERT: four parameters each, well under SQLite's 32,766 and PostgreSQL's 65,535. */
const BATCH = 1000;

export class TypeormFxRateStore implements FxRateStore {
  readonly #dataSource: DataSource;
  readonly #postgres: boolean;
  readonly #table: string;
  readonly #op: <T>(job: () => Promise<T>) => Promise<T>;

  constructor(dataSource: DataSource) {
    this.#dataSource = dataSource;
    this.#postgres = dataSource.options.type === 'postgres';
    const schema = (dataSource.options as { schema?: string }).schema;
    this.#table = this.#postgres && schema ? `"${schema}"."fx_rates"` : '"fx_rates"';
    this.#op = storeOperations(dataSource, { table: 'fx_rates', store: 'FX rate store' });
  }

  #param(n: number): string {
    return this.#postgres ? `$${n}` : '?';
  }

  read(source: string): Promise<RateDay[]> {
    return this.#op(async () => {
      const rows = (await this.#dataSource.query(`SELECT day, currency, rate FROM ${this.#table} WHERE source = ${this.#param(1)} ORDER BY day`, [source])) as Array<{ day: string; currency: string; rate: number | string }>;
      const days: RateDay[] = [];
      let current: { date: string; rates: Map<string, number> } | undefined;
      for (const row of rows) {
        if (current?.date !== row.day) {
          current = { date: row.day, rates: new Map() };
          days.push(current);
        }
        current.rates.set(row.currency, Number(row.rate));
      }
      return days;
    });
  }

  write(source: string, days: readonly RateDay[]): Promise<void> {
    const rows = days.flatMap((d) => [...d.rates].map(([currency, rate]) => [source, currency, d.date, rate] as const));
    if (rows.length === 0) return Promise.resolve();
    return this.#op(() =>
      this.#dataSource.transaction(async (manager) => {
        for (let start = 0; start < rows.length; start += BATCH) {
          const params: unknown[] = [];
          const values = rows.slice(start, start + BATCH).map((row) => {
            const at = params.length;
            params.push(...row);
            return `(${[1, 2, 3, 4].map((k) => this.#param(at + k)).join(', ')})`;
          });
          await manager.query(`INSERT INTO ${this.#table} (source, currency, day, rate) VALUES ${values.join(', ')} ON CONFLICT (source, currency, day) DO UPDATE SET rate = excluded.rate`, params);
        }
      }),
    );
  }
}
