/**
 * An ioredis client that ends (status 'end': no connection, no reconnect timer) is how an instance
 * stayed in memory mode for good after a Sentinel failover. The store connects a client it owns again
 * whenever it ends before `close()`; here the ending is forced with the client's own `disconnect()`,
 * against a real redis-server. A dropped subscriber connection is a gap in delivery: `onResync` fires
 * once it is subscribed again.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisCacheStore } from '../../src/infra/cache/redis-cache-store.js';
import { MemoryCacheStore } from '../../src/infra/cache/memory-cache-store.js';
import { ResilientCache } from '../../src/infra/cache/resilient-cache.js';
import { captureLogs } from '../helpers/log-capture.js';
import { loadConfig } from '../../src/config.js';
import { createCache } from '../../src/infra/cache/index.js';
import { startRedis, startRedisCluster } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup() {
  const server = await startRedis();
  cleanups.push(() => server.stop());
  const redis = new RedisCacheStore({ host: '127.0.0.1', port: server.port, commandTimeoutMs: 300, connectTimeoutMs: 500 });
  const { logger } = captureLogs();
  const cache = new ResilientCache({ redis, memory: new MemoryCacheStore({ maxEntries: 100 }), logger, probeIntervalMs: 100 });
  cleanups.push(() => cache.close());
  await cache.start();
  const publisher = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true });
  publisher.on('error', () => undefined);
  cleanups.push(async () => publisher.disconnect());
  return { server, redis, cache, publisher };
}

describe('a client that ends is connected again', () => {
  it('when the command client ends without close(), then it reconnects by itself and the cache returns to Redis', async () => {
    const { redis, cache } = await setup();
    expect(cache.status().mode).toBe('redis');
    const ended = new Promise<void>((resolve) => redis.client.once('end', () => resolve()));

    (redis.client as Redis).disconnect();
    await ended;
    await waitFor(() => cache.status().mode === 'memory', { timeoutMs: 1_000, message: 'the fallback to memory' });
    await waitFor(() => cache.status().mode === 'redis' && redis.client.status === 'ready', { timeoutMs: 5_000, message: 'the client back and the cache in Redis' });
    await cache.set('mds:v1:test:revived', 'yes', 10_000);
    expect((await redis.get('mds:v1:test:revived'))?.value).toBe('yes');
  });

  it('when the subscriber connection is dropped, then onResync fires once it is back and subscribed, and messages arrive again', async () => {
    const { cache, publisher } = await setup();
    const received: string[] = [];
    let resyncs = 0;
    cache.onResync(() => resyncs++);
    cache.subscribe('test:revive', (message) => received.push(message));
    await waitFor(async () => (await publisher.pubsub('NUMSUB', 'test:revive'))[1] === 1 && cache.live(), { timeoutMs: 5_000, message: 'the subscription' });
    const resyncsBefore = resyncs;

    // The only subscribed connection on the server is the store's subscriber: end it from the client side.
    const clients = String(await publisher.client('LIST'))
      .split('\n')
      .filter((line) => /\bsub=1\b/.test(line));
    expect(clients).toHaveLength(1);
    const id = /\bid=(\d+)/.exec(clients[0]!)?.[1];
    // CLIENT KILL closes it from the server side: ioredis reconnects by its own retry strategy, and
    // the store must report the gap and the return.
    await publisher.client('KILL', 'ID', id!);
    // A resync after the kill is the gap seen and closed: live() went false and came back.
    await waitFor(() => cache.live() && resyncs > resyncsBefore, { timeoutMs: 5_000, message: 'live again with a resync' });
    expect(resyncs).toBe(resyncsBefore + 1);
    await waitFor(
      async () => {
        await publisher.publish('test:revive', JSON.stringify({ from: 'other', message: String(received.length) }));
        return received.length > 0;
      },
      { timeoutMs: 5_000, intervalMs: 50, message: 'a message after the subscriber came back' },
    );
  });
});

describe('the subscriber of a cluster', () => {
  it('when the node it subscribed on is killed, then onResync fires once it subscribed on another node (however short the gap), and messages arrive again', async () => {
    const cluster = await startRedisCluster({ masters: 3, replicas: 1 });
    cleanups.push(() => cluster.stop());
    const { logger } = captureLogs();
    const config = loadConfig({ CACHE_CLUSTER_NODES: cluster.nodeList }, { readFile: false });
    const cache = createCache(config.cache, logger, { commandTimeoutMs: 300, connectTimeoutMs: 500, startTimeoutMs: 3000 });
    cleanups.push(() => cache.close());
    await cache.start();
    let resyncs = 0;
    cache.onResync(() => resyncs++);
    const received: string[] = [];
    cache.subscribe('test:cluster-revive', (m) => received.push(m));
    await waitFor(() => cache.live(), { timeoutMs: 5_000, message: 'the subscription' });

    // Which node holds the subscription: the one whose CLIENT LIST has a connection with sub=1.
    const holders: number[] = [];
    for (const node of cluster.nodes) {
      const raw = new Redis({ host: '127.0.0.1', port: node.port, lazyConnect: true });
      raw.on('error', () => undefined);
      await raw.connect();
      if (/\bsub=1\b/.test(String(await raw.client('LIST')))) holders.push(node.port);
      raw.disconnect();
    }
    expect(holders).toHaveLength(1);
    const resyncsBefore = resyncs;
    const seen = [cache.live()];
    const sampler = setInterval(() => {
      if (seen.at(-1) !== cache.live()) seen.push(cache.live());
    }, 5);
    cleanups.push(async () => clearInterval(sampler));
    await cluster.nodes.find((n) => n.port === holders[0])!.kill();

    await waitFor(() => resyncs > resyncsBefore && cache.live(), { timeoutMs: 20_000, message: 'a resync once subscribed elsewhere' }).catch((err: Error) => {
      const internal = ((cache as unknown as { redisClient(): unknown }).redisClient() as { status: string });
      throw new Error(`${err.message} ${JSON.stringify(cache.status())} live=${cache.live()} seen=${seen.join(',')} main=${internal.status}`);
    });
    clearInterval(sampler);
    // The last change may have come after the sampler's last tick: the state now ends the record.
    if (seen.at(-1) !== cache.live()) seen.push(cache.live());
    // The move may take less time than the sampler's 5 ms: only the end state is certain.
    expect(seen[0]).toBe(true);
    expect(seen.at(-1)).toBe(true);
    // One for the move; another when the killed node was a master and the cache fell back meanwhile.
    expect(resyncs - resyncsBefore).toBeGreaterThanOrEqual(1);
    const alive = cluster.nodes.find((n) => n.port !== holders[0])!;
    const publisher = new Redis({ host: '127.0.0.1', port: alive.port, lazyConnect: true });
    publisher.on('error', () => undefined);
    cleanups.push(async () => publisher.disconnect());
    await waitFor(
      async () => {
        await publisher.publish('test:cluster-revive', JSON.stringify({ from: 'other', message: String(received.length) }));
        return received.length > 0;
      },
      { timeoutMs: 5_000, intervalMs: 50, message: 'a message after the move' },
    );
  }, 60_000);
});
