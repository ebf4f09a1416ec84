/**
 * better-sqlite3 gives TypeORM a single connection shared by every caller, so two overlapping
 * transactions would nest into each other (and a rollback would undo the other caller's write).
 * Every store on one SQLite DataSource queues its operations on the same `SerialQueue`, so each
 * operation stays whole whichever store it belongs to.
 */
import type { DataSource } from 'typeorm';

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
