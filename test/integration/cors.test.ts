import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startTestService, type TestService } from '../helpers/service.js';

const APP = 'https://app.example.com';

function preflight(svc: TestService, path: string, origin: string) {
  return svc.fetch(path, {
    method: 'OPTIONS',
    headers: { Origin: origin, 'Access-Control-Request-Method': 'GET', 'Access-Control-Request-Headers': 'authorization' },
  });
}

describe('CORS, when CORS_ORIGINS is not set', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
  });
  afterAll(async () => {
    await svc.close();
  });

  it('sends no CORS headers and treats a preflight as any other OPTIONS (405)', async () => {
    const res = await svc.fetch('/api/indices', { headers: { Origin: APP } });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    expect((await preflight(svc, '/api/admin/status', APP)).status).toBe(405);
  });
});

describe('CORS, when CORS_ORIGINS lists an origin', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ CORS_ORIGINS: `${APP}, https://ops.example.com` });
  });
  afterAll(async () => {
    await svc.close();
  });

  it('a listed origin gets Allow-Origin and the cache headers exposed, on the fast path and through Express', async () => {
    for (const path of ['/api/indices', '/api/health']) {
      const res = await svc.fetch(path, { headers: { Origin: APP } });
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe(APP);
      expect(res.headers.get('vary')).toContain('Origin');
      expect(res.headers.get('access-control-expose-headers')).toContain('ETag');
      expect(res.headers.get('access-control-expose-headers')).toContain('X-Cache');
      expect(res.headers.get('access-control-expose-headers')).toContain('RateLimit-Policy');
    }
  });

  it('a preflight from a listed origin is answered 204 with the methods and credential headers', async () => {
    const res = await preflight(svc, '/api/admin/status', APP);
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(res.headers.get('access-control-allow-methods')).toContain('GET');
    expect(res.headers.get('access-control-allow-headers')).toContain('Authorization');
    expect(res.headers.get('access-control-allow-headers')).toContain('X-API-Key');
  });

  it('another origin gets no CORS headers, and its preflight is a 405 envelope', async () => {
    const res = await svc.fetch('/api/indices', { headers: { Origin: 'https://evil.example.net' } });
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    const pre = await preflight(svc, '/api/admin/status', 'https://evil.example.net');
    expect(pre.status).toBe(405);
    expect(((await pre.json()) as { code: number }).code).toBe(405);
  });

  it('CORS does not stand in for credentials: a cross-origin admin call without them is still 401', async () => {
    const res = await svc.fetch('/api/admin/status', { headers: { Origin: APP } });
    expect(res.status).toBe(401);
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
  });
});

describe('CORS_ORIGINS config', () => {
  it('* allows any origin; a value that is not an origin stops startup naming the variable', async () => {
    const svc = await startTestService({ CORS_ORIGINS: '*' });
    try {
      const res = await svc.fetch('/api/indices', { headers: { Origin: 'https://anything.example' } });
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
    } finally {
      await svc.close();
    }
    expect(() => loadConfig({ CORS_ORIGINS: 'app.example.com' }, { readFile: false })).toThrow(/CORS_ORIGINS/);
  });
});
