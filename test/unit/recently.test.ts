import { describe, expect, it } from 'vitest';
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
});
