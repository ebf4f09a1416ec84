import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/infra/scheduler.js';
import { keys } from '../../src/domain/key-space.js';
import { captureLogs } from '../helpers/log-capture.js';
import { waitFor } from '../helpers/wait-for.js';

let scheduler: Scheduler | undefined;
afterEach(() => scheduler?.stop());

describe('scheduler status', () => {
  it('when a job has run, then next_run_at is its interval after that run, whenever the status is read, and the next run comes then', async () => {
    const runs: number[] = [];
    scheduler = new Scheduler({ locks: { acquireLock: () => Promise.resolve('token') }, logger: captureLogs('info').logger, lockKey: (job) => keys.jobLock('simulated', job) });
    scheduler.add('tick', 3000, () => {
      runs.push(Date.now());
      return Promise.resolve('ok');
    });
    scheduler.start();
    await waitFor(() => runs.length === 1, { timeoutMs: 2_000, message: 'the first run' });
    // Read a while after the run: the answer must count from the run, not from the reading.
    await new Promise((resolve) => setTimeout(resolve, 1_200));

    const first = scheduler.status()[0]!;
    const lastRun = Date.parse(first.last_run_at ?? '');
    const next = Date.parse(first.next_run_at ?? '');
    expect(next - lastRun).toBeGreaterThan(2_500);
    expect(next - lastRun).toBeLessThan(3_500);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(scheduler.status()[0]!.next_run_at).toBe(first.next_run_at);

    await waitFor(() => runs.length === 2, { timeoutMs: 4_000, message: 'the second run' });
    expect(Math.abs(runs[1]! - next)).toBeLessThan(300);
  });

  it('when stopped, then no next run is reported', () => {
    scheduler = new Scheduler({ locks: { acquireLock: () => Promise.resolve('token') }, logger: captureLogs('info').logger, lockKey: (job) => keys.jobLock('simulated', job) });
    scheduler.add('tick', 3000, () => Promise.resolve('ok'));
    expect(scheduler.status()[0]!.next_run_at).toBeNull();
    scheduler.start();
    expect(Date.parse(scheduler.status()[0]!.next_run_at ?? '')).toBeLessThanOrEqual(Date.now() + 1000);
    scheduler.stop();
    expect(scheduler.status()[0]!.next_run_at).toBeNull();
  });
});
