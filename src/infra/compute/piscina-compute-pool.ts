/**
 * `ComputePool` on piscina's worker threads (DESIGN 24): the event loop only packs a task, posts it
 * and awaits the answer, so health, cached reads and every other request keep their latency while
 * indicators and exports compute.
 *
 * The queue is this adapter's own, not piscina's `maxQueue`: a task is handed to piscina only when a
 * thread is free, so piscina never queues. That keeps the bound exact (piscina counts a task carrying
 * an AbortSignal outside its `maxQueue` once it waited), lets the later pages of an admitted export wait
 * for room instead of failing half-written, and makes an abort while waiting free: piscina aborts a
 * running task by terminating its thread, and a new thread then loads every module again, which costs
 * more than the rest of any one task, so a task that started runs to its end.
 *
 * A request whose task needs a long store read first (an indicators window and its warm-up) reserves
 * its place before reading: when the pool is full it is refused before that read, not after it. A
 * reserved place counts as waiting; the task that uses it waits for a thread and is never refused.
 */
import { pathToFileURL } from 'node:url';
import { Piscina } from 'piscina';
import { columnBuffers, columnsLength } from '../../domain/candle-columns.js';
import { ServiceBusyError } from '../../domain/errors.js';
import type {
  AnswerExportTask,
  ComputedJson,
  ComputeOptions,
  ComputePool,
  ComputeReservation,
  ExportPart,
  HistoryAnswerTask,
  IndicatorTask,
  PageExportTask,
} from '../../domain/ports/compute.js';
import { workerModule } from '../worker-module.js';
import { exportPart } from './export-files.js';
import { runTask, type EncodedJson, type TaskMessage, type TaskName, type TaskOutput } from './tasks.js';

/**
 * Tasks smaller than this (in bars: candles, times studies for indicators) run on the calling thread.
 * Measured here on an idle pool: 1,000 bars take 0.3 to 0.9 ms to compute or format on the event
 * loop, and going through a thread adds 0.1 to 0.2 ms to the wait (columns packed, a message posted,
 * a thread woken, the answer copied back); 100 bars take 0.06 ms inline and 0.19 ms through a thread.
 * Under a millisecond of work is less than a request waits behind one large task in a busy queue (a
 * worst-case indicators task runs ~100 ms), so a small request never queues and is never refused,
 * and the threads go to the work that would hold the event loop.
 */
export const INLINE_BELOW_BARS = 1000;

/** About how many characters of JSON one candle takes in a history answer: sizes an export of a cached answer in bars. */
const JSON_CHARS_PER_BAR = 100;

/** How much a new task's run time weighs in the running mean that prices Retry-After. */
const RUN_TIME_WEIGHT = 0.2;

/** The longest Retry-After a full queue names, in seconds. */
const MAX_RETRY_AFTER_S = 30;

export interface PiscinaComputePoolOptions {
  /** Worker threads (WORKER_POOL_THREADS). */
  threads: number;
  /** Tasks that may wait for a thread; one more is refused (WORKER_POOL_QUEUE). 0: none wait. */
  maxQueue: number;
  /**
   * How much lower the workers' scheduling priority is than the event loop's (nice(2) increment; 0
   * keeps it equal): when the cores are all busy, the event loop runs first. Needs piscina's optional
   * `@napi-rs/nice`; without it the threads keep the process's priority.
   */
  niceIncrement?: number;
  /** Tasks smaller than this many bars run on the calling thread (default `INLINE_BELOW_BARS`; 0 hands every task over, for tests). */
  inlineBelowBars?: number;
}

/** The answer of an encoded JSON task: the bytes as sent, and the string the cache stores (decoded once). */
function computedJson({ bytes, etag }: EncodedJson): ComputedJson {
  return { sent: { body: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), etag } };
}

function shuttingDown(): ServiceBusyError {
  return new ServiceBusyError('The service is shutting down; retry on another instance', 1);
}

/** A task waiting for a thread. */
interface Waiter {
  admit: () => void;
  refuse: (err: unknown) => void;
}

export class PiscinaComputePool implements ComputePool {
  readonly threads: number;
  readonly maxQueue: number;
  readonly #niceIncrement: number;
  readonly #inlineBelowBars: number;
  /** Created by `warm` or the first task handed over: a process that does neither starts no thread. */
  #pool: Piscina | undefined;
  #running = 0;
  readonly #waiting: Waiter[] = [];
  /** Running mean of a task's run time on a thread, ms: what a full queue's Retry-After is priced from. */
  #meanRunMs = 100;
  #closed = false;
  /** Tasks admitted or waiting, until they settle: `close` lets them finish before it stops the threads. */
  readonly #inFlight = new Set<Promise<unknown>>();
  /** Places given by `reserve` and not yet used or released. */
  #reserved = 0;
  readonly #reservations = new WeakSet<ComputeReservation>();

  constructor(options: PiscinaComputePoolOptions) {
    if (!(Number.isInteger(options.threads) && options.threads >= 1)) throw new RangeError(`threads must be a whole number of at least 1, got ${options.threads}`);
    if (!(Number.isInteger(options.maxQueue) && options.maxQueue >= 0)) throw new RangeError(`maxQueue must be a whole number of at least 0, got ${options.maxQueue}`);
    this.threads = options.threads;
    this.maxQueue = options.maxQueue;
    this.#niceIncrement = options.niceIncrement ?? 0;
    this.#inlineBelowBars = options.inlineBelowBars ?? INLINE_BELOW_BARS;
  }

