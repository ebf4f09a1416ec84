/**
 * Negative answers stay bounded: 100,000 distinct made-up symbols asked through the market-data
 * service (with the simulated provider, which knows none of them) over a real ResilientCache on a
 * redis-server this file starts. Redis keys and the in-process structure stay under the configured
 * bound, and a symbol asked again is still answered from the structure, without the upstream.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { UnknownSymbolError } from '../../src/domain/errors.js';
import type { MarketDataProvider } from '../../src/domain/ports/market-data.js';
import { createCache, type ResilientCache } from '../../src/infra/cache/index.js';
import { createLogger } from '../../src/infra/logger.js';
import { SimulatedMarketDataProvider } from '../../src/infra/market/simulated-market-data-provider.js';
import { MarketDataService } from '../../src/services/market-data.js';
import { RepresentationCache } from '../../src/services/cache/representation-cache.js';
import { BUCKETS, UnknownSymbols } from '../../src/services/unknown-symbols.js';
import { connectFailFast, startRedis, type RedisProcess } from '../helpers/redis-server.js';

const logger = createLogger({ level: 'silent' });
const BOUND = 1_000;
const SYMBOLS = 100_000;
const CONCURRENCY = 64;
const junk = (i: number) => `ZZJUNK${i}`;

/** A full garbage collection, so heap figures show what is kept rather than what is not yet collected. */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heapMiB = () => {
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
};

let redis: RedisProcess;
let raw: Redis;
let cache: ResilientCache;
let unknown: UnknownSymbols;
let market: MarketDataService;
let upstreamCalls = 0;

beforeAll(async () => {
  redis = await startRedis();
  const config = loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(redis.port), CACHE_UNKNOWN_MAX_SYMBOLS: String(BOUND) }, { readFile: false });
  cache = createCache(config.cache, logger);
  await cache.start();
  raw = await connectFailFast(redis.port);
  const simulated = new SimulatedMarketDataProvider();
  const provider: MarketDataProvider = {
    name: simulated.name,
    getQuote: (symbol) => {
      upstreamCalls += 1;
      return simulated.getQuote(symbol);
    },
    getHistory: (query) => simulated.getHistory(query),
    search: (q, limit) => simulated.search(q, limit),
  };
  const engine = new RepresentationCache({ cache, namespace: provider.name, staleIfErrorMs: 0, logger, broadcast: cache });
  unknown = new UnknownSymbols({ store: cache, provider: provider.name, maxSymbols: config.cache.unknownMaxSymbols, broadcast: cache, logger });
  market = new MarketDataService({ engine, provider, indices: ['^GSPC'], quoteTtlMs: 60_000, unknown });
});
afterAll(async () => {
  raw.disconnect();
  await cache.close();
  await redis.stop();
});

/** Members remembered in Redis: the sum over the provider's buckets. */
async function membersInRedis(): Promise<number> {
  let members = 0;
  for (const key of await raw.keys('mds:v1:unknown:simulated:*')) members += Object.keys(JSON.parse((await raw.get(key)) ?? '{}')).length;
  return members;
}

describe('unknown symbols', () => {
  it('when 100,000 distinct unknown symbols are asked for, then Redis keys and the in-process structure stay under the bound', { timeout: 600_000 }, async () => {
    const heapBefore = heapMiB();
    const rssBefore = process.memoryUsage().rss;
    const started = Date.now();
    let next = 0;
    let unknownAnswers = 0;
    const worker = async () => {
      while (next < SYMBOLS) {
        const symbol = junk(next++);
        await market.getQuote(symbol).then(
          () => undefined,
          (err: unknown) => {
            if (err instanceof UnknownSymbolError) unknownAnswers += 1;
            else throw err;
          },
        );
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const elapsedMs = Date.now() - started;
    const heapAfter = heapMiB();
    const rssAfter = process.memoryUsage().rss;
    const dbsize = await raw.dbsize();
    const inRedis = await membersInRedis();
    console.info(
      `unknown symbols: ${SYMBOLS} asked in ${elapsedMs} ms; DBSIZE ${dbsize} (bound ${BUCKETS} keys); members in Redis ${inRedis} and in memory ${unknown.size} (bound ${BOUND}); ` +
        `RSS ${(rssBefore / 2 ** 20).toFixed(1)} MiB before, ${(rssAfter / 2 ** 20).toFixed(1)} MiB after; ` +
        `heap in use after a full GC ${heapBefore.toFixed(1)} MiB before, ${heapAfter.toFixed(1)} MiB after`,
    );

    expect(unknownAnswers).toBe(SYMBOLS);
    expect(upstreamCalls).toBe(SYMBOLS);
    expect(dbsize).toBeLessThanOrEqual(BUCKETS);
    expect(inRedis).toBeLessThanOrEqual(BOUND);
    expect(inRedis).toBeGreaterThan(BOUND / 2);
    expect(unknown.size).toBeLessThanOrEqual(BOUND);
    // What the process keeps does not grow with the junk asked for (a key's worth per symbol would be tens of MiB).
    expect(heapAfter - heapBefore).toBeLessThan(8);
    // Each bucket lives as long as its newest answer: an hour.
    const ttl = await raw.pttl('mds:v1:unknown:simulated:0');
    expect(ttl).toBeGreaterThan(3_500_000);
    expect(ttl).toBeLessThanOrEqual(3_600_000);
  });

  it('when a symbol just found unknown is asked for again, then the answer is 404 without asking the upstream', async () => {
    const calls = upstreamCalls;

    await expect(market.getQuote(junk(SYMBOLS - 1))).rejects.toBeInstanceOf(UnknownSymbolError);
    await expect(market.getQuotes(`${junk(SYMBOLS - 2)},${junk(SYMBOLS - 3)}`)).rejects.toBeInstanceOf(UnknownSymbolError);

    expect(upstreamCalls).toBe(calls);
  });

  it('when another instance asks for a symbol this one found unknown, then it answers from Redis without asking the upstream', async () => {
    const symbol = junk(SYMBOLS - 4);
    const calls = upstreamCalls;
    const other = new UnknownSymbols({ store: cache, provider: 'simulated', maxSymbols: BOUND, logger });

    expect(await other.has(`quote:${symbol}`)).toBe(true);
    expect(await other.has('quote:NEVER-ASKED')).toBe(false);
    expect(upstreamCalls).toBe(calls);
  });

  it('when a release before left its unknown marker under its own key or under this format\'s, then it is never read: the upstream is asked', async () => {
    await raw.set('mds:v1:quote:simulated:LEGACYJUNK', '!unknown', 'PX', 60_000);
    await raw.set('mds:v2:quote:simulated:LEGACYJUNK', '!unknown', 'PX', 60_000);
    const calls = upstreamCalls;

    await expect(market.getQuote('legacyjunk')).rejects.toBeInstanceOf(UnknownSymbolError);
    expect(upstreamCalls).toBe(calls + 1);
  });

  it('when the cache is flushed, then the negative answers go too and the upstream is asked again', async () => {
    await market.flush();

    expect(await raw.keys('mds:v1:unknown:*')).toEqual([]);
    const calls = upstreamCalls;
    await expect(market.getQuote(junk(SYMBOLS - 1))).rejects.toBeInstanceOf(UnknownSymbolError);
    expect(upstreamCalls).toBe(calls + 1);
  });
});
