/**
 * `node --import tsx bench/fill-bytes.ts`: what one cache fill of an indicators-sized answer (2 MB of
 * JSON) writes to Redis, read from the server's own counters (INFO stats `total_net_input_bytes` and
 * `total_commands_processed`, less the INFO calls themselves) on a redis-server of its own, with
 * stale-if-error on. Prints each of three fills and the keys they left.
 */
import { Redis } from 'ioredis';
import { loadConfig } from '../src/config.js';
import { createCache } from '../src/infra/cache/index.js';
import { createLogger } from '../src/infra/logger.js';
import { RepresentationCache } from '../src/services/cache/representation-cache.js';
import { startRedis } from '../test/helpers/redis-server.js';

const redis = await startRedis();
const logger = createLogger({ level: 'silent' });
const config = loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(redis.port) }, { readFile: false });
const cache = createCache(config.cache, logger);
await cache.start();
const engine = new RepresentationCache({ cache, broadcast: cache, namespace: 'simulated', staleIfErrorMs: 300_000, logger });
const body = JSON.stringify({ success: true, data: { values: Array.from({ length: 60_000 }, (_, i) => ({ t: 1_700_000_000 + i * 60, v: 123.456789 + i })) } });
const raw = new Redis({ port: redis.port, host: '127.0.0.1' });
const stat = async (name: string) => Number(new RegExp(`${name}:(\\d+)`).exec(await raw.info('stats'))![1]);
try {
  for (let i = 0; i < 3; i++) {
    const bytesBefore = await stat('total_net_input_bytes');
    const commandsBefore = await stat('total_commands_processed');
    await engine.read({ kind: 'indicators', params: `RUN${i}`, load: async () => ({ outcome: 'found', value: body, ttlMs: 60_000 }) });
    const bytes = (await stat('total_net_input_bytes')) - bytesBefore;
    // Less the two INFO calls made after the first count.
    const commands = (await stat('total_commands_processed')) - commandsBefore - 2;
    console.log(`fill ${i}: body ${Buffer.byteLength(body)} B, Redis bytes in ${bytes} B, commands ${commands}`);
  }
  console.log(`keys after 3 fills: ${(await raw.keys('*')).sort().join(' ')}`);
} finally {
  raw.disconnect();
  await cache.close();
  await redis.stop();
}