  /** Tasks on a thread now, tasks waiting for one, and places reserved for tasks whose input is being read. */
  get load(): { running: number; waiting: number; reserved: number } {
    return { running: this.#running, waiting: this.#waiting.length, reserved: this.#reserved };
  }

  async warm(): Promise<void> {
    if (this.#closed) return;
    const pool = this.#piscina();
    // One task per thread at once: piscina gives each to a thread with none, and a thread answers
    // once it has loaded the worker module.
    await Promise.all(Array.from({ length: this.threads }, () => pool.run({ name: 'warm', input: null } satisfies TaskMessage<'warm'>)));
  }

  reserve(bars: number): ComputeReservation | undefined {
    if (bars < this.#inlineBelowBars) return undefined;
    if (this.#closed) throw shuttingDown();
    if (this.#running + this.#waiting.length + this.#reserved >= this.threads + this.maxQueue) throw this.#full();
    this.#reserved++;
    let held = true;
    const reservation: ComputeReservation = {
      release: () => {
        if (!held) return;
        held = false;
        this.#reserved--;
      },
    };
    this.#reservations.add(reservation);
    return reservation;
  }

  async indicators(task: IndicatorTask, options?: ComputeOptions): Promise<ComputedJson> {
    const bars = (columnsLength(task.warmup) + columnsLength(task.candles)) * Math.max(1, task.studies.length);
    return computedJson(await this.#run('indicators', task, bars, [...columnBuffers(task.warmup), ...columnBuffers(task.candles)], options));
  }

  async historyAnswer(task: HistoryAnswerTask, options?: ComputeOptions): Promise<ComputedJson> {
    return computedJson(await this.#run('historyAnswer', task, columnsLength(task.candles), columnBuffers(task.candles), options));
  }

  exportAnswer(task: AnswerExportTask, options?: ComputeOptions): Promise<string | Uint8Array> {
    const bars = (task.history.length + (task.studies?.body.length ?? 0)) / JSON_CHARS_PER_BAR;
    return this.#run('exportAnswer', task, bars, [], options);
  }

  async exportPage(task: PageExportTask, options?: ComputeOptions): Promise<ExportPart> {
    const { format, first } = task;
    const file = await this.#run('exportPage', task, columnsLength(task.candles), columnBuffers(task.candles), options);
    return exportPart(format, first, file);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const waiter of this.#waiting.splice(0)) waiter.refuse(shuttingDown());
    // The tasks admitted finish first: one admitted just now may not have reached piscina yet.
    await Promise.allSettled([...this.#inFlight]);
    await this.#pool?.close();
  }

  #run<K extends TaskName>(name: K, input: TaskMessage<K>['input'], bars: number, transferList: ArrayBuffer[], options: ComputeOptions = {}): Promise<TaskOutput<K>> {
    // A reservation of this pool becomes the task's place: it waits for a thread rather than being refused.
    const reserved = options.reservation !== undefined && this.#reservations.has(options.reservation);
    if (reserved) {
      this.#reservations.delete(options.reservation!);
      options.reservation!.release();
      options = { ...options, whenFull: 'wait' };
    }
    if (bars < this.#inlineBelowBars) {
      try {
        return Promise.resolve(runTask({ name, input }));
      } catch (err) {
        return Promise.reject(err);
      }
    }
    const admitted = this.#admit(options).then(async () => {
      const startedMs = performance.now();
      try {
        // The columns move to the thread (the caller's arrays are left empty); no abort signal goes
        // with the task, so piscina never terminates a thread for it (see the top of this file).
        return (await this.#piscina().run({ name, input } satisfies TaskMessage<K>, { transferList })) as TaskOutput<K>;
      } finally {
        this.#meanRunMs += (performance.now() - startedMs - this.#meanRunMs) * RUN_TIME_WEIGHT;
        this.#release();
      }
    });
    this.#inFlight.add(admitted);
    const forget = () => this.#inFlight.delete(admitted);
    admitted.then(forget, forget);
    return admitted;
  }

  /** Resolves when a thread is this task's; refuses it when the queue is full (unless it may wait) or its signal aborts while it waits. */
  #admit(options: ComputeOptions): Promise<void> {
    const { signal } = options;
    if (this.#closed) return Promise.reject(shuttingDown());
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#running < this.threads) {
      this.#running++;
      return Promise.resolve();
    }
    // Places reserved for tasks still reading their input count as waiting already.
    if (this.#waiting.length + this.#reserved >= this.maxQueue && options.whenFull !== 'wait') return Promise.reject(this.#full());
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const index = this.#waiting.indexOf(waiter);
        if (index !== -1) this.#waiting.splice(index, 1);
        reject(signal!.reason);
      };
      const waiter: Waiter = {
        admit: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        refuse: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  /** A thread is free: the first waiter takes it, before any new task can. */
  #release(): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next.admit();
    else this.#running--;
  }

  /**
   * The refusal of a full pool, with when the queue has room again by the running mean of a task's
   * time: the tasks ahead over the threads, in whole seconds.
   */
  #full(): ServiceBusyError {
    const ms = ((this.#running + this.#waiting.length + this.#reserved) * this.#meanRunMs) / this.threads;
    const seconds = Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(ms / 1000)));
    return new ServiceBusyError(`This instance's compute pool is full: retry in ${seconds} seconds`, seconds);
  }

  #piscina(): Piscina {
    if (this.#pool === undefined) {
      const { filename, execArgv } = workerModule(import.meta.url, 'compute-worker');
      this.#pool = new Piscina({
        filename: pathToFileURL(filename).href,
        ...(execArgv !== undefined ? { execArgv } : {}),
        minThreads: this.threads,
        maxThreads: this.threads,
        // A fixed set of threads: an idle one stays, so the next task does not pay for its modules again.
        idleTimeout: Number.POSITIVE_INFINITY,
        niceIncrement: this.#niceIncrement,
      });
    }
    return this.#pool;
  }
}
