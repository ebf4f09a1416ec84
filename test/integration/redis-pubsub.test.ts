/**
 * Pub/sub over a real Redis that is not there yet: a subscription asked for while Redis cannot be
 * reached (an instance starting before Redis, or on a machine so busy that its first connection
 * times out) is made as soon as Redis answers. Every cross-instance notice (cache flush, user and key
 * changes, live quotes) rides on it.
 */
import { createServer, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisCacheStore } from '../../src/infra/cache/redis-cache-store.js';
import { freePort, startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

describe('pub/sub when Redis comes up late', () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  it('when the first connections of the subscriber fail, then the channel is subscribed once Redis is up and messages arrive', async () => {
    const port = await freePort();
    // Stands where Redis will be: takes each connection and drops it at once, counting them.
    let attempts = 0;
    const sockets = new Set<Socket>();
    const dropper = createServer((socket) => {
      attempts++;
      socket.destroy();
    });
    dropper.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((done) => dropper.listen(port, '127.0.0.1', done));

    const store = new RedisCacheStore({ host: '127.0.0.1', port });
    cleanup.push(() => store.close());
    const received: string[] = [];
    store.subscribe('test:late', (message) => received.push(message));
    // Two failed connections: the SUBSCRIBE was queued through at least one reconnect.
    await waitFor(() => attempts >= 2, { timeoutMs: 10_000, message: 'the subscriber to try twice' });
    await new Promise<void>((done) => dropper.close(() => done()));

    const redis: RedisProcess = await startRedis({ port });
    cleanup.push(() => redis.stop());
    const publisher = new Redis({ host: '127.0.0.1', port, lazyConnect: true });
    cleanup.push(async () => publisher.disconnect());
    await waitFor(
      async () => {
        await publisher.publish('test:late', 'hello');
        return received.includes('hello');
      },
      { timeoutMs: 10_000, intervalMs: 100, message: 'the message published after Redis came up' },
    );
    expect(await publisher.pubsub('NUMSUB', 'test:late')).toEqual(['test:late', 1]);
  });
});
