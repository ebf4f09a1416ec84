/**
 * DESIGN 13's promise measured: with a real Sentinel group (master, replica, three sentinels,
 * down-after 1 s) and a real cluster (three masters with a replica each), two service instances
 * under a bounded load of concurrent keep-alive clients, with reads that miss (history and search
 * over a pool of symbols, each a new window or query) next to cached quotes, indices, health and
 * admin status, a master SIGKILLed or frozen (SIGSTOP) for 5 s answers every request with a 2xx
 * within a second. The figures (requests, max, p99) are printed.
 *
 * Fresh processes per test: each one takes a master away.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { startLoad, summarize } from '../helpers/ha-load.js';
import { clusterStateOk, startRedisCluster, startSentinelGroup, type RedisClusterProcesses, type RedisProcess } from '../helpers/redis-server.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const REQUEST_LIMIT_MS = 1000;
/** Concurrent keep-alive clients per instance. */
const WORKERS = 4;
const FREEZE_MS = 5000;
/** How long the load goes on once the store is back, to catch a late second fallback. */
const AFTER_MS = 2000;

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

async function twoInstances(env: Record<string, string>): Promise<{ a: TestService; b: TestService; token: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'mds-ha-load-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const a = await startTestService(env, { dir, init: true });
  cleanups.push(() => a.close());
  const b = await startTestService(env, { dir });
  cleanups.push(() => b.close());
  return { a, b, token: await a.login(ADMIN.username, ADMIN.password) };
}

async function cacheMode(svc: TestService, token: string): Promise<{ mode: string; node: string | null }> {
  const res = await svc.fetch('/api/admin/status', { headers: { authorization: `Bearer ${token}` } });
  return ((await res.json()) as { data: { cache: { mode: string; node: string | null } } }).data.cache;
}

async function bothInRedis(instances: TestService[], token: string, node?: string): Promise<boolean> {
  const views = await Promise.all(instances.map((svc) => cacheMode(svc, token)));
  return views.every((v) => v.mode === 'redis' && (node === undefined || v.node === node));
}

/**
 * Runs the load on both instances, does `disrupt` once the load is warm, waits for `recovered`, lets
 * the load run `AFTER_MS` more, and judges and prints every request of the run.
 */
async function underLoad(name: string, instances: TestService[], token: string, disrupt: () => Promise<void>, recovered: () => Promise<boolean>) {
  const load = startLoad(instances, { workers: WORKERS, token, maxRequests: 100_000 });
  try {
    await waitFor(() => load.samples.length > 200, { timeoutMs: 15_000, message: `${name}: the load to warm up` });
    await disrupt();
    await waitFor(recovered, { timeoutMs: 30_000, intervalMs: 100, message: `${name}: both instances back in Redis` });
    const seen = load.samples.length;
    await waitFor(() => load.samples.length > seen + 100, { timeoutMs: 10_000, message: `${name}: load after the recovery` });
    await new Promise((resolve) => setTimeout(resolve, AFTER_MS));
  } finally {
    await load.stop();
  }
  const figures = summarize(load.samples, REQUEST_LIMIT_MS);
  console.log(`${name}: ${JSON.stringify({ requests: figures.requests, non2xx: figures.non2xx, over1s: figures.slow, max: figures.max, p99: figures.p99, byKind: figures.byKind })}`);
  // Every kind of read was exercised, the misses included.
  for (const kind of ['quote', 'indices', 'health', 'status', 'history', 'search']) expect(figures.byKind[kind] ?? 0, kind).toBeGreaterThan(10);
  expect(figures.examples, `${name}: requests over ${REQUEST_LIMIT_MS} ms or not 2xx`).toEqual([]);
  expect(figures.non2xx).toBe(0);
  expect(figures.slow).toBe(0);
  return figures;
}

