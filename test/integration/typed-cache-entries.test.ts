/**
 * What the representation cache stores, over a real Redis: outcomes are typed fields of the stored
 * entry (never a prefix of a body), a quote's parts travel with it to another instance, and the kind of
 * an answer is the read's, never parsed back from its key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { tooManyCandles } from '../../src/domain/candle-limits.js';
import type { Quote } from '../../src/domain/ports/market-data.js';
import { createCache } from '../../src/infra/cache/index.js';
import type { ResilientCache } from '../../src/infra/cache/resilient-cache.js';
import { createLogger } from '../../src/infra/logger.js';
import { decodeQuote, writeQuoteBody } from '../../src/services/market-data/quote-body.js';
import type { CacheRead } from '../../src/services/cache/cache-types.js';
import { RepresentationCache, textOf } from '../../src/services/cache/representation-cache.js';
import { decodeEntry } from '../../src/services/cache/cache-entry.js';
import { sentBodyOf } from '../../src/domain/sent-json.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';

const logger = createLogger({ level: 'silent' });
const AT = '2026-11-26T16:00:00.000Z';

let redis: RedisProcess;
const caches: ResilientCache[] = [];

async function newCache(): Promise<ResilientCache> {
  const config = loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(redis.port) }, { readFile: false });
  const cache = createCache(config.cache, logger);
  await cache.start();
  caches.push(cache);
  return cache;
}

function engine(cache: ResilientCache): RepresentationCache {
  return new RepresentationCache({ cache, namespace: 'simulated', staleIfErrorMs: 0, logger, localMaxAgeMs: 0 });
}

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  for (const c of caches) await c.close();
  await redis.stop();
});

describe('typed cache entries', () => {
  it('when a history window is refused for too many candles, then the refusal is stored as a typed entry and another instance answers it without loading', async () => {
    const refusal = tooManyCandles(7200, 'answer')!;
    let loads = 0;
    const read = (): CacheRead => ({
      kind: 'history',
      params: 'BTC-USD:5m:1mo',
      load: async () => {
        loads++;
        return { outcome: 'refused', refusal, ttlMs: 60_000 };
      },
    });
    const cache = await newCache();

    await expect(engine(cache).read(read())).resolves.toEqual({ outcome: 'refused', refusal, cacheStatus: 'MISS' });
    const stored = await cache.get('mds:v2:history:simulated:BTC-USD:5m:1mo');
    expect(JSON.parse(stored!.value)).toEqual({ outcome: 'refused', graceMs: 0, refusal });
    expect(decodeEntry(stored!.value, stored!.ttlMs, Date.now())?.value).toEqual({ outcome: 'refused', refusal });

    const other = engine(await newCache());
    await expect(other.read(read())).resolves.toEqual({ outcome: 'refused', refusal, cacheStatus: 'HIT' });
    expect(loads).toBe(1);
  });

  it('when a quote is filled on one instance, then another reads the same bytes with the quote JSON, source and time from its parts, and the kind of the read', async () => {
    const quote = { symbol: 'MSFT', name: 'Microsoft ,"source":"x"', price: 410.2 } as unknown as Quote;
    const written = writeQuoteBody(quote, 'yahoo', AT);
    const read = (): CacheRead => ({ kind: 'quote', params: 'MSFT', load: async () => ({ outcome: 'found', value: written.value, parts: written.parts, ttlMs: 60_000 }) });
    const first = await engine(await newCache()).read(read());

    const rep = await engine(await newCache()).read(read());
    if (rep.outcome !== 'found' || first.outcome !== 'found') throw new Error('expected quotes');
    expect(rep.cacheStatus).toBe('HIT');
    expect(rep.kind).toBe('quote');
    expect(rep.body.equals(first.body)).toBe(true);
    expect(textOf(rep)).toBe(JSON.stringify({ success: true, data: quote, source: 'yahoo', updated_at: AT }));
    const decoded = decodeQuote(rep);
    expect(decoded.json).toBe(JSON.stringify(quote));
    expect(decoded.source).toBe('yahoo');
    expect(decoded.updatedAt).toBe(AT);
  });

  it('when an answer arrives as its bytes (written on a compute thread), then they are stored as they are and another instance reads the same value, bytes and ETag, with parts or without', async () => {
    const value = JSON.stringify({ success: true, data: { symbol: 'BTC-USD', values: [238.963, 'ünïcødé'] }, source: 'simulated', updated_at: AT });
    const sent = sentBodyOf(value);
    const from = value.indexOf('"data":') + 7;
    const parts = { data: { from, to: value.indexOf(',"source"') }, source: 'simulated', updatedAt: AT };
    for (const [params, withParts] of [['BTC-USD:1m:a', undefined], ['BTC-USD:1m:b', parts]] as const) {
      const read = (): CacheRead => ({ kind: 'indicators', params, load: async () => ({ outcome: 'found', parts: withParts, sent, ttlMs: 60_000 }) });
      const first = await engine(await newCache()).read(read());
      const other = await engine(await newCache()).read(read());
      if (first.outcome !== 'found' || other.outcome !== 'found') throw new Error('expected answers');
      expect([first.cacheStatus, other.cacheStatus]).toEqual(['MISS', 'HIT']);
      expect(textOf(other)).toBe(value);
      expect(other.body.equals(sent.body)).toBe(true);
      expect(other.etag).toBe(sent.etag);
      expect(other.parts).toEqual(withParts);
    }
  });

  it.each([
    ['a refusal marker of format 0', '!too-many:9000'],
    ['a bare body of format 1', '{"success":true,"old":1}'],
    ['a tagged refusal of format 1', '["refused",{"reason":"too-many-candles","carrier":"answer","candles":9000,"atLeast":false}]'],
  ])('when the store holds a string this release did not write under a key (%s), then the read loads again instead of answering it', async (_name, foreign) => {
    const cache = await newCache();
    await cache.set('mds:v2:history:simulated:AAPL:1d:1mo', foreign, 60_000);
    let loads = 0;
    const rep = await engine(cache).read({
      kind: 'history',
      params: 'AAPL:1d:1mo',
      load: async () => {
        loads++;
        return { outcome: 'found', value: '{"success":true}', ttlMs: 60_000 };
      },
    });

    expect(rep).toMatchObject({ outcome: 'found', kind: 'history', cacheStatus: 'MISS' });
    expect(rep.outcome === 'found' && textOf(rep)).toBe('{"success":true}');
    expect(loads).toBe(1);
    const stored = await cache.get('mds:v2:history:simulated:AAPL:1d:1mo');
    expect(decodeEntry(stored!.value, stored!.ttlMs, Date.now())?.value).toEqual({ outcome: 'found', body: '{"success":true}' });
  });
});
