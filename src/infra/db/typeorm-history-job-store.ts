/**
 * `HistoryJobStore` over TypeORM, on SQLite or PostgreSQL, in the same database as the users. A claim
 * is one conditional UPDATE, so two instances reaching for the same job cannot both get it.
 */
import type { DataSource, Repository } from 'typeorm';
import { Brackets } from './typeorm.js';
import type { HistoryInterval } from '../../domain/ports/market-data.js';
import type { HistoryJob, HistoryJobState, HistoryJobStore, VerifyResult } from '../../domain/ports/history-store.js';
import { HISTORY_JOB_ENTITY, type HistoryJobRow } from './history-job-entity.js';
import { storeOperations } from './serial-queue.js';

function toJob(row: HistoryJobRow): HistoryJob {
  return {
    id: row.id,
    kind: row.kind === 'verify' ? 'verify' : 'backfill',
    ...(row.result !== null ? { verify: JSON.parse(row.result) as VerifyResult } : {}),
    symbols: JSON.parse(row.symbols) as string[],
    interval: row.interval as HistoryInterval,
    sinceMs: row.since.getTime(),
    state: row.state as HistoryJobState,
    doneSymbols: row.doneSymbols,
    candles: row.candles,
    currentSymbol: row.currentSymbol,
    failures: JSON.parse(row.failures) as HistoryJob['failures'],
    createdBy: row.createdBy,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

/** Backfill jobs in a TypeORM DataSource that `runMigrations()` has brought up to date. */
export class TypeormHistoryJobStore implements HistoryJobStore {
  readonly #dataSource: DataSource;
  readonly #op: <T>(job: () => Promise<T>) => Promise<T>;

  /** `dataSource` must be initialized; the store never closes it. */
  constructor(dataSource: DataSource) {
    this.#dataSource = dataSource;
    this.#op = storeOperations(dataSource, { table: 'history_jobs', store: 'History job store' });
  }

  #repo(): Repository<HistoryJobRow> {
    return this.#dataSource.getRepository<HistoryJobRow>(HISTORY_JOB_ENTITY);
  }

  create(job: HistoryJob): Promise<HistoryJob> {
    return this.#op(async () => {
      await this.#repo().insert({
        id: job.id,
        symbols: JSON.stringify(job.symbols),
        interval: job.interval,
        since: new Date(job.sinceMs),
        state: job.state,
        doneSymbols: job.doneSymbols,
        candles: job.candles,
        currentSymbol: job.currentSymbol,
        failures: JSON.stringify(job.failures),
        createdBy: job.createdBy,
        createdAt: job.createdAt,
        updatedAt: job.updatedAt,
        owner: null,
        heartbeatAt: null,
        kind: job.kind,
        result: job.verify === undefined ? null : JSON.stringify(job.verify),
      });
      return job;
    });
  }

  get(id: string): Promise<HistoryJob | undefined> {
    return this.#op(async () => {
      const row = await this.#repo().findOne({ where: { id } });
      return row ? toJob(row) : undefined;
    });
  }

  claim(id: string, owner: string, at: Date, staleBefore: Date): Promise<boolean> {
    return this.#op(async () => {
      const result = await this.#repo()
        .createQueryBuilder()
        .update()
        .set({ state: 'running', owner, heartbeatAt: at, updatedAt: at })
        .where('id = :id', { id })
        .andWhere(
          new Brackets((q) => {
            q.where("state = 'queued'").orWhere("state = 'running' AND (heartbeat_at IS NULL OR heartbeat_at < :staleBefore)", { staleBefore });
          }),
        )
        .execute();
      return result.affected === 1;
    });
  }

  update(id: string, progress: Pick<HistoryJob, 'state' | 'doneSymbols' | 'candles' | 'currentSymbol' | 'failures' | 'verify'>, at: Date): Promise<void> {
    return this.#op(async () => {
      await this.#repo().update(
        { id },
        {
          state: progress.state,
          doneSymbols: progress.doneSymbols,
          candles: progress.candles,
          currentSymbol: progress.currentSymbol,
          failures: JSON.stringify(progress.failures),
          ...(progress.verify !== undefined ? { result: JSON.stringify(progress.verify) } : {}),
          updatedAt: at,
          heartbeatAt: at,
        },
      );
    });
  }

  unfinished(staleBefore: Date): Promise<string[]> {
    return this.#op(async () => {
      const rows = await this.#repo()
        .createQueryBuilder('job')
        .select('job.id', 'id')
        .where("job.state = 'queued'")
        .orWhere("job.state = 'running' AND (job.heartbeat_at IS NULL OR job.heartbeat_at < :staleBefore)", { staleBefore })
        .orderBy('job.created_at', 'ASC')
        .getRawMany<{ id: string }>();
      return rows.map((r) => r.id);
    });
  }
}
