/**
 * Request quotas over a real socket: the real service, its own redis-server per suite (counters are
 * per client address, and every test calls from 127.0.0.1), the IETF RateLimit headers, the 429
 * envelope, health left alone, callers with credentials on their own quota, one counter for two
 * instances, Redis killed mid-burst, and DATA_REQUIRES_AUTH on and off.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

const API_KEY = 'quota-test-api-key-0123456789';
const POLICY = /^"(anonymous|authenticated|key)";q=(\d+);w=(\d+)$/;
const STATE = /^"(anonymous|authenticated|key)";r=(\d+);t=(\d+)$/;

function rateLimitOf(res: Response): { policy: string; quota: number; window: number; remaining: number; resetS: number } {
  const policy = POLICY.exec(res.headers.get('ratelimit-policy') ?? '');
  const state = STATE.exec(res.headers.get('ratelimit') ?? '');
  if (!policy || !state) throw new Error(`no rate-limit headers: ${res.headers.get('ratelimit-policy')} / ${res.headers.get('ratelimit')}`);
  expect(state[1]).toBe(policy[1]);
  return { policy: policy[1]!, quota: Number(policy[2]), window: Number(policy[3]), remaining: Number(state[2]), resetS: Number(state[3]) };
}

async function drain(res: Response): Promise<void> {
  await res.arrayBuffer();
}

describe('rate limits', () => {
  let redis: RedisProcess;
  let client: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { lazyConnect: true });
    await client.connect();
  });

  afterAll(async () => {
    client.disconnect();
    await redis.stop();
  });

  describe('with an anonymous quota of 3 and an authenticated quota of 100', () => {
    let service: TestService;

    beforeEach(async () => {
      await client.flushdb();
      service = await startTestService(
        { CACHE_URL: redis.url, RATE_LIMIT_ANONYMOUS_PER_MINUTE: '3', RATE_LIMIT_AUTHENTICATED_PER_MINUTE: '100', API_KEYS: API_KEY },
        { init: true },
      );
    });

    afterEach(async () => {
      await service.close();
    });

    it('when an anonymous caller reads the indices, then the 200 carries RateLimit-Policy and RateLimit counting down', async () => {
      const first = await service.fetch('/api/indices');
      const second = await service.fetch('/api/indices', { method: 'HEAD' });

      expect(first.status).toBe(200);
      expect(((await first.json()) as { success: boolean }).success).toBe(true);
      expect(first.headers.get('ratelimit-policy')).toBe('"anonymous";q=3;w=60');
      expect(rateLimitOf(first)).toMatchObject({ policy: 'anonymous', remaining: 2 });
      expect(rateLimitOf(first).resetS).toBeGreaterThan(0);
      expect(rateLimitOf(first).resetS).toBeLessThanOrEqual(60);
      expect(second.status).toBe(200);
      expect(rateLimitOf(second).remaining).toBe(1);
      expect(await client.exists('mds:v1:ratelimit:ip:127.0.0.1')).toBe(1);
    });

    it('when the quota is used up, then the next call is a 429 envelope with Retry-After and r=0, on the fast path and through Express alike', async () => {
      for (let i = 0; i < 3; i++) expect((await service.fetch('/api/indices')).status).toBe(200);

      const fast = await service.fetch('/api/indices');
      const express = await service.fetch('/api/auth/login', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(ADMIN),
      });

      for (const res of [fast, express]) {
        expect(res.status).toBe(429);
        const body = (await res.json()) as Record<string, unknown>;
        expect(body).toEqual({ success: false, error: expect.stringMatching(/^Rate limit exceeded: retry in \d+ seconds$/), code: 429, detail: body.error });
        const retryAfter = Number(res.headers.get('retry-after'));
        expect(Number.isInteger(retryAfter)).toBe(true);
        expect(retryAfter).toBeGreaterThanOrEqual(1);
        expect(retryAfter).toBeLessThanOrEqual(60);
        expect(rateLimitOf(res)).toMatchObject({ policy: 'anonymous', quota: 3, remaining: 0 });
        expect(res.headers.get('x-request-id')).toBeTruthy();
      }
    });

    it('when the address has used up its quota, then health still answers 200 every time, without rate-limit headers', async () => {
      for (let i = 0; i < 4; i++) await drain(await service.fetch('/api/indices'));

      for (let i = 0; i < 10; i++) {
        const res = await service.fetch('/api/health');
        expect(res.status).toBe(200);
        expect(res.headers.get('ratelimit')).toBeNull();
        await drain(res);
      }
    });

    it('when the address has used up its anonymous quota, then an API key and a user from that address still get 200 on their own quotas', async () => {
      const token = await service.login(ADMIN.username, ADMIN.password); // the login is the address's first call
      for (let i = 0; i < 3; i++) await drain(await service.fetch('/api/indices'));
      expect((await service.fetch('/api/indices')).status).toBe(429);

      const byKey = await service.fetch('/api/indices', { headers: { 'X-API-Key': API_KEY } });
      const byUser = await service.fetch('/api/indices', { headers: { Authorization: `Bearer ${token}` } });
      const admin = await service.fetch('/api/admin/status', { headers: { Authorization: `Bearer ${token}` } });

      expect(byKey.status).toBe(200);
      expect(rateLimitOf(byKey)).toMatchObject({ policy: 'authenticated', quota: 100, remaining: 99 });
      expect(byUser.status).toBe(200);
      expect(rateLimitOf(byUser)).toMatchObject({ policy: 'authenticated', quota: 100, remaining: 99 });
      expect(admin.status).toBe(200);
      expect(rateLimitOf(admin).remaining).toBe(98);
      const keys = (await client.keys('mds:v1:ratelimit:*')).sort();
      expect(keys).toEqual(['mds:v1:ratelimit:ip:127.0.0.1', expect.stringMatching(/^mds:v1:ratelimit:key:static:[0-9a-f]{8}$/), 'mds:v1:ratelimit:user:admin']);
      // The key's identity is a digest prefix, never the key itself.
      expect(keys.join(' ')).not.toContain(API_KEY);
    });

    it('when a read key calls an admin endpoint, then each 403 counts against the key own quota, with the headers, and over it the answer is 429', async () => {
      const token = await service.login(ADMIN.username, ADMIN.password);
      const created = await service.fetch('/api/admin/api-keys', {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'reader', role: 'read', rate_limit_per_minute: 2 }),
      });
      const { key } = ((await created.json()) as { data: { key: string } }).data;
      const first = await service.fetch('/api/admin/status', { headers: { 'X-API-Key': key } });
      expect(first.status).toBe(403);
      expect(rateLimitOf(first)).toMatchObject({ policy: 'key', quota: 2, remaining: 1 });
      await drain(first);
      const data = await service.fetch('/api/indices', { headers: { 'X-API-Key': key } });
      expect(data.status).toBe(200);
      expect(rateLimitOf(data).remaining).toBe(0);
      await drain(data);
      const over = await service.fetch('/api/admin/status', { headers: { 'X-API-Key': key } });
      expect(over.status).toBe(429);
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await over.json()).toMatchObject({ success: false, code: 429 });
    });

    it('when credentials are sent to the public indices and they are bad, then 401 with the reason, not an anonymous answer', async () => {
      const badToken = await service.fetch('/api/indices', { headers: { Authorization: 'Bearer not-a-token' } });
      const badKey = await service.fetch('/api/indices', { headers: { 'X-API-Key': 'not-a-key' } });

      expect(badToken.status).toBe(401);
      expect(((await badToken.json()) as { code: number; error: string }).code).toBe(401);
      expect(badKey.status).toBe(401);
      expect(((await badKey.json()) as { error: string }).error).toBe('Invalid API key');
    });
  });

  it('when two instances share one Redis, then they count against one quota', async () => {
    await client.flushdb();
    const env = { CACHE_URL: redis.url, RATE_LIMIT_ANONYMOUS_PER_MINUTE: '4' };
    const a = await startTestService(env);
    const b = await startTestService(env);
    try {
      const statuses: number[] = [];
      for (const service of [a, b, a, b]) {
        const res = await service.fetch('/api/indices');
        statuses.push(res.status);
        await drain(res);
      }
      const fifthOnA = await a.fetch('/api/indices');
      const fifthOnB = await b.fetch('/api/indices');

      expect(statuses).toEqual([200, 200, 200, 200]);
      expect(fifthOnA.status).toBe(429);
      expect(fifthOnB.status).toBe(429);
      expect(Number(await client.get('mds:v1:ratelimit:ip:127.0.0.1'))).toBeGreaterThanOrEqual(5);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('when Redis is killed during a burst, then limits keep working from memory and no answer is a 5xx', async () => {
    const own = await startRedis();
    const limit = 40;
    const service = await startTestService({ CACHE_URL: own.url, RATE_LIMIT_ANONYMOUS_PER_MINUTE: String(limit) });
    try {
      const statuses: number[] = [];
      const call = async (path: string) => {
        const res = await service.fetch(path);
        statuses.push(res.status);
        if (res.status === 200 || res.status === 429) rateLimitOf(res);
        await drain(res);
      };
      // A burst of 10 concurrent callers, the quota half used when Redis dies under it.
      const burst = (n: number) => Promise.all(Array.from({ length: n }, (_, i) => call(i % 2 ? '/api/indices' : '/api/auth/login-missing')));
      await burst(20);
      const killed = own.kill();
      await burst(10);
      await killed;

      // Memory takes over with its own count: at most `limit` more, then 429s.
      const afterKill: number[] = [];
      await waitFor(
        async () => {
          const res = await service.fetch('/api/indices');
          afterKill.push(res.status);
          await drain(res);
          return res.status === 429;
        },
        { timeoutMs: 20_000, intervalMs: 0, message: 'a 429 from the memory counter' },
      );

      expect(statuses.every((s) => s < 500)).toBe(true);
      expect(afterKill.every((s) => s === 200 || s === 429)).toBe(true);
      expect(afterKill.length).toBeLessThanOrEqual(limit + 1);
      expect(service.logs.filter((l) => (l.res as { statusCode?: number } | undefined)?.statusCode === 500)).toEqual([]);
    } finally {
      await service.close();
      await own.stop();
    }
  });

  it('when TRUST_PROXY is on, then each X-Forwarded-For client has its own quota', async () => {
    await client.flushdb();
    const service = await startTestService({ CACHE_URL: redis.url, RATE_LIMIT_ANONYMOUS_PER_MINUTE: '1', TRUST_PROXY: '1' });
    try {
      // The proxy appends the client it saw: the rightmost entry (was: the leftmost, which the client writes).
      const first = await service.fetch('/api/indices', { headers: { 'X-Forwarded-For': '10.0.0.1, 198.51.100.7' } });
      const again = await service.fetch('/api/indices', { headers: { 'X-Forwarded-For': '198.51.100.7' } });
      const other = await service.fetch('/api/indices', { headers: { 'X-Forwarded-For': '203.0.113.9' } });

      expect([first.status, again.status, other.status]).toEqual([200, 429, 200]);
      expect(await client.exists('mds:v1:ratelimit:ip:198.51.100.7', 'mds:v1:ratelimit:ip:203.0.113.9')).toBe(2);
    } finally {
      await service.close();
    }
  });

  it('when anonymous callers are IPv6 addresses, then one /64 shares one quota (a client cannot pick a fresh address per request)', async () => {
    await client.flushdb();
    const service = await startTestService({ CACHE_URL: redis.url, RATE_LIMIT_ANONYMOUS_PER_MINUTE: '1', TRUST_PROXY: '1' });
    try {
      const first = await service.fetch('/api/indices', { headers: { 'X-Forwarded-For': '2001:db8:1:2::1' } });
      const sameNetwork = await service.fetch('/api/indices', { headers: { 'X-Forwarded-For': '2001:db8:1:2:abcd::9' } });
      const otherNetwork = await service.fetch('/api/indices', { headers: { 'X-Forwarded-For': '2001:db8:1:3::1' } });

      expect([first.status, sameNetwork.status, otherNetwork.status]).toEqual([200, 429, 200]);
      expect(await client.exists('mds:v1:ratelimit:ip:2001:db8:1:2::/64', 'mds:v1:ratelimit:ip:2001:db8:1:3::/64')).toBe(2);
    } finally {
      await service.close();
    }
  });

  it('when RATE_LIMIT_ANONYMOUS_PER_MINUTE is 0, then anonymous calls are not limited and carry no rate-limit headers', async () => {
    const service = await startTestService({ CACHE_URL: redis.url, RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0' });
    try {
      for (let i = 0; i < 5; i++) {
        const res = await service.fetch('/api/indices');
        expect(res.status).toBe(200);
        expect(res.headers.get('ratelimit-policy')).toBeNull();
        await drain(res);
      }
    } finally {
      await service.close();
    }
  });

  describe('DATA_REQUIRES_AUTH', () => {
    it('when true, then the indices answer 401 without credentials (fast path included) and 200 with a token or an API_KEYS key', async () => {
      const service = await startTestService({ CACHE_URL: redis.url, DATA_REQUIRES_AUTH: 'true', API_KEYS: API_KEY }, { init: true });
      try {
        const anonymous = await service.fetch('/api/indices');
        const head = await service.fetch('/api/indices', { method: 'HEAD' });
        const token = await service.login(ADMIN.username, ADMIN.password);
        const byToken = await service.fetch('/api/indices', { headers: { Authorization: `Bearer ${token}` } });
        const byKey = await service.fetch('/api/indices', { headers: { 'X-API-Key': API_KEY } });
        const contract = (await (await service.fetch('/openapi.json')).json()) as { paths: Record<string, { get: { security: unknown[] } }> };

        expect(anonymous.status).toBe(401);
        expect(await anonymous.json()).toEqual({ success: false, error: 'Not authenticated: please log in first', code: 401, detail: 'Not authenticated: please log in first' });
        expect(head.status).toBe(401);
        expect(byToken.status).toBe(200);
        expect(((await byToken.json()) as { data: unknown[] }).data.length).toBeGreaterThan(0);
        expect(byKey.status).toBe(200);
        await drain(byKey);
        expect(contract.paths['/api/indices']!.get.security).toEqual([{ bearerAuth: [] }, { apiKeyAuth: [] }]);
        expect((await service.fetch('/api/health')).status).toBe(200);
      } finally {
        await service.close();
      }
    });

    it('when false (the default), then the indices answer 200 without credentials and the contract keeps the anonymous alternative', async () => {
      const service = await startTestService({ CACHE_URL: redis.url });
      try {
        const anonymous = await service.fetch('/api/indices');
        const contract = (await (await service.fetch('/openapi.json')).json()) as { paths: Record<string, { get: { security: unknown[] } }> };

        expect(anonymous.status).toBe(200);
        expect(((await anonymous.json()) as { success: boolean }).success).toBe(true);
        expect(contract.paths['/api/indices']!.get.security).toEqual([{}, { bearerAuth: [] }, { apiKeyAuth: [] }]);
      } finally {
        await service.close();
      }
    });
  });
});
