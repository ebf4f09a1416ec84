/**
 * The Sentinel failover, again and again: each round starts fresh processes (a master, a replica,
 * three sentinels with down-after 1 s, two service instances sharing one user store), keeps a read
 * load on both, SIGKILLs the master, and requires both instances back in Redis mode on the new master
 * with revocation and cache flushes crossing between them. One instance that never came back (its
 * ioredis client ended during a reconnect) kept accepting a revoked token: that is what this guards.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { IDENTITY_CHANGED_CHANNEL } from '../../src/services/revocation-cache.js';
import { createCache, RedisCacheStore } from '../../src/infra/cache/index.js';
import { startLoad, summarize } from '../helpers/ha-load.js';
import { captureLogs } from '../helpers/log-capture.js';
import { startSentinelGroup, type RedisProcess, type SentinelGroup } from '../helpers/redis-server.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const ROUNDS = 10;
/** From the kill to both instances on the new master: down-after 1 s, election, promotion, reconnect. */
const BACK_WITHIN_MS = 15_000;

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

interface CacheView {
  mode: string;
  connected: boolean;
  node: string | null;
}

async function cacheOf(svc: TestService, token: string): Promise<CacheView> {
  const res = await svc.fetch('/api/admin/status', { headers: { authorization: `Bearer ${token}` } });
  if (res.status !== 200) return { mode: `status ${res.status}`, connected: false, node: null };
  return ((await res.json()) as { data: { cache: CacheView } }).data.cache;
}

