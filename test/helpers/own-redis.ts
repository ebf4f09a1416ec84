/**
 * A test file's own redis-server, emptied before each test (quotas count in Redis, so each test starts
 * from none), and services started on it that are closed after each test. Registers its hooks in the
 * calling file; `start` starts a service with `env` over the file's own `base` environment.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { startRedis, type RedisProcess } from './redis-server.js';
import { startTestService, type TestService } from './service.js';

export function servicesOnOwnRedis(base: Record<string, string> = {}): { start: (env?: Record<string, string>, options?: Parameters<typeof startTestService>[1]) => Promise<TestService>; redisUrl: () => string } {
  let redis: RedisProcess;
  const services: TestService[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  beforeEach(async () => {
    const client = new Redis(redis.url);
    await client.flushdb();
    client.disconnect();
  });
  afterEach(async () => {
    for (const s of services.splice(0)) await s.close();
  });
  afterAll(async () => {
    await redis.stop();
  });
  return {
    redisUrl: () => redis.url,
    start: async (env = {}, options = {}) => {
      const svc = await startTestService({ CACHE_URL: redis.url, ...base, ...env }, options);
      services.push(svc);
      return svc;
    },
  };
}
