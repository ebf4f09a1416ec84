/**
 * Redis Sentinel and Redis Cluster against real processes this file starts on loopback ports: a
 * master, a replica and three sentinels; a three-master cluster. A failover or a dead node under
 * load must be a short fallback to memory at worst: no request fails or waits more than a second.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Cluster } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { LoginThrottle } from '../../src/infra/auth/login-throttle.js';
import { RedisSharedCounters } from '../../src/infra/counters/redis-shared-counters.js';
import { createCache, type ResilientCache } from '../../src/infra/cache/index.js';
import { TooManyRequestsError } from '../../src/domain/errors.js';
import { documentedStatuses } from '../helpers/contract-status.js';
import { captureLogs } from '../helpers/log-capture.js';
import { clusterStateOk, freePort, startRedisCluster, startSentinelGroup, type RedisClusterProcesses, type SentinelGroup } from '../helpers/redis-server.js';
import { spawnServe } from '../helpers/serve-process.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const REQUEST_LIMIT_MS = 1000;

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function cacheWith(env: Record<string, string>): ResilientCache {
  const { logger } = captureLogs();
  const config = loadConfig(env, { readFile: false });
  const cache = createCache(config.cache, logger, { commandTimeoutMs: 300, connectTimeoutMs: 500, startTimeoutMs: 2000 });
  cleanups.push(() => cache.close());
  return cache;
}

interface Sample {
  name: string;
  path: string;
  method: 'get' | 'post';
  status: number;
  ms: number;
  error?: string;
}

/** Keeps `workers` loops of reads, admin status reads and logins going until stopped. */
function loadOn(svc: TestService, token: string, workers = 3) {
  const samples: Sample[] = [];
  let running = true;
  const calls: Array<{ name: string; method: 'get' | 'post'; path: string; init: () => RequestInit; url: string }> = [
    { name: 'indices', method: 'get', path: '/api/indices', url: '/api/indices', init: () => ({}) },
    {
      name: 'status',
      method: 'get',
      path: '/api/admin/status',
      url: '/api/admin/status',
      init: () => ({ headers: { authorization: `Bearer ${token}` } }),
    },
    {
      name: 'login',
      method: 'post',
      path: '/api/auth/login',
      url: '/api/auth/login',
      init: () => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) }),
    },
  ];
  const loops = Array.from({ length: workers }, async (_, w) => {
    for (let i = w; running; i++) {
      const call = calls[i % calls.length]!;
      const started = performance.now();
      try {
        const res = await svc.fetch(call.url, { ...call.init(), signal: AbortSignal.timeout(5_000) });
        await res.arrayBuffer();
        samples.push({ name: call.name, path: call.path, method: call.method, status: res.status, ms: performance.now() - started });
      } catch (err) {
        samples.push({ name: call.name, path: call.path, method: call.method, status: 0, ms: performance.now() - started, error: String(err) });
      }
    }
  });
  return {
    samples,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** Every sample answered with a status its operation documents, never a 5xx, none slower than the limit. */
function expectHealthyLoad(samples: Sample[]): void {
  expect(samples.length).toBeGreaterThan(30);
  const bad = samples.filter((s) => s.status === 0 || s.status >= 500 || !documentedStatuses(s.method, s.path).includes(s.status));
  expect(bad.slice(0, 5)).toEqual([]);
  const slow = samples.filter((s) => s.ms > REQUEST_LIMIT_MS);
  expect(slow.map((s) => `${s.name} ${Math.round(s.ms)} ms`).slice(0, 5)).toEqual([]);
  // The workload really exercised every kind of call.
  for (const name of ['indices', 'status', 'login']) expect(samples.filter((s) => s.name === name && s.status === 200).length).toBeGreaterThan(5);
}

async function adminCache(svc: TestService, token: string) {
  const res = await svc.fetch('/api/admin/status', { headers: { authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: { cache: { mode: string; connected: boolean; topology: string; node: string | null } } }).data.cache;
}

describe('Redis Sentinel', () => {
  let group: SentinelGroup;
  beforeAll(async () => {
    group = await startSentinelGroup();
  }, 60_000);
  afterAll(async () => {
    await group?.stop();
  });

  it('when the master fails over under a stream of reads and logins, then no request fails or takes over 1 s and the service is back on the new master within 5 s', async () => {
    const svc = await startTestService({ CACHE_URL: '', CACHE_SENTINELS: group.sentinelList, CACHE_SENTINEL_NAME: group.name }, { init: true });
    cleanups.push(() => svc.close());
    const token = await svc.login(ADMIN.username, ADMIN.password);
    const before = await group.master();
    expect(await adminCache(svc, token)).toMatchObject({ mode: 'redis', connected: true, topology: 'sentinel', node: before });
    const health = (await (await svc.fetch('/api/health')).json()) as { cache: boolean };
    expect(health.cache).toBe(true);

    const load = loadOn(svc, token);
    await waitFor(() => load.samples.length > 30, { timeoutMs: 10_000, message: 'load to warm up' });
    const after = await group.failover();
    const failedOverAt = performance.now();
    expect(after).not.toBe(before);
    await waitFor(
      async () => {
        const cache = await adminCache(svc, token);
        return cache.mode === 'redis' && cache.node === after;
      },
      { timeoutMs: 5_000, intervalMs: 50, message: 'admin status to show the new master in Redis mode' },
    );
    const backAfterMs = performance.now() - failedOverAt;
    // Keep the load going a little on the new master before judging it.
    const seen = load.samples.length;
    await waitFor(() => load.samples.length > seen + 30, { timeoutMs: 10_000, message: 'load on the new master' });
    await load.stop();

    expect(backAfterMs).toBeLessThan(5_000);
    expectHealthyLoad(load.samples);
    // Writes land on the new master: the login throttle and cache keys live there now.
    expect(await adminCache(svc, token)).toMatchObject({ mode: 'redis', topology: 'sentinel', node: after });
  }, 120_000);

  it('when mds serve runs on Sentinel and gets SIGTERM, then it exits 0 within seconds (the failover watch on the sentinels is closed too)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mds-sentinel-stop-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const env = {
      PATH: process.env.PATH,
      HOME: dir,
      NODE_ENV: 'test',
      DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
      SECRET_KEY: 'sentinel-stop-secret-key-0123456789abcdef',
      CACHE_SENTINELS: group.sentinelList,
      CACHE_SENTINEL_NAME: group.name,
      METRICS_PORT: '0',
      REFRESH_INTERVAL_SECONDS: '0',
    };
    const serve = await spawnServe(['--port', String(await freePort())], { env });
    cleanups.push(async () => serve.child.kill('SIGKILL'));
    await waitFor(async () => ((await (await fetch(`${serve.url}/api/health`)).json()) as { cache: boolean }).cache, {
      timeoutMs: 10_000,
      intervalMs: 100,
      message: 'the service on the Sentinel master',
    });
    const exit = await Promise.race([serve.stop('SIGTERM'), new Promise<string>((done) => setTimeout(() => done('still running 10 s after SIGTERM'), 10_000))]);
    expect(exit).toBe(0);
  }, 30_000);

  it('when a message is published through Sentinel, then another instance receives it, before and after a failover', async () => {
    const env = { CACHE_SENTINELS: group.sentinelList, CACHE_SENTINEL_NAME: group.name };
    const a = cacheWith(env);
    const b = cacheWith(env);
    await Promise.all([a.start(), b.start()]);
    const received: string[] = [];
    const channel = `test:ha:${randomUUID()}`;
    b.subscribe(channel, (m) => received.push(m));
    const delivered = async (message: string) =>
      waitFor(
        async () => {
          await a.publish(channel, message);
          return received.includes(message);
        },
        { timeoutMs: 8_000, intervalMs: 100, message: `delivery of ${message}` },
      );
    await delivered('before');
    const after = await group.failover();
    await waitFor(() => a.status().node === after && b.status().node === after, { timeoutMs: 5_000, message: 'both caches on the new master' });
    await delivered('after');
    expect(received).toContain('before');
    expect(received).toContain('after');
  }, 120_000);
});