/** How many connections are subscribed to `channel` on the server at `node` (`host:port`); -1 when it does not answer. */
async function subscribers(node: string, channel: string): Promise<number> {
  const client = new Redis({ host: '127.0.0.1', port: Number(node.split(':')[1]), lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, commandTimeout: 1000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const [, count] = (await client.pubsub('NUMSUB', channel)) as [string, number];
    return Number(count);
  } catch {
    return -1;
  } finally {
    client.disconnect();
  }
}

async function startGroup(): Promise<SentinelGroup> {
  const group = await startSentinelGroup({ failoverTimeoutMs: 3000 });
  cleanups.push(() => group.stop());
  return group;
}

describe('Sentinel failover, repeated with two instances', () => {
  it(`when the master is SIGKILLed under load in ${ROUNDS} fresh groups, then both instances are back on the new master each time, and a password change and a cache flush on one reach the other`, async () => {
    const rounds: Array<{ round: number; promotedMs: number; bothBackMs: number; requests: number; max: number }> = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const group = await startGroup();
      const dir = mkdtempSync(join(tmpdir(), 'mds-failover-'));
      cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
      // A user lifetime far beyond the round: only the broadcast (or a re-read after a gap) can make B notice.
      const env = { CACHE_URL: '', CACHE_SENTINELS: group.sentinelList, CACHE_SENTINEL_NAME: group.name, AUTH_CACHE_SECONDS: '300' };
      const a = await startTestService(env, { dir, init: true });
      cleanups.push(() => a.close());
      const b = await startTestService(env, { dir });
      cleanups.push(() => b.close());

      const before = await group.master();
      const token = await a.login(ADMIN.username, ADMIN.password);
      for (const svc of [a, b]) expect(await cacheOf(svc, token)).toMatchObject({ mode: 'redis', node: before });

      const load = startLoad([a, b], { workers: 2, token, maxRequests: 50_000 });
      await waitFor(() => load.samples.length > 40, { timeoutMs: 10_000, message: `round ${round}: the load to warm up` }).catch(async (err: Error) => {
        const views = await Promise.all([a, b].map((svc) => cacheOf(svc, token)));
        throw new Error(`${err.message}: ${load.samples.length} answers (${JSON.stringify(summarize(load.samples))}), caches ${JSON.stringify(views)}`);
      });
      // The load may make a command outlast its timeout on a loaded host and send an instance to memory
      // for a moment: kill only once both are on Redis, so each outage below starts from Redis mode.
      await waitFor(async () => (await Promise.all([a, b].map((svc) => cacheOf(svc, token)))).every((v) => v.mode === 'redis' && v.connected && v.node === before), {
        timeoutMs: 5_000,
        intervalMs: 50,
        message: `round ${round}: both instances in Redis mode before the kill`,
      });
      const master = await group.masterProcess();
      const logsAtKill = [a.logs.length, b.logs.length];
      await master.kill();
      const killedAt = performance.now();

      let after = before;
      await waitFor(
        async () => {
          after = await group.master().catch(() => before);
          return after !== before;
        },
        { timeoutMs: BACK_WITHIN_MS, intervalMs: 50, message: `round ${round}: the sentinels to promote the replica` },
      );
      const promotedMs = performance.now() - killedAt;
      let views: CacheView[] = [];
      let listening = 0;
      // Back means both connections of both instances: Redis mode on the new master, and each
      // instance's subscriber there again (what carries revocations and flushes between them).
      await waitFor(
        async () => {
          views = await Promise.all([a, b].map((svc) => cacheOf(svc, token)));
          listening = await subscribers(after, IDENTITY_CHANGED_CHANNEL);
          return views.every((v) => v.mode === 'redis' && v.connected && v.node === after) && listening === 2;
        },
        { timeoutMs: BACK_WITHIN_MS, intervalMs: 50, message: `round ${round}: both instances in Redis mode on ${after}` },
      ).catch((err: Error) => {
        throw new Error(`${err.message}; admin status said A ${JSON.stringify(views[0])}, B ${JSON.stringify(views[1])}; ${listening} subscribed on ${after}`);
      });
      const bothBackMs = performance.now() - killedAt;

      // B remembers the user now; a password change on A must revoke the old token on B.
      expect((await b.fetch('/api/admin/status', { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
      const changed = await a.fetch('/api/auth/change-password', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ old_password: ADMIN.password, new_password: `round-${round}-password` }),
      });
      expect(changed.status).toBe(200);
      const fresh = ((await changed.json()) as { data: { access_token: string } }).data.access_token;
      await waitFor(async () => (await b.fetch('/api/admin/status', { headers: { authorization: `Bearer ${token}` } })).status === 401, {
        timeoutMs: 2_000,
        intervalMs: 20,
        message: `round ${round}: B to refuse the token revoked on A`,
      }).catch((err: Error) => {
        const lines = (svc: TestService) => svc.logs.filter((l) => l.component === 'cache' || /Redis/.test(String(l.msg))).map((l) => `${String(l.time)} ${String(l.msg)} ${String(l.reason ?? '')}`);
        throw new Error(`${err.message}\nA: ${lines(a).join('\n')}\nB: ${lines(b).join('\n')}`);
      });

      // A quote neither the load nor the indices read: B caches it (HIT), A flushes, B must miss it again.
      const quote = '/api/quotes/ORCL';
      await waitFor(async () => (await b.fetch(quote)).headers.get('x-cache') === 'HIT', {
        timeoutMs: 2_000,
        message: `round ${round}: B to cache ${quote}`,
      });
      const flushed = await a.fetch('/api/admin/cache', { method: 'DELETE', headers: { authorization: `Bearer ${fresh}` } });
      expect(flushed.status).toBe(200);
      // The flush reaches B's in-process copies by broadcast, so a read or two may still be served from them.
      await waitFor(async () => (await b.fetch(quote)).headers.get('x-cache') === 'MISS', {
        timeoutMs: 1_000,
        intervalMs: 20,
        message: `round ${round}: B to miss ${quote} after A's flush`,
      });

      const figures = summarize(await load.stop());
      // The revoked token is refused by design, and the load's status reads use it: judge the rest.
      expect(figures.requests).toBeGreaterThan(40);
      const failed = load.samples.filter((s) => s.status === 0 || s.status >= 500);
      expect(failed.map((s) => `${s.status} ${Math.round(s.ms)} ms ${s.url}`).slice(0, 5)).toEqual([]);
      // One outage, one fallback and one return per instance: a second fallback right after returning
      // (a lagging sentinel's repeated +switch-master dropping the fresh connection) is a failure too.
      for (const [i, svc] of [a, b].entries()) {
        const switchesOf = (lines: typeof svc.logs) => lines.map((l) => String(l.msg)).filter((m) => /^Redis (connection lost|is back)/.test(m));
        // Between the check above and the kill an instance may still have dropped to memory: its outage
        // then began before the kill, and only its return is left to see.
        const inMemoryAtKill = switchesOf(svc.logs.slice(0, logsAtKill[i])).at(-1)?.startsWith('Redis connection lost') === true;
        expect(switchesOf(svc.logs.slice(logsAtKill[i])), `round ${round}: instance ${'AB'[i]}'s switches`).toEqual([
          ...(inMemoryAtKill ? [] : ['Redis connection lost: caching in process memory until it is back']),
          'Redis is back: caching in Redis again',
        ]);
      }
      rounds.push({ round, promotedMs: Math.round(promotedMs), bothBackMs: Math.round(bothBackMs), requests: figures.requests, max: figures.max });

      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    }
    console.log(`Sentinel failover rounds (ms from SIGKILL):\n${rounds.map((r) => JSON.stringify(r)).join('\n')}`);
    expect(rounds).toHaveLength(ROUNDS);
  }, 240_000);
});

describe('Broadcast signals across a Sentinel failover', () => {
  it('when the master is SIGKILLed, then live() turns false, and after the failover onResync fires once the subscription is back, live() is true and messages cross again', async () => {
    const group = await startGroup();
    const { logger } = captureLogs();
    const config = loadConfig({ CACHE_SENTINELS: group.sentinelList, CACHE_SENTINEL_NAME: group.name }, { readFile: false });
    const make = () => {
      const cache = createCache(config.cache, logger, { commandTimeoutMs: 300, connectTimeoutMs: 500, startTimeoutMs: 2000 });
      cleanups.push(() => cache.close());
      return cache;
    };
    const a = make();
    const b = make();
    const events: string[] = [];
    b.onResync(() => events.push(`resync live=${b.live()}`));
    await Promise.all([a.start(), b.start()]);
    const received: string[] = [];
    b.subscribe('test:signals', (m) => received.push(m));
    const delivered = (message: string) =>
      waitFor(
        async () => {
          await a.publish('test:signals', message);
          return received.includes(message);
        },
        { timeoutMs: 10_000, intervalMs: 100, message: `delivery of ${message}` },
      );
    await delivered('before');
    await waitFor(() => b.live(), { timeoutMs: 2_000, message: 'B live before the kill' });
    const resyncsBefore = events.length;

    // Sample live() through the outage, to see it go down and come back in that order.
    const seen: boolean[] = [b.live()];
    const sampler = setInterval(() => {
      if (seen.at(-1) !== b.live()) seen.push(b.live());
    }, 5);
    cleanups.push(async () => clearInterval(sampler));
    await (await group.masterProcess()).kill();
    await waitFor(() => !b.live(), { timeoutMs: 5_000, message: 'B not live once its master is gone' });
    // Nothing published while B is not live may be taken for delivered: the resync comes after the gap.
    expect(events.length).toBe(resyncsBefore);

    await waitFor(() => events.length > resyncsBefore, { timeoutMs: 15_000, message: 'a resync on B after the failover' });
    clearInterval(sampler);
    // The resync may come between two samples.
    if (seen.at(-1) !== b.live()) seen.push(b.live());
    // The resync fires when delivery is live again, not before.
    expect(events.slice(resyncsBefore)).toEqual(['resync live=true']);
    expect(seen).toEqual([true, false, true]);
    const after = await group.master();
    expect(b.status()).toMatchObject({ mode: 'redis', node: after });
    await delivered('after');
  }, 60_000);
});

describe('Store calls through a Sentinel failover of a frozen master', () => {
  it('when the master is frozen (SIGSTOP), then every store call settles within the command timeout, and the store moves to the new master while the old one is still frozen', async () => {
    const group = await startGroup();
    const commandTimeoutMs = 300;
    const store = new RedisCacheStore({
      topology: 'sentinel',
      sentinels: group.sentinelList.split(',').map((address) => ({ host: address.split(':')[0]!, port: Number(address.split(':')[1]) })),
      sentinelName: group.name,
      commandTimeoutMs,
      connectTimeoutMs: 500,
    });
    cleanups.push(() => store.close());
    await store.connect();
    const before = await group.master();
    expect(store.node()).toBe(before);

    let frozen: RedisProcess | undefined = await group.masterProcess();
    cleanups.push(async () => frozen?.resume());
    frozen.pause();
    const calls: Array<{ op: string; ms: number }> = [];
    const timed = async (op: string, call: () => Promise<unknown>) => {
      const started = performance.now();
      const ok = await call().then(
        () => true,
        () => false,
      );
      calls.push({ op, ms: performance.now() - started });
      return ok;
    };
    let after = before;
    // Until the sentinels promoted the replica and the store wrote there, with the old master still frozen.
    await waitFor(
      async () => {
        const key = `mds:v1:test:frozen:${calls.length}`;
        await timed('get', () => store.get(key));
        await timed('acquireLock', () => store.acquireLock(`${key}:lock`, 5_000));
        await timed('releaseLock', () => store.releaseLock(`${key}:lock`, 'not-the-owner'));
        await timed('delete', () => store.delete(key));
        await timed('publish', () => store.publish('test:frozen', 'x'));
        const stored = await timed('set', () => store.set(key, 'v', 5_000));
        after = await group.master().catch(() => before);
        return after !== before && stored && store.node() === after;
      },
      { timeoutMs: 20_000, intervalMs: 20, message: 'the store to write on the new master while the old one is frozen' },
    );
    frozen.resume();
    frozen = undefined;
    // Timers on a busy machine fire late: allow scheduling slack, never a second command timeout.
    const slowest = calls.reduce((max, c) => (c.ms > max.ms ? c : max), { op: 'none', ms: 0 });
    expect(calls.length).toBeGreaterThan(6);
    expect(slowest.ms, `slowest call ${slowest.op}`).toBeLessThan(commandTimeoutMs + 250);
  }, 60_000);
});
