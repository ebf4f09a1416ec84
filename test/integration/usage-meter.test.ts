/**
 * Usage metering (DESIGN.md sections 17 and 24) over real parts: the cache's shared counters on the
 * test redis-server, a real SQLite file, and the service answering priced requests and 429s over HTTP.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { utcDay } from '../../src/domain/key-space.js';
import type { Principal } from '../../src/domain/ports/accounts.js';
import type { SharedCounters } from '../../src/domain/ports/counters.js';
import { createCache, type ResilientCache } from '../../src/infra/cache/index.js';
import { RedisSharedCounters } from '../../src/infra/counters/redis-shared-counters.js';
import { loadContract } from '../../src/http/contract.js';
import { openUserStore, type OpenedUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { SIMULATED_DIRECTORY } from '../../src/infra/market/simulated-directory.js';
import { UsageMeter } from '../../src/services/usage-meter.js';
import { captureLogs } from '../helpers/log-capture.js';
import { noteSecrets } from '../helpers/log-files.js';
import { startTestService } from '../helpers/service.js';

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;
const user = (username: string): Principal => ({ username, isAdmin: false, kind: 'user', id: `user:${username}` });
const key = (id: string): Principal => ({ username: 'admin', isAdmin: false, kind: 'api-key', id: `key:${id}` });
/** The names the service counts under: the contract's operationIds. */
const OPERATIONS = loadContract().operations.map((op) => op.operationId);

