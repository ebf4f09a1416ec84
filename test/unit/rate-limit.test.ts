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
import { clientAddress, createRateLimit, isRateLimitedPath } from '../../src/http/rate-limit.js';

function exchange(headers: Record<string, string> = {}): { req: IncomingMessage; res: ServerResponse } {
  const req = new IncomingMessage(new Socket());
  req.headers = headers;
  return { req, res: new ServerResponse(req) };
}

const limits = (overrides: Partial<Parameters<typeof createRateLimit>[0]> = {}) =>
  createRateLimit({ counter: new QuotaCounter({ counters: new RedisSharedCounters() }), anonymousPerMinute: 2, authenticatedPerMinute: 5, trustProxy: false, ...overrides });

const managedKey: Principal = { username: 'feed', isAdmin: false, kind: 'api-key', id: 'key:k_123', rateLimitPerMinute: 1 };

describe('createRateLimit', () => {
  it('when a managed key carries its own limit, then it gets the "key" policy with that quota and is refused past it', async () => {
    const rateLimit = limits();
    const first = exchange();
    await rateLimit.apply(first.req, first.res, managedKey);
    const second = exchange();
    const refused = await rateLimit.apply(second.req, second.res, managedKey).catch((e: unknown) => e);

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
      await rateLimit.apply(req, res, alice);
    }
    const sixth = exchange();
    const bobs = exchange();

    await expect(rateLimit.apply(sixth.req, sixth.res, alice)).rejects.toBeInstanceOf(RateLimitedError);
    await rateLimit.apply(bobs.req, bobs.res, bob);
    expect(bobs.res.getHeader('RateLimit-Policy')).toBe('"authenticated";q=5;w=60');
    expect(bobs.res.getHeader('RateLimit')).toMatch(/^"authenticated";r=4;t=\d+$/);
  });

  it('when a quota is 0 (off), then nothing is counted and no header is set', async () => {
    const rateLimit = limits({ anonymousPerMinute: 0 });
    const keyOff = { ...managedKey, rateLimitPerMinute: 0 };
    for (let i = 0; i < 5; i++) {
      const anonymous = exchange();
      const key = exchange();
      await rateLimit.apply(anonymous.req, anonymous.res);
      await rateLimit.apply(key.req, key.res, keyOff);
      expect(anonymous.res.getHeader('RateLimit')).toBeUndefined();
      expect(key.res.getHeader('RateLimit')).toBeUndefined();
    }
  });
});

describe('clientAddress', () => {
  it('when TRUST_PROXY is off, then X-Forwarded-For is ignored; when on, its leftmost valid address is the client', () => {
    const { req } = exchange({ 'x-forwarded-for': '198.51.100.7, 10.0.0.1' });
    const forged = exchange({ 'x-forwarded-for': 'not-an-address, 10.0.0.1' }).req;

    expect(clientAddress(req, false)).not.toBe('198.51.100.7');
    expect(clientAddress(req, true)).toBe('198.51.100.7');
    expect(clientAddress(forged, true)).not.toBe('not-an-address');
  });
});

describe('isRateLimitedPath', () => {
  it('when the path is under /api but not health, then it is limited; health and the documents are not', () => {
    expect(['/api/indices', '/api/auth/login', '/api/admin/users/bob', '/api/unknown'].map(isRateLimitedPath)).toEqual([true, true, true, true]);
    expect(['/api/health', '/api/health/', '/openapi.json', '/docs'].map(isRateLimitedPath)).toEqual([false, false, false, false]);
  });
});
