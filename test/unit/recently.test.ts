import { describe, expect, it, vi } from 'vitest';
import { recently } from '../../src/services/recently.js';

describe('recently', () => {
  it('when called again within the period, then the last answer is reused; after it, the probe runs again', async () => {
    let now = 1000;
    let calls = 0;
    const probe = recently(async () => ++calls, 1000, () => now);

    expect(await probe()).toBe(1);
    now += 999;
    expect(await probe()).toBe(1);
    now += 1;
    expect(await probe()).toBe(2);
    expect(calls).toBe(2);
  });

  it('when calls overlap an answer still being computed, then they share it', async () => {
    let release: (v: number) => void = () => undefined;
    let calls = 0;
    const probe = recently(() => {
      calls++;
      return new Promise<number>((r) => (release = r));
    }, 1000);

    const both = Promise.all([probe(), probe()]);
    release(7);

    expect(await both).toEqual([7, 7]);
    expect(calls).toBe(1);
  });

  it('when the probe fails, then the failure is not kept: the next call asks again', async () => {
    let calls = 0;
    const probe = recently(async () => {
      calls++;
      if (calls === 1) throw new Error('down');
      return 'up';
    }, 60_000);

    await expect(probe()).rejects.toThrow('down');
    expect(await probe()).toBe('up');
    expect(calls).toBe(2);
  });

  it('when a probe is slower than answerWithinMs, then the last answer stands in and the probe goes on; past lastAnswerMaxAgeMs the caller waits for the probe', async () => {
    vi.useFakeTimers();
    try {
      let now = 1000;
      let release: (v: string) => void = () => undefined;
      let calls = 0;
      const probe = recently(
        () => {
          calls++;
          return calls === 1 ? Promise.resolve('first') : new Promise<string>((r) => (release = r));
        },
        1000,
        () => now,
        { answerWithinMs: 20, lastAnswerMaxAgeMs: 5000 },
      );
      expect(await probe()).toBe('first');

      now += 1500;
      const slow = probe();
      await vi.advanceTimersByTimeAsync(20);
      expect(await slow).toBe('first');
      expect(calls).toBe(2);
      release('second');
      expect(await probe()).toBe('second');
      expect(calls).toBe(2);

      now += 6000;
      let answered: string | undefined;
      const waiting = probe().then((v) => (answered = v));
      await vi.advanceTimersByTimeAsync(100);
      expect(answered).toBeUndefined();
      release('third');
      await waiting;
      expect(answered).toBe('third');
    } finally {
      vi.useRealTimers();
    }
  });
});