describe('UsageMeter', () => {
  let dir: string;
  let db: OpenedUserStore;
  const caches: ResilientCache[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-usage-meter-'));
    db = await openUserStore(`sqlite:${join(dir, 'mds.sqlite')}`, { runMigrations: true });
  });

  afterAll(async () => {
    for (const cache of caches) await cache.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function sharedCounters(): Promise<SharedCounters> {
    const { logger } = captureLogs();
    const cache = createCache(loadConfig({ CACHE_HOST: '127.0.0.1', CACHE_PORT: String(inject('redisPort')) }, { readFile: false }).cache, logger);
    caches.push(cache);
    await cache.start();
    return cache.sharedCounters();
  }

  it('when two instances count the same callers through one Redis, then the database holds the fleet-wide totals per day', async () => {
    const { logger } = captureLogs();
    const a = new UsageMeter({ counters: await sharedCounters(), store: db.usage, logger, operations: OPERATIONS });
    const b = new UsageMeter({ counters: await sharedCounters(), store: db.usage, logger, operations: OPERATIONS });
    const alice = unique('alice');
    const keyId = unique('key');
    for (let i = 0; i < 5; i += 1) a.record(user(alice), { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    a.record(user(alice), { door: 'rest', operation: 'getQuote', points: 1, limited: true });
    for (let i = 0; i < 3; i += 1) b.record(user(alice), { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    b.record(key(keyId), { door: 'rest', operation: 'getQuote', points: 1, limited: true });
    b.record(key(keyId), { door: 'rest', operation: 'getQuote', points: 1, limited: false });

    await a.flush();
    await b.flush();
    // A's second flush writes nothing new for alice: what B added shows through the shared total.
    a.record(user(alice), { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    await a.flush();

    const today = utcDay(Date.now());
    const rows = await a.report(1);
    // Every action was priced 1 point, refused ones included (they stand for what the caller sent).
    expect(rows.find((r) => r.caller === alice)).toEqual({
      day: today,
      callerKind: 'user',
      caller: alice,
      requests: 10,
      points: 10,
      rateLimited: 1,
      operations: [{ door: 'rest', operation: 'getQuote', requests: 10, points: 10, rateLimited: 1 }],
    });
    expect(rows.find((r) => r.caller === keyId)).toMatchObject({ day: today, callerKind: 'api-key', caller: keyId, requests: 2, points: 2, rateLimited: 1 });
    await a.close();
    await b.close();
  });

  it('when two instances count one caller through one Redis, then points, actions and refusals add up per door and operation', async () => {
    const { logger } = captureLogs();
    const a = new UsageMeter({ counters: await sharedCounters(), store: db.usage, logger, operations: OPERATIONS });
    const b = new UsageMeter({ counters: await sharedCounters(), store: db.usage, logger, operations: OPERATIONS });
    const keyId = unique('key');
    const caller = key(keyId);
    for (let i = 0; i < 3; i += 1) a.record(caller, { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    a.record(caller, { door: 'rest', operation: 'getQuotes', points: 3, limited: false });
    a.record(caller, { door: 'ws', operation: 'ws:subscribe', points: 2, limited: false });
    b.record(caller, { door: 'rest', operation: 'getQuotes', points: 5, limited: false });
    // Refused before it was charged: counted, with no points.
    b.record(caller, { door: 'rest', operation: 'getQuotes', points: 0, limited: true });
    b.record(caller, { door: 'mcp', operation: 'getQuote', points: 1, limited: false });
    b.record(caller, { door: 'mcp', operation: 'mcp:tools/list', points: 1, limited: false });
    b.record(caller, { door: 'ws', operation: 'ws:subscribe', points: 4, limited: false });

    await a.flush();
    await b.flush();
    // A second round on A: its totals take in what B added meanwhile.
    a.record(caller, { door: 'sse', operation: 'streamQuotes', points: 1, limited: false });
    a.record(caller, { door: 'rest', operation: 'getQuote', points: 1, limited: true });
    await a.flush();

    const row = (await b.report(1)).find((r) => r.caller === keyId);
    expect(row).toEqual({
      day: utcDay(Date.now()),
      callerKind: 'api-key',
      caller: keyId,
      requests: 12,
      points: 21,
      rateLimited: 2,
      operations: [
        { door: 'rest', operation: 'getQuote', requests: 4, points: 4, rateLimited: 1 },
        { door: 'rest', operation: 'getQuotes', requests: 3, points: 8, rateLimited: 1 },
        { door: 'sse', operation: 'streamQuotes', requests: 1, points: 1, rateLimited: 0 },
        { door: 'mcp', operation: 'getQuote', requests: 1, points: 1, rateLimited: 0 },
        { door: 'mcp', operation: 'mcp:tools/list', requests: 1, points: 1, rateLimited: 0 },
        { door: 'ws', operation: 'ws:subscribe', requests: 2, points: 6, rateLimited: 0 },
      ],
    });
    // The caller's own totals are the sum of its operations.
    expect(row!.operations.reduce((sum, op) => sum + op.points, 0)).toBe(row!.points);
    await a.close();
    await b.close();
  });

  it('when actions name operations outside the contract and the doors, then they are counted as unmatched and make no keys of their own', async () => {
    const { logger } = captureLogs();
    const meter = new UsageMeter({ counters: await sharedCounters(), store: db.usage, logger, operations: OPERATIONS });
    const keyId = unique('key');
    const caller = key(keyId);
    for (let i = 0; i < 50; i += 1) meter.record(caller, { door: 'rest', operation: `made-up-${i}`, points: 1, limited: false });
    meter.record(caller, { door: 'mcp', operation: 'mcp:tools/destroy', points: 2, limited: false });
    meter.record(caller, { door: 'ws', operation: 'ws:sudo', points: 1, limited: true });
    meter.record(caller, { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    await meter.close();

    expect((await meter.report(1)).find((r) => r.caller === keyId)?.operations).toEqual([
      { door: 'rest', operation: 'getQuote', requests: 1, points: 1, rateLimited: 0 },
      { door: 'rest', operation: 'unmatched', requests: 50, points: 50, rateLimited: 0 },
      { door: 'mcp', operation: 'unmatched', requests: 1, points: 2, rateLimited: 0 },
      { door: 'ws', operation: 'unmatched', requests: 1, points: 1, rateLimited: 1 },
    ]);
    const redis = new Redis({ host: '127.0.0.1', port: inject('redisPort'), lazyConnect: true });
    try {
      await redis.connect();
      const found: string[] = [];
      let cursor = '0';
      do {
        const [next, batch] = await redis.scan(cursor, 'MATCH', `mds:v1:usage-op:*:${keyId}`, 'COUNT', 1000);
        cursor = next;
        found.push(...batch);
      } while (cursor !== '0');
      // Keys of four (door, operation) pairs only (a count still 0 has none): the 50 made-up names are one.
      const day = utcDay(Date.now());
      const pairs = new Set(found.map((k) => k.slice(`mds:v1:usage-op:${day}:`.length).replace(`:api-key:${keyId}`, '').replace(/:(requests|points|limited)$/, '')));
      expect([...pairs].sort()).toEqual(['mcp:unmatched', 'rest:getQuote', 'rest:unmatched', 'ws:unmatched']);
      expect(found.filter((k) => k.includes('made-up') || k.includes('destroy') || k.includes('sudo'))).toEqual([]);
    } finally {
      redis.disconnect();
    }
  });

  it('when the counters fail, then the counts are kept and written by a later flush', async () => {
    const { logger, lines } = captureLogs('warn');
    const memory = new RedisSharedCounters();
    let failing = true;
    const flaky: SharedCounters = {
      consume: (k, w, p) => (failing ? Promise.reject(new Error('counters down')) : memory.consume(k, w, p)),
      peek: (k, w) => memory.peek(k, w),
      reset: (k, w) => memory.reset(k, w),
      release: (k, w, p) => memory.release(k, w, p),
      pausedUntil: (k) => memory.pausedUntil(k),
      pauseUntil: (k, u) => memory.pauseUntil(k, u),
    };
    const meter = new UsageMeter({ counters: flaky, store: db.usage, logger, operations: OPERATIONS });
    const bob = unique('bob');
    meter.record(user(bob), { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    meter.record(user(bob), { door: 'rest', operation: 'getQuote', points: 1, limited: true });
    await meter.flush();
    expect((await db.usage.list(utcDay(Date.now()))).find((r) => r.caller === bob)).toBeUndefined();
    expect(lines.some((l) => l.level === 40 && String(l.msg).includes('kept for the next flush'))).toBe(true);

    failing = false;
    meter.record(user(bob), { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    await meter.close();
    expect((await db.usage.list(utcDay(Date.now()))).find((r) => r.caller === bob)).toMatchObject({ requests: 3, points: 3, rateLimited: 1 });
    expect((await db.usage.listOperations(utcDay(Date.now()))).filter((r) => r.caller === bob)).toMatchObject([{ door: 'rest', operation: 'getQuote', requests: 3, points: 3, rateLimited: 1 }]);
  });

  it('when requests come on both sides of midnight UTC, then each day gets its own row', async () => {
    const { logger } = captureLogs();
    let now = Date.UTC(2026, 10, 24, 23, 59, 59, 500);
    const meter = new UsageMeter({ counters: new RedisSharedCounters(), store: db.usage, logger, operations: OPERATIONS, now: () => now });
    const carol = unique('carol');
    meter.record(user(carol), { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    now += 1000;
    meter.record(user(carol), { door: 'rest', operation: 'getQuote', points: 1, limited: false });
    meter.record(user(carol), { door: 'rest', operation: 'getQuote', points: 1, limited: true });
    await meter.close();
    const rows = (await db.usage.list('2026-11-24')).filter((r) => r.caller === carol);
    expect(rows.map((r) => [r.day, r.requests, r.rateLimited])).toEqual([
      ['2026-11-25', 2, 1],
      ['2026-11-24', 1, 0],
    ]);
  });

  it('when rows are older than the retention, then a flush deletes them', async () => {
    const { logger } = captureLogs();
    const now = Date.UTC(2026, 10, 25, 12);
    await db.usage.raiseTotals([
      { day: '2026-08-27', callerKind: 'user', caller: 'old', requests: 1, points: 1, rateLimited: 0 },
      { day: '2026-08-28', callerKind: 'user', caller: 'kept', requests: 1, points: 1, rateLimited: 0 },
    ]);
    const meter = new UsageMeter({ counters: new RedisSharedCounters(), store: db.usage, logger, operations: OPERATIONS, now: () => now });
    await meter.flush();
    const callers = (await db.usage.list('2026-01-01')).map((r) => r.caller);
    expect(callers).toContain('kept');
    expect(callers).not.toContain('old');
  });
});

describe('GET /api/admin/usage', () => {
  const ADMIN_KEY = `usage-admin-key-${randomBytes(8).toString('hex')}`;
  const READ_KEY = `usage-read-key-${randomBytes(8).toString('hex')}`;

  interface ReportOperation {
    door: string;
    operation: string;
    requests: number;
    points: number;
    rate_limited: number;
  }
  interface Report {
    success: boolean;
    days: number;
    data: Array<{ caller_kind: string; caller: string; requests: number; points: number; rate_limited: number; operations: ReportOperation[] }>;
  }

  it('when one API key calls operations of different prices, then its row shows each operation with the points it was charged', async () => {
    // Keys of its own: the counters of today live in the suite's Redis, shared by every test.
    const ADMIN_KEY = `usage-admin-key-${randomBytes(8).toString('hex')}`;
    const READ_KEY = `usage-read-key-${randomBytes(8).toString('hex')}`;
    noteSecrets(ADMIN_KEY, READ_KEY);
    const svc = await startTestService({ API_KEYS: `${ADMIN_KEY},${READ_KEY}`, MARKET_DATA_PROVIDER: 'simulated' });
    try {
      const reader = { headers: { 'X-API-Key': READ_KEY } };
      // 25 symbols: one point per started 10 (domain/prices.ts), so 3 points a request.
      const symbols = SIMULATED_DIRECTORY.slice(0, 25).map((instrument) => encodeURIComponent(instrument.symbol));
      expect(new Set(symbols).size).toBe(25);
      for (let i = 0; i < 2; i += 1) expect((await svc.fetch(`/api/quotes?symbols=${symbols.join(',')}`, reader)).status).toBe(200);
      // 5 symbols start one group of 10: 1 point.
      expect((await svc.fetch(`/api/quotes?symbols=${symbols.slice(0, 5).join(',')}`, reader)).status).toBe(200);
      expect((await svc.fetch('/api/quotes/AAPL', reader)).status).toBe(200);
      // No operation: the point the caller step charged, under `unmatched`.
      expect((await svc.fetch('/api/no-such-thing', reader)).status).toBe(404);

      const res = await svc.fetch('/api/admin/usage?days=1', { headers: { 'X-API-Key': ADMIN_KEY } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as Report;
      const rows = body.data.filter((r) => r.caller_kind === 'api-key');
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ requests: 5, points: 3 + 3 + 1 + 1 + 1, rate_limited: 0 });
      expect(rows[0]!.operations).toEqual([
        { door: 'rest', operation: 'getQuote', requests: 1, points: 1, rate_limited: 0 },
        { door: 'rest', operation: 'getQuotes', requests: 3, points: 7, rate_limited: 0 },
        { door: 'rest', operation: 'unmatched', requests: 1, points: 1, rate_limited: 0 },
      ]);
    } finally {
      await svc.close();
    }
  });

  it('when a caller goes past its quota, then the usage report counts its requests and its 429s', async () => {
    noteSecrets(ADMIN_KEY, READ_KEY);
    const svc = await startTestService({ API_KEYS: `${ADMIN_KEY},${READ_KEY}`, RATE_LIMIT_AUTHENTICATED_PER_MINUTE: '3', MARKET_DATA_PROVIDER: 'simulated' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i += 1) statuses.push((await svc.fetch('/api/markets', { headers: { 'X-API-Key': READ_KEY } })).status);
      expect(statuses).toEqual([200, 200, 200, 429, 429]);

      const res = await svc.fetch('/api/admin/usage?days=1', { headers: { 'X-API-Key': ADMIN_KEY } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as Report;
      expect(body.days).toBe(1);
      const rows = body.data.filter((r) => r.caller_kind === 'api-key');
      // The reader: 5 requests, 2 refused. A request is metered once it ends, so the administrator's
      // own request is in the next report, not in the one it is answered with.
      expect(rows.map((r) => [r.requests, r.rate_limited])).toEqual([[5, 2]]);
      // The refused ones paid nothing; they were refused before their operation was known.
      expect(rows[0]!.points).toBe(3);
      expect(rows[0]!.operations).toEqual([
        { door: 'rest', operation: 'getMarkets', requests: 3, points: 3, rate_limited: 0 },
        { door: 'rest', operation: 'unmatched', requests: 2, points: 0, rate_limited: 2 },
      ]);
      const again = (await (await svc.fetch('/api/admin/usage?days=1', { headers: { 'X-API-Key': ADMIN_KEY } })).json()) as typeof body;
      expect(again.data.filter((r) => r.caller_kind === 'api-key').map((r) => [r.requests, r.rate_limited]).sort()).toEqual([
        [1, 0],
        [5, 2],
      ]);
      expect(JSON.stringify(body)).not.toContain(READ_KEY);

      const bad = await svc.fetch('/api/admin/usage?days=0', { headers: { 'X-API-Key': ADMIN_KEY } });
      expect(bad.status).toBe(422);
      expect(((await bad.json()) as { error: string }).error).toMatch(/days/);
      expect((await svc.fetch('/api/admin/usage', { headers: { 'X-API-Key': READ_KEY } })).status).toBe(429);
    } finally {
      await svc.close();
    }
  });
});
