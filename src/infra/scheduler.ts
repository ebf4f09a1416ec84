/**
 * Interval jobs on croner. With several instances sharing one cache store, a job runs in one of them
 * per interval: each run first takes a lock that lives for most of the interval and is never
 * released early, so an instance whose timer fires a moment later finds it held and skips.
 */
import { Cron } from 'croner';
import type { components } from '../generated/api.js';
import type { Logger } from './logger.js';
import type { CacheStore } from '../domain/ports/cache.js';

export type SchedulerJobStatus = components['schemas']['SchedulerJob'];

/** What a run did: `ok`, or `skipped` when another instance ran it for this interval. */
export type JobResult = 'ok' | 'skipped';

interface Job {
  name: string;
  intervalMs: number;
  run: () => Promise<JobResult>;
  cron?: Cron;
  lastRunAt: Date | null;
  lastResult: 'ok' | 'skipped' | 'failed' | null;
  lastError: string | null;
  /** When the timer was started, and when it last fired (ms): the next run follows from them. */
  startedAtMs?: number;
  firedAtMs?: number;
}

export class Scheduler {
  private readonly jobs: Job[] = [];
  private running = false;

  constructor(
    private readonly deps: {
      locks: Pick<CacheStore, 'acquireLock'>;
      logger: Logger;
      /** The key of the lock a run of `job` holds, so one instance of the fleet runs it at a time (`keys.jobLock`). */
      lockKey: (job: string) => string;
    },
  ) {}

  /** Registers a job; it starts with `start()`. `intervalMs` is rounded to whole seconds (at least 1). */
  add(name: string, intervalMs: number, run: () => Promise<JobResult>): void {
    this.jobs.push({ name, intervalMs: Math.max(1000, Math.round(intervalMs / 1000) * 1000), run, lastRunAt: null, lastResult: null, lastError: null });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    for (const job of this.jobs) {
      job.startedAtMs = Date.now();
      job.firedAtMs = undefined;
      job.cron = new Cron('* * * * * *', { name: `mds-${job.name}-${process.pid}-${Math.random()}`, interval: job.intervalMs / 1000, protect: true }, () => {
        job.firedAtMs = Date.now();
        return this.runOnce(job);
      });
    }
    this.deps.logger.info({ jobs: this.jobs.map((j) => ({ name: j.name, interval_s: j.intervalMs / 1000 })) }, 'scheduler started');
  }

  /** Runs a job now (also used by the timer). Never throws: a failure is logged and the schedule kept. */
  async runOnce(job: Job): Promise<void> {
    job.lastRunAt = new Date();
    try {
      const lockKey = this.deps.lockKey(job.name);
      const token = await this.deps.locks.acquireLock(lockKey, Math.max(500, job.intervalMs - 500)).catch(() => 'no-lock-store');
      job.lastResult = token === undefined ? 'skipped' : await job.run();
      job.lastError = null;
    } catch (err) {
      job.lastResult = 'failed';
      job.lastError = err instanceof Error ? err.message : String(err);
      this.deps.logger.warn({ job: job.name, err }, 'scheduled job failed; it keeps its schedule');
    }
  }

  /** Runs the named job now, as the timer would. */
  async trigger(name: string): Promise<void> {
    const job = this.jobs.find((j) => j.name === name);
    if (job) await this.runOnce(job);
  }

  stop(): void {
    for (const job of this.jobs) {
      job.cron?.stop();
    }
    this.running = false;
  }

  /**
   * The timer fires on the first whole second after it starts, then on the whole second `interval`
   * after its last fire. (croner's own nextRun() under `interval` counts from the moment it is
   * asked, not from the last fire, so it is not used.)
   */
  private nextRun(job: Job): Date | null {
    if (job.startedAtMs === undefined) return null;
    const at = job.firedAtMs === undefined ? Math.ceil(job.startedAtMs / 1000) * 1000 : Math.round((job.firedAtMs + job.intervalMs) / 1000) * 1000;
    return new Date(at);
  }

  status(): SchedulerJobStatus[] {
    return this.jobs.map((job) => ({
      name: job.name,
      interval_s: job.intervalMs / 1000,
      last_run_at: job.lastRunAt?.toISOString() ?? null,
      next_run_at: this.running ? (this.nextRun(job)?.toISOString() ?? null) : null,
      last_result: job.lastResult,
      last_error: job.lastError,
    }));
  }
}
