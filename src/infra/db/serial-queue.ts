/**
 * better-sqlite3 gives TypeORM a single connection shared by every caller, so two overlapping
 * transactions would nest into each other (and a rollback would undo the other caller's write).
 * Every store on one SQLite DataSource queues its operations on the same `SerialQueue`, so each
 * operation stays whole whichever store it belongs to.
 */
import type { DataSource } from 'typeorm';
import { AppError } from '../../domain/errors.js';
import { isMissingTable, storeFailure } from './db-errors.js';

/** Runs async jobs one at a time. */
export class SerialQueue {
  #tail: Promise<unknown> = Promise.resolve();

  run<T>(job: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(job, job);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}

const queues = new WeakMap<DataSource, SerialQueue>();

/** The queue shared by every store on this SQLite DataSource; `undefined` for PostgreSQL (a pool). */
export function serialQueueFor(dataSource: DataSource): SerialQueue | undefined {
  if (dataSource.options.type === 'postgres') return undefined;
  let queue = queues.get(dataSource);
  if (!queue) {
    queue = new SerialQueue();
    queues.set(dataSource, queue);
  }
  return queue;
}

/** What a store calls its table and itself, for the errors its queries turn into. */
export interface StoreNames {
  /** The table the migrations create (`users`, `api_keys`). */
  table: string;
  /** How a failure names the store (`User store`). */
  store: string;
}

/**
 * Runs one store operation: queued on SQLite (see above), and whatever its query threw turned into
 * one of our errors, so no TypeORM error leaves `src/infra/db`. An operation that knows a failure
 * better (a unique violation is "name taken") throws its own `AppError`, which passes unchanged.
 */
export function storeOperations(dataSource: DataSource, names: StoreNames): <T>(job: () => Promise<T>) => Promise<T> {
  const queue = serialQueueFor(dataSource);
  const toAppError = (err: unknown): AppError => {
    if (err instanceof AppError) return err;
    if (isMissingTable(err)) {
      return new AppError('DATABASE_NOT_INITIALIZED', `The database has no ${names.table} table yet: run 'mds init' (it runs the migrations)`, { cause: err });
    }
    return storeFailure(err, `${names.store} query failed`);
  };
  return (job) => {
    const guarded = async () => {
      try {
        return await job();
      } catch (err) {
        throw toAppError(err);
      }
    };
    return queue ? queue.run(guarded) : guarded();
  };
}
