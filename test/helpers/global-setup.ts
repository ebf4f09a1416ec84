/**
 * Vitest global setup: one real redis-server for the whole run, on a free loopback port.
 * Tests read its port with `inject('redisPort')`; tests that stop or kill Redis start their own.
 */
import type { TestProject } from 'vitest/node';
import { startRedis } from './redis-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Port of the shared redis-server (127.0.0.1, no password, persistence off). */
    redisPort: number;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await startRedis();
  project.provide('redisPort', redis.port);
  return async () => {
    await redis.stop();
  };
}