describe('Redis Cluster', () => {
  let cluster: RedisClusterProcesses;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  function clusterCache(): ResilientCache {
    return cacheWith({ CACHE_CLUSTER_NODES: cluster.nodeList });
  }

  /** Which master holds `key` now, as a node port. */
  async function ownerPort(key: string): Promise<number> {
    const raw = new Cluster(cluster.nodeList.split(',').map((a) => ({ host: '127.0.0.1', port: Number(a.split(':')[1]) })), { lazyConnect: true });
    raw.on('error', () => undefined);
    cleanups.push(async () => raw.disconnect());
    await raw.connect();
    const slot = Number(await raw.cluster('KEYSLOT', key));
    const range = (await raw.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to);
    return Number(range?.[2]?.[1]);
  }

  it('when the cache runs on a cluster, then get, set, locks and status work and name the topology', async () => {
    const cache = clusterCache();
    await cache.start();
    expect(cache.status()).toMatchObject({ mode: 'redis', connected: true, topology: 'cluster', node: cluster.nodeList.split(',')[0] });
    const prefix = `mds:v1:test:${randomUUID()}:`;
    await cache.set(`${prefix}a`, 'value-a', 60_000);
    // Another client of the cluster sees the value: it is in Redis, not only in this process.
    const other = clusterCache();
    await other.start();
    expect((await other.get(`${prefix}a`))?.value).toBe('value-a');
    const token = await cache.acquireLock(`${prefix}lock`, 10_000);
    expect(token).toEqual(expect.any(String));
    await expect(other.acquireLock(`${prefix}lock`, 10_000)).resolves.toBeUndefined();
    await cache.releaseLock(`${prefix}lock`, token!);
    await expect(other.acquireLock(`${prefix}lock`, 10_000)).resolves.toEqual(expect.any(String));
    expect(cache.status().mode).toBe('redis');
  });

  it('when keys spread over every master, then deleteByPrefix removes them from all of them and nothing else', async () => {
    const cache = clusterCache();
    await cache.start();
    const prefix = `mds:v1:test:${randomUUID()}:`;
    const keys = Array.from({ length: 60 }, (_, i) => `${prefix}${i}`);
    await Promise.all(keys.map((k) => cache.set(k, 'v', 60_000)));
    const owners = new Set(await Promise.all(keys.map(ownerPort)));
    expect(owners.size).toBe(3);
    const outside = `mds:v1:test:other:${randomUUID()}`;
    await cache.set(outside, 'keep', 60_000);

    await expect(cache.deleteByPrefix(prefix)).resolves.toBe(60);

    const other = clusterCache();
    await other.start();
    for (const key of keys) expect(await other.get(key)).toBeUndefined();
    expect((await other.get(outside))?.value).toBe('keep');
    expect(cache.status().mode).toBe('redis');
  });

  it('when one instance publishes on a cluster, then another receives it', async () => {
    const a = clusterCache();
    const b = clusterCache();
    await Promise.all([a.start(), b.start()]);
    const received: string[] = [];
    const channel = `test:ha:${randomUUID()}`;
    b.subscribe(channel, (m) => received.push(m));
    await waitFor(
      async () => {
        await a.publish(channel, 'hello');
        return received.includes('hello');
      },
      { timeoutMs: 8_000, intervalMs: 100, message: 'delivery over the cluster' },
    );
    expect(received.filter((m) => m === 'hello').length).toBeGreaterThan(0);
  });

  it('when failed logins are counted over the cluster, then a second instance sees the block', async () => {
    const cache = clusterCache();
    await cache.start();
    const redis = cache.redisClient();
    expect(redis).toBeInstanceOf(Cluster);
    const first = new LoginThrottle({ counters: new RedisSharedCounters({ redis }), maxFailures: 3, blockMs: 60_000 });
    const second = new LoginThrottle({ counters: new RedisSharedCounters({ redis }), maxFailures: 3, blockMs: 60_000 });
    const user = `user-${randomUUID()}`;
    for (let i = 0; i < 3; i++) await first.recordFailure(user, '192.0.2.1');
    await expect(second.check(user, '192.0.2.1')).rejects.toBeInstanceOf(TooManyRequestsError);
    // The counter is in the cluster, not in the insurance memory of `first`.
    const raw = redis as Cluster;
    expect(Number(await raw.exists(`mds:v1:throttle:user:${user}`))).toBe(1);
  });

  it('when a master is killed under load, then requests keep answering from memory within 1 s each, and Redis is used again once it is back', async () => {
    const svc = await startTestService({ CACHE_URL: '', CACHE_CLUSTER_NODES: cluster.nodeList }, { init: true });
    cleanups.push(() => svc.close());
    const token = await svc.login(ADMIN.username, ADMIN.password);
    expect(await adminCache(svc, token)).toMatchObject({ mode: 'redis', connected: true, topology: 'cluster', node: cluster.nodeList.split(',')[0] });

    const load = loadOn(svc, token);
    await waitFor(() => load.samples.length > 30, { timeoutMs: 10_000, message: 'load to warm up' });
    // The last node, so the seed reported in status stays alive.
    const logsBeforeKill = svc.logs.length;
    await cluster.nodes[2]!.kill();
    await waitFor(async () => (await adminCache(svc, token)).mode === 'memory', {
      timeoutMs: 10_000,
      intervalMs: 50,
      message: 'fallback to memory',
    });
    const seen = load.samples.length;
    // Through the moment the cluster itself marks the node failed (cluster-node-timeout): before it,
    // CLUSTER INFO on the survivors still says ok.
    await waitFor(async () => !(await clusterStateOk(cluster.nodes[0]!.port)), { timeoutMs: 15_000, intervalMs: 100, message: 'the cluster to see the node fail' });
    const afterFail = load.samples.length;
    await waitFor(() => load.samples.length > Math.max(seen + 60, afterFail + 60), { timeoutMs: 15_000, message: 'load after the kill' });
    expect(load.samples.slice(seen).every((s) => s.status === 200)).toBe(true);
    // One outage, one switch: no return to Redis while a master is still down (the cluster client
    // says 'ready' again meanwhile; only a PING of every master may bring the service back).
    const switches = svc.logs.slice(logsBeforeKill).filter((l) => typeof l.msg === 'string' && /^Redis (is back|connection lost)/.test(l.msg));
    expect(switches.map((l) => l.msg as string).filter((m) => m.startsWith('Redis is back'))).toEqual([]);
    expect(await adminCache(svc, token)).toMatchObject({ mode: 'memory' });

    // The node comes back with its cluster identity (its nodes file): the service returns to Redis.
    await cluster.nodes[2]!.restart();
    await waitFor(async () => (await adminCache(svc, token)).mode === 'redis', {
      timeoutMs: 20_000,
      intervalMs: 100,
      message: 'return to Redis',
    });
    await load.stop();
    expectHealthyLoad(load.samples);
  }, 60_000);
});
