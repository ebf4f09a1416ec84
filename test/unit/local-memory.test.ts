import { describe, expect, it } from 'vitest';
import { LocalMemory } from '../../src/services/local-memory.js';

describe('LocalMemory', () => {
  const memoryAt = (clock: { now: number }, maxAgeMs = 1000, maxEntries = 100) => new LocalMemory<string, string>({ maxEntries, maxAgeMs, now: () => clock.now });

  it('when an entry is asked for within its age and its own expiry, then it is served; after either, it is not', () => {
    const clock = { now: 1000 };
    const memory = memoryAt(clock);
    memory.set('a', 'A');
    memory.set('b', 'B', 300);

    clock.now += 299;
    expect(memory.get('a')).toBe('A');
    expect(memory.get('b')).toBe('B');
    clock.now += 1;
    expect(memory.get('b')).toBeUndefined();
    clock.now += 700;
    expect(memory.get('a')).toBeUndefined();
    expect(memory.peek('a')?.value).toBe('A');
  });

  it('when a drop happens while a value is read, then that value is not stored', () => {
    const clock = { now: 1000 };
    const memory = memoryAt(clock);
    const version = memory.version;

    memory.delete('other');

    expect(memory.set('a', 'read before the drop', Infinity, version)).toBe(false);
    expect(memory.get('a')).toBeUndefined();
  });

  it('when loads of one key overlap, then they share one read; a failure is passed on and not kept', async () => {
    const clock = { now: 1000 };
    const memory = memoryAt(clock);
    let reads = 0;
    const read = async () => {
      reads += 1;
      if (reads === 1) throw new Error('store down');
      return `value ${reads}`;
    };

    const failed = await Promise.allSettled([memory.load('a', read), memory.load('a', read)]);
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(reads).toBe(1);

    expect(await memory.load('a', read)).toBe('value 2');
    expect(memory.load('a', read)).toBe('value 2');
    expect(reads).toBe(2);
  });

  it('when a key is dropped while its load is in flight, then the next caller reads again and the old read is not kept', async () => {
    const clock = { now: 1000 };
    const memory = memoryAt(clock);
    let release: (value: string) => void = () => undefined;
    const first = memory.load('a', () => new Promise<string>((resolve) => (release = resolve)));

    memory.delete('a');
    const second = memory.load('a', async () => 'after the change');
    release('before the change');

    expect(await first).toBe('before the change');
    expect(await second).toBe('after the change');
    expect(memory.get('a')).toBe('after the change');
  });

  it('when entries match a rule, then deleteWhere drops those and keeps the others', () => {
    const memory = memoryAt({ now: 1000 });
    memory.set('k1', 'key-1');
    memory.set('k2', 'key-2');
    memory.set('k3', 'key-1');

    memory.deleteWhere((value) => value === 'key-1');

    expect([memory.get('k1'), memory.get('k2'), memory.get('k3')]).toEqual([undefined, 'key-2', undefined]);
  });

  it('when more keys are stored than its bound, then it holds at most twice the bound (two quick-lru generations)', () => {
    const memory = memoryAt({ now: 1000 }, 1000, 10);
    for (let i = 0; i < 1000; i++) memory.set(`k${i}`, 'v');

    expect(memory.size).toBeLessThanOrEqual(20);
    expect(memory.get('k999')).toBe('v');
    expect(memory.get('k0')).toBeUndefined();
  });

  it('when entries have outlived their age, then later writes drop them (a few each, oldest first) before the bound would', () => {
    const clock = { now: 1000 };
    const memory = memoryAt(clock, 1000, 1000);
    for (let i = 0; i < 100; i++) memory.set(`old${i}`, 'a body');
    clock.now += 500;
    memory.set('young', 'still good');
    // Nothing has outlived its age yet: nothing is dropped.
    expect(memory.size).toBe(101);

    clock.now += 600;
    for (let i = 0; i < 30; i++) memory.set(`new${i}`, 'v');

    // 30 writes look at up to 4 of the oldest each: the 100 expired entries are gone, the rest stay.
    expect(memory.size).toBe(31);
    expect(memory.peek('old0')).toBeUndefined();
    expect(memory.peek('old99')).toBeUndefined();
    expect(memory.get('young')).toBe('still good');
    expect(memory.get('new29')).toBe('v');
  });

  it('when its age is 0, then it keeps nothing', () => {
    const memory = memoryAt({ now: 1000 }, 0);

    expect(memory.set('a', 'A')).toBe(false);
    expect(memory.get('a')).toBeUndefined();
  });
});
