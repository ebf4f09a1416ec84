/**
 * The quota rules of `createRateLimit` over the in-memory counter: which quota a caller gets, the
 * header values, and the refusal. HTTP behaviour is covered in test/integration/rate-limit.test.ts.
 */
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { RateLimitedError } from '../../src/domain/errors.js';
import { QuotaCounter } from '../../src/infra/counters/quota-counter.js';
import { RedisSharedCounters } from '../../src/infra/counters/redis-shared-counters.js';
import type { Principal } from '../../src/domain/ports/accounts.js';
import { createRateLimit, isRateLimitedPath } from '../../src/http/rate-limit.js';
import { clientAddressOf } from '../../src/http/caller.js';

function exchange(headers: Record<string, string> = {}): { req: IncomingMessage; res: ServerResponse } {
  const req = new IncomingMessage(new Socket());
  req.headers = headers;
  return { req, res: new ServerResponse(req) };
}

const limits = (overrides: Partial<Parameters<typeof createRateLimit>[0]> = {}) =>
  createRateLimit({ counter: new QuotaCounter({ counters: new RedisSharedCounters() }), anonymousPerMinute: 2, authenticatedPerMinute: 5, ...overrides });

const managedKey: Principal = { username: 'feed', isAdmin: false, kind: 'api-key', id: 'key:k_123', rateLimitPerMinute: 1 };

describe('createRateLimit', () => {
  it('when a managed key carries its own limit, then it gets the "key" policy with that quota and is refused past it', async () => {
    const rateLimit = limits();
    const first = exchange();
    await rateLimit.apply({ address: '127.0.0.1', principal: managedKey }, first.res);
    const second = exchange();
    const refused = await rateLimit.apply({ address: '127.0.0.1', principal: managedKey }, second.res).catch((e: unknown) => e);

    expect(first.res.getHeader('RateLimit-Policy')).toBe('"key";q=1;w=60');
    expect(first.res.getHeader('RateLimit')).toMatch(/^"key";r=0;t=(60|59)$/);
    expect(refused).toBeInstanceOf(RateLimitedError);
    expect((refused as RateLimitedError).retryAfterSeconds).toBeGreaterThanOrEqual(59);
    expect(second.res.getHeader('RateLimit')).toMatch(/^"key";r=0;t=\d+$/);
  });

  it('when a user has no id, then it counts as user:<username> on the authenticated quota, apart from other users', async () => {
    const rateLimit = limits();
    const alice: Principal = { username: 'alice', isAdmin: false, kind: 'user' };
    const bob: Principal = { username: 'bob', isAdmin: false, kind: 'user' };
    for (let i = 0; i < 5; i++) {
      const { req, res } = exchange();
      await rateLimit.apply({ address: '127.0.0.1', principal: alice }, res);
    }
    const sixth = exchange();
    const bobs = exchange();

    await expect(rateLimit.apply({ address: '127.0.0.1', principal: alice }, sixth.res)).rejects.toBeInstanceOf(RateLimitedError);
    await rateLimit.apply({ address: '127.0.0.1', principal: bob }, bobs.res);
    expect(bobs.res.getHeader('RateLimit-Policy')).toBe('"authenticated";q=5;w=60');
    expect(bobs.res.getHeader('RateLimit')).toMatch(/^"authenticated";r=4;t=\d+$/);
  });

  it('when a quota is 0 (off), then nothing is counted and no header is set', async () => {
    const rateLimit = limits({ anonymousPerMinute: 0 });
    const keyOff = { ...managedKey, rateLimitPerMinute: 0 };
    for (let i = 0; i < 5; i++) {
      const anonymous = exchange();
      const key = exchange();
      await rateLimit.apply({ address: '127.0.0.1', principal: undefined }, anonymous.res);
      await rateLimit.apply({ address: '127.0.0.1', principal: keyOff }, key.res);
      expect(anonymous.res.getHeader('RateLimit')).toBeUndefined();
      expect(key.res.getHeader('RateLimit')).toBeUndefined();
    }
  });
});

describe('clientAddressOf', () => {
  it('when TRUST_PROXY is off, then X-Forwarded-For is ignored; with trusted hops or proxies, the first untrusted hop from the right is the client', () => {
    const { req } = exchange({ 'x-forwarded-for': '198.51.100.7, 203.0.113.9, 10.0.0.1' });
    const forged = exchange({ 'x-forwarded-for': '198.51.100.7, not-an-address' }).req;
    for (const r of [req, forged]) Object.defineProperty(r.socket, 'remoteAddress', { value: '127.0.0.1' });
    const peer = '127.0.0.1';

    expect(clientAddressOf(false).address(req)).toBe(peer);
    expect(clientAddressOf(1).address(req)).toBe('10.0.0.1');
    expect(clientAddressOf(2).address(req)).toBe('203.0.113.9');
    expect(clientAddressOf(['loopback', '10.0.0.0/8', '203.0.113.0/24']).address(req)).toBe('198.51.100.7');
    // The leftmost entry is whatever the client wrote: never taken on a hop count that does not reach it.
    expect(clientAddressOf(1).address(forged)).toBe(peer);
  });
});

describe('isRateLimitedPath', () => {
  it('when the path is under /api but not health, then it is limited; health and the documents are not', () => {
    expect(['/api/indices', '/api/auth/login', '/api/admin/users/bob', '/api/unknown'].map(isRateLimitedPath)).toEqual([true, true, true, true]);
    expect(['/api/health', '/api/health/', '/openapi.json', '/docs'].map(isRateLimitedPath)).toEqual([false, false, false, false]);
  });
});
