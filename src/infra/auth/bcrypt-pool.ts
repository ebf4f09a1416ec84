/**
 * bcrypt off the event loop. bcryptjs is pure JavaScript and its async form still computes on the
 * calling thread in ~100 ms slices, so a few concurrent logins would stall every other request for
 * that long. Here each hash or comparison runs in a small pool of worker threads; the event loop
 * only posts a message and awaits the answer. Extra work queues, which also bounds the CPU a burst
 * of logins can take.
 */
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { ServiceBusyError } from '../../domain/errors.js';

/** How many tasks may wait per worker by default (BCRYPT_MAX_QUEUE unset). */
export const DEFAULT_QUEUE_PER_WORKER = 4;

// Plain CommonJS evaluated in the worker, so the same code runs from src/ (tests) and dist/.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const bcrypt = require(workerData.bcryptPath);
parentPort.on('message', (task) => {
  try {
    const result = task.op === 'hash' ? bcrypt.hashSync(task.password, task.rounds) : bcrypt.compareSync(task.password, task.hash);
    parentPort.postMessage({ id: task.id, result });
  } catch (err) {
    parentPort.postMessage({ id: task.id, error: String((err && err.message) || err) });
  }
});
`;

type Task = { id: number; op: 'hash'; password: string; rounds: number } | { id: number; op: 'compare'; password: string; hash: string };

interface Slot {
  worker: Worker;
  busy: boolean;
}

export class BcryptPool {
  readonly #size: number;
  readonly #slots: Slot[] = [];
  readonly #queue: Array<{ task: Task; resolve: (v: unknown) => void; reject: (e: Error) => void }> = [];
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; slot: Slot }>();
  readonly #bcryptPath = createRequire(import.meta.url).resolve('bcryptjs');
  #nextId = 1;
  /** Tasks allowed to wait for a worker; one more is refused at once. */
  #maxQueue: number;

  /**
   * `size` worker threads at most, created on first use; default: the cores but one (at least 1).
   * `maxQueue` tasks may wait for a worker (BCRYPT_MAX_QUEUE); default 4 per worker.
   */
  constructor(options: { size?: number; maxQueue?: number } = {}) {
    this.#size = Math.max(1, options.size ?? availableParallelism() - 1);
    this.#maxQueue = options.maxQueue ?? this.#size * DEFAULT_QUEUE_PER_WORKER;
  }

  /** Sets how many tasks may wait for a worker (a whole number of at least 1); unset: 4 per worker. */
  limitQueue(maxQueue: number | undefined): void {
    this.#maxQueue = maxQueue ?? this.#size * DEFAULT_QUEUE_PER_WORKER;
  }

  /** A bcrypt hash of `password` at cost `rounds`. */
  hash(password: string, rounds: number): Promise<string> {
    return this.#run({ id: this.#nextId++, op: 'hash', password, rounds }) as Promise<string>;
  }

  /** True when `password` matches `hash`. */
  compare(password: string, hash: string): Promise<boolean> {
    return this.#run({ id: this.#nextId++, op: 'compare', password, hash }) as Promise<boolean>;
  }

  /** Stops the workers; tasks still queued are rejected. */
  async close(): Promise<void> {
    for (const q of this.#queue.splice(0)) q.reject(new Error('bcrypt pool closed'));
    await Promise.all(this.#slots.splice(0).map((s) => s.worker.terminate()));
  }

  /**
   * Runs `task` on a free worker, or queues it; with `maxQueue` tasks already waiting it is refused
   * at once with `ServiceBusyError` (503, retry in a second): a flood of logins holds no memory and
   * delays nobody's login beyond the queue's length.
   */
  #run(task: Task): Promise<unknown> {
    if (this.#queue.length >= this.#maxQueue && !this.#slots.some((s) => !s.busy) && this.#slots.length >= this.#size) {
      return Promise.reject(new ServiceBusyError('Too many logins in progress: retry in 1 seconds', 1));
    }
    return new Promise((resolve, reject) => {
      this.#queue.push({ task, resolve, reject });
      this.#dispatch();
    });
  }

  #dispatch(): void {
    while (this.#queue.length > 0) {
      const slot = this.#slots.find((s) => !s.busy) ?? (this.#slots.length < this.#size ? this.#spawn() : undefined);
      if (!slot) return;
      const next = this.#queue.shift()!;
      slot.busy = true;
      // A busy worker keeps the process alive (a CLI awaiting a hash); an idle one must not.
      slot.worker.ref();
      this.#pending.set(next.task.id, { resolve: next.resolve, reject: next.reject, slot });
      slot.worker.postMessage(next.task);
    }
  }

  #spawn(): Slot {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { bcryptPath: this.#bcryptPath } });
    const slot: Slot = { worker, busy: false };
    worker.on('message', (msg: { id: number; result?: unknown; error?: string }) => {
      const p = this.#pending.get(msg.id);
      if (!p) return;
      this.#pending.delete(msg.id);
      slot.busy = false;
      worker.unref();
      if (msg.error !== undefined) p.reject(new Error(msg.error));
      else p.resolve(msg.result);
      this.#dispatch();
    });
    worker.on('error', (err) => this.#retire(slot, err));
    worker.on('exit', (code) => this.#retire(slot, new Error(`bcrypt worker exited with code ${code}`)));
    worker.unref();
    this.#slots.push(slot);
    return slot;
  }

  /** A worker that died fails its task and leaves the pool; the next task spawns a new one. */
  #retire(slot: Slot, err: Error): void {
    const index = this.#slots.indexOf(slot);
    if (index === -1) return;
    this.#slots.splice(index, 1);
    for (const [id, p] of this.#pending) {
      if (p.slot !== slot) continue;
      this.#pending.delete(id);
      p.reject(err);
    }
    this.#dispatch();
  }
}

let shared: BcryptPool | undefined;

/** The process-wide pool: one per process, so every hasher shares the same threads. */
export function sharedBcryptPool(): BcryptPool {
  shared ??= new BcryptPool();
  return shared;
}
