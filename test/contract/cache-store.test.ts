/**
 * One contract for every CacheStore: the memory store and the Redis store (against the run's shared
 * redis-server, a master found through Sentinel, and a three-master Redis Cluster, both started here)
 * must behave the same. Each test works under its own random key prefix.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import type { LeaseStore } from '../../src/domain/ports/push.js';
import { MemoryCacheStore } from '../../src/infra/cache/memory-cache-store.js';
import { RedisCacheStore } from '../../src/infra/cache/redis-cache-store.js';
import type { CacheStore } from '../../src/domain/ports/cache.js';
import { startRedisCluster, startSentinelGroup } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

interface StoreUnderTest {
  store: CacheStore;
  close(): Promise<void>;
}

const drivers: Array<{ name: string; open: () => Promise<StoreUnderTest> }> = [
  {
    name: 'MemoryCacheStore',
    open: async () => ({ store: new MemoryCacheStore({ maxEntries: 10_000 }), close: async () => undefined }),
  },
  {
    name: 'RedisCacheStore',
    open: async () => {
      const store = new RedisCacheStore({ host: '127.0.0.1', port: inject('redisPort') });
      await store.connect();
      return { store, close: () => store.close() };
    },
  },
  {
    name: 'RedisCacheStore over Sentinel',
    open: async () => {
      const group = await startSentinelGroup();
      const sentinels = group.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port }));
      const store = new RedisCacheStore({ topology: 'sentinel', sentinels, sentinelName: group.name });
      await store.connect();
      return {
        store,
        close: async () => {
          await store.close();
          await group.stop();
        },
      };
    },
  },
  {
    name: 'RedisCacheStore over Cluster',
    open: async () => {
      const cluster = await startRedisCluster();
      const clusterNodes = cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
      const store = new RedisCacheStore({ topology: 'cluster', clusterNodes });
      await store.connect();
      return {
        store,
        close: async () => {
          await store.close();
          await cluster.stop();
        },
      };
    },
  },
];

describe.each(drivers)('CacheStore contract: $name', ({ open }) => {
  let subject: StoreUnderTest;
  let store: CacheStore;
  let prefix: string;

  beforeAll(async () => {
    subject = await open();
    store = subject.store;
  }, 60_000);
  afterAll(async () => {
    await subject.close();
  });
  beforeEach(() => {
    prefix = `test:contract:${randomUUID()}:`;
  });

  it('when a key was never set, get resolves to undefined (a miss is not an error)', async () => {
    await expect(store.get(`${prefix}absent`)).resolves.toBeUndefined();
  });

  it('when a value is set, get returns the same string unchanged', async () => {
    const value = JSON.stringify({ success: true, text: 'ünïcødé ✓ "quoted" \n line' });
    await store.set(`${prefix}k`, value, 60_000);
    const entry = await store.get(`${prefix}k`);
    expect(entry?.value).toBe(value);
  });

  it('when a value is set as its UTF-8 bytes (a Buffer, or a view into a larger buffer), get returns the string they encode, every time', async () => {
    const value = JSON.stringify({ success: true, text: 'ünïcødé ✓ "quoted" \n line' });
    await store.set(`${prefix}b`, Buffer.from(value), 60_000);
    const padded = new TextEncoder().encode(`xx${value}yy`);
    await store.set(`${prefix}v`, padded.subarray(2, padded.length - 2), 60_000);
    expect((await store.get(`${prefix}b`))?.value).toBe(value);
    expect((await store.get(`${prefix}b`))?.value).toBe(value);
    expect((await store.get(`${prefix}v`))?.value).toBe(value);
  });

  it('when a key is set again, the new value replaces the old one', async () => {
    await store.set(`${prefix}k`, 'first', 60_000);
    await store.set(`${prefix}k`, 'second', 60_000);
    expect((await store.get(`${prefix}k`))?.value).toBe('second');
  });

  it('reports the remaining TTL in milliseconds, never more than was set', async () => {
    await store.set(`${prefix}k`, 'v', 60_000);
    const entry = await store.get(`${prefix}k`);
    expect(entry?.ttlMs).toBeGreaterThan(55_000);
    expect(entry?.ttlMs).toBeLessThanOrEqual(60_000);
  });

  it('when the TTL has passed, the entry is a miss', async () => {
    await store.set(`${prefix}short`, 'v', 300);
    expect((await store.get(`${prefix}short`))?.value).toBe('v');
    await waitFor(async () => (await store.get(`${prefix}short`)) === undefined, { timeoutMs: 5_000, message: 'entry to expire' });
  });

  it('delete removes the key and says whether it existed', async () => {
    await store.set(`${prefix}k`, 'v', 60_000);
    await expect(store.delete(`${prefix}k`)).resolves.toBe(true);
    await expect(store.get(`${prefix}k`)).resolves.toBeUndefined();
    await expect(store.delete(`${prefix}k`)).resolves.toBe(false);
  });

  it('deleteByPrefix removes exactly the keys under the prefix and counts them', async () => {
    await store.set(`${prefix}a:1`, '1', 60_000);
    await store.set(`${prefix}a:2`, '2', 60_000);
    await store.set(`${prefix}b:1`, '3', 60_000);
    const outside = `test:contract:other:${randomUUID()}`;
    await store.set(outside, '4', 60_000);

    await expect(store.deleteByPrefix(`${prefix}a:`)).resolves.toBe(2);

    await expect(store.get(`${prefix}a:1`)).resolves.toBeUndefined();
    await expect(store.get(`${prefix}a:2`)).resolves.toBeUndefined();
    expect((await store.get(`${prefix}b:1`))?.value).toBe('3');
    expect((await store.get(outside))?.value).toBe('4');
    await store.delete(outside);
  });

  it('deleteByPrefix treats glob characters in the prefix literally', async () => {
    await store.set(`${prefix}x[1]*:k`, 'literal', 60_000);
    await store.set(`${prefix}x1:k`, 'glob-lookalike', 60_000);
    await store.set(`${prefix}x[1]z:k`, 'longer', 60_000);

    await expect(store.deleteByPrefix(`${prefix}x[1]*`)).resolves.toBe(1);

    await expect(store.get(`${prefix}x[1]*:k`)).resolves.toBeUndefined();
    expect((await store.get(`${prefix}x1:k`))?.value).toBe('glob-lookalike');
    expect((await store.get(`${prefix}x[1]z:k`))?.value).toBe('longer');
  });

  it('deleteByPrefix removes many keys (more than one scan batch)', async () => {
    await Promise.all(Array.from({ length: 1200 }, (_, i) => store.set(`${prefix}many:${i}`, String(i), 60_000)));
    await expect(store.deleteByPrefix(`${prefix}many:`)).resolves.toBe(1200);
    await expect(store.get(`${prefix}many:7`)).resolves.toBeUndefined();
  });

  it('a lock is exclusive while held', async () => {
    const token = await store.acquireLock(`${prefix}lock`, 10_000);
    expect(token).toEqual(expect.any(String));
    await expect(store.acquireLock(`${prefix}lock`, 10_000)).resolves.toBeUndefined();
  });

  it('a lock is released only by its owner token', async () => {
    const token = await store.acquireLock(`${prefix}lock`, 10_000);
    await store.releaseLock(`${prefix}lock`, 'not-the-owner');
    await expect(store.acquireLock(`${prefix}lock`, 10_000)).resolves.toBeUndefined();

    await store.releaseLock(`${prefix}lock`, token!);
    const next = await store.acquireLock(`${prefix}lock`, 10_000);
    expect(next).toEqual(expect.any(String));
    expect(next).not.toBe(token);
  });

  it('when a lock was taken over after expiring, the previous owner cannot release it', async () => {
    const first = await store.acquireLock(`${prefix}lock`, 200);
    let second: string | undefined;
    await waitFor(async () => (second = await store.acquireLock(`${prefix}lock`, 10_000)) !== undefined, {
      timeoutMs: 5_000,
      message: 'expired lock to become free',
    });
    await store.releaseLock(`${prefix}lock`, first!);
    await expect(store.acquireLock(`${prefix}lock`, 10_000)).resolves.toBeUndefined();
    await store.releaseLock(`${prefix}lock`, second!);
  });

  it('a lease (a lock with extendLock) is extended only by its holder, and no longer once another took it over', async () => {
    const lease = store as CacheStore & LeaseStore;
    const key = `${prefix}lease`;
    const token = await lease.acquireLock(key, 300);
    await expect(lease.extendLock(key, 'not-the-token', 10_000)).resolves.toBe(false);
    await expect(lease.extendLock(key, token!, 10_000)).resolves.toBe(true);
    // Extended: still held long after its first lifetime.
    expect((await store.get(key))?.ttlMs ?? 10_000).toBeGreaterThan(5_000);
    await expect(lease.acquireLock(key, 10_000)).resolves.toBeUndefined();
    await lease.releaseLock(key, token!);
    const other = await lease.acquireLock(key, 10_000);
    await expect(lease.extendLock(key, token!, 10_000)).resolves.toBe(false);
    await lease.releaseLock(key, other!);
  });
});