describe('Sentinel under load', () => {
  async function setup() {
    const group = await startSentinelGroup({ failoverTimeoutMs: 3000 });
    cleanups.push(() => group.stop());
    const { a, b, token } = await twoInstances({ CACHE_URL: '', CACHE_SENTINELS: group.sentinelList, CACHE_SENTINEL_NAME: group.name });
    return { group, a, b, token };
  }

  it('when the master is SIGKILLed under a load with reads that miss, then no request takes over 1 s, every answer is 2xx, and both instances follow the new master', async () => {
    const { group, a, b, token } = await setup();
    const before = await group.master();
    await underLoad(
      'sentinel SIGKILL',
      [a, b],
      token,
      async () => (await group.masterProcess()).kill(),
      async () => {
        const now = await group.master().catch(() => before);
        return now !== before && (await bothInRedis([a, b], token, now));
      },
    );
  }, 90_000);

  it('when the master is frozen (SIGSTOP) for 5 s under a load with reads that miss, then no request takes over 1 s and every answer is 2xx', async () => {
    const { group, a, b, token } = await setup();
    let frozen: RedisProcess | undefined;
    cleanups.push(async () => frozen?.resume());
    await underLoad(
      'sentinel SIGSTOP 5 s',
      [a, b],
      token,
      async () => {
        frozen = await group.masterProcess();
        frozen.pause();
        await new Promise((resolve) => setTimeout(resolve, FREEZE_MS));
        frozen.resume();
      },
      async () => {
        const now = await group.master().catch(() => '');
        return now !== '' && (await bothInRedis([a, b], token, now));
      },
    );
  }, 90_000);
});

describe('Cluster under load', () => {
  async function setup() {
    const cluster = await startRedisCluster({ masters: 3, replicas: 1 });
    cleanups.push(() => cluster.stop());
    const { a, b, token } = await twoInstances({ CACHE_URL: '', CACHE_CLUSTER_NODES: cluster.nodeList });
    return { cluster, a, b, token };
  }

  /** A master other than the first node (which admin status names), as its process. */
  async function someMaster(cluster: RedisClusterProcesses): Promise<RedisProcess> {
    const seed = cluster.nodes[0]!;
    const client = new Redis({ host: '127.0.0.1', port: seed.port, lazyConnect: true, maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const lines = String(await client.cluster('NODES')).split('\n');
      for (const line of lines) {
        const [, address, flags] = line.split(' ');
        const port = Number(address?.split('@')[0]?.split(':')[1]);
        if (flags && /\bmaster\b/.test(flags) && !/myself|fail/.test(flags) && port !== seed.port) {
          const node = cluster.nodes.find((n) => n.port === port);
          if (node) return node;
        }
      }
      throw new Error(`no master besides the seed in: ${lines.join(' | ')}`);
    } finally {
      client.disconnect();
    }
  }

  const clusterOk = async (cluster: RedisClusterProcesses, skip?: RedisProcess) =>
    (await Promise.all(cluster.nodes.filter((n) => n !== skip).map((n) => clusterStateOk(n.port)))).every(Boolean);

  it('when a master is SIGKILLed under a load with reads that miss, then no request takes over 1 s, every answer is 2xx, and both instances return to Redis once its replica took over', async () => {
    const { cluster, a, b, token } = await setup();
    let killed: RedisProcess | undefined;
    await underLoad(
      'cluster SIGKILL',
      [a, b],
      token,
      async () => {
        killed = await someMaster(cluster);
        await killed.kill();
      },
      async () => (await clusterOk(cluster, killed)) && (await bothInRedis([a, b], token)),
    );
  }, 90_000);

  it('when a master is frozen (SIGSTOP) for 5 s under a load with reads that miss, then no request takes over 1 s and every answer is 2xx', async () => {
    const { cluster, a, b, token } = await setup();
    let frozen: RedisProcess | undefined;
    cleanups.push(async () => frozen?.resume());
    await underLoad(
      'cluster SIGSTOP 5 s',
      [a, b],
      token,
      async () => {
        frozen = await someMaster(cluster);
        frozen.pause();
        await new Promise((resolve) => setTimeout(resolve, FREEZE_MS));
        frozen.resume();
      },
      async () => (await clusterOk(cluster)) && (await bothInRedis([a, b], token)),
    );
  }, 90_000);
});
