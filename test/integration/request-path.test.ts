/**
 * The one request path (DESIGN 18) over real sockets: the caller step checks every credential sent,
 * authentication and rights come before validation on every secured operation of the contract, every
 * /api request is counted whatever its outcome, the client address is the first untrusted
 * X-Forwarded-For hop from the right, and the cached-answer shortcut answers exactly as the full path.
 * Its own redis-server: quotas and throttles count per address.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { loadContract } from '../../src/http/contract.js';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { openStream, type TestStream } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait-for.js';

const API_KEY = 'request-path-test-api-key-0123456789';
const STATE = /^"(anonymous|authenticated|key)";r=(\d+);t=(\d+)$/;

let redis: RedisProcess;
let client: Redis;
const services: TestService[] = [];
const streams: TestStream[] = [];

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url, { lazyConnect: true });
  await client.connect();
});

afterEach(async () => {
  for (const s of streams.splice(0)) s.close();
  for (const s of services.splice(0)) await s.close();
});

afterAll(async () => {
  client.disconnect();
  await redis.stop();
});

async function start(env: Record<string, string> = {}, options: Parameters<typeof startTestService>[1] = {}): Promise<TestService> {
  const svc = await startTestService({ CACHE_URL: redis.url, API_KEYS: API_KEY, ...env }, { init: true, ...options });
  services.push(svc);
  return svc;
}

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
const key = (k: string) => ({ 'X-API-Key': k });

async function createKey(svc: TestService, role: 'read' | 'admin', rateLimitPerMinute?: number): Promise<string> {
  const res = await svc.fetch('/api/admin/api-keys', {
    method: 'POST',
    headers: { ...key(API_KEY), 'content-type': 'application/json' },
    body: JSON.stringify({ name: `k-${role}-${Math.random().toString(36).slice(2, 8)}`, role, ...(rateLimitPerMinute === undefined ? {} : { rate_limit_per_minute: rateLimitPerMinute }) }),
  });
  expect(res.status).toBe(201);
  return ((await json(res)).data as { key: string }).key;
}

describe('credentials: every one sent is checked', () => {
  it('when a valid key comes with a bad bearer, or a valid bearer with a bad key, then a public and an admin operation answer 401', async () => {
    const svc = await start();
    const token = await svc.login(ADMIN.username, ADMIN.password);
    // Routing ignores case: so does the caller step.
    for (const path of ['/api/quotes/AAPL', '/api/admin/status', '/API/Quotes/AAPL']) {
      const keyAndBadBearer = await svc.fetch(path, { headers: { ...key(API_KEY), ...bearer('garbage') } });
      const bearerAndBadKey = await svc.fetch(path, { headers: { ...bearer(token), ...key('bad') } });
      const both = await svc.fetch(path, { headers: { ...bearer(token), ...key(API_KEY) } });

      expect([keyAndBadBearer.status, bearerAndBadKey.status, both.status], path).toEqual([401, 401, 200]);
      expect(await json(keyAndBadBearer)).toMatchObject({ success: false, code: 401, error: 'Invalid token' });
      expect(await json(bearerAndBadKey)).toMatchObject({ success: false, code: 401, error: 'Invalid API key' });
      await both.arrayBuffer();
    }
  });
});

describe('authentication and rights before validation, on every secured operation of the contract', () => {
  const secured = loadContract().operations.filter((op) => op.security.length > 0 && op.security.every((r) => Object.keys(r).length > 0));
  const adminOnly = (op: (typeof secured)[number]) => op.security.every((r) => Object.values(r).every((scopes) => scopes.includes('admin')));

  /** The operation called with input the contract refuses: a bad path value, an unknown query parameter, malformed JSON. */
  function invalidCall(op: (typeof secured)[number], headers: Record<string, string>): [string, RequestInit] {
    const path = op.path.replace(/\{[^}]+\}/g, 'a%20b');
    const init: RequestInit = { method: op.method.toUpperCase(), headers: { ...headers } };
    if (op.method === 'post') {
      init.headers = { ...headers, 'content-type': 'application/json' };
      init.body = '{"not json';
    }
    return [`${path}?not_a_parameter=1`, init];
  }

  it('when anonymous or with a bad credential, then 401 (never 422); a read key on an admin operation 403; an allowed caller 422', async () => {
    expect(secured.length).toBeGreaterThan(10);
    const svc = await start();
    const token = await svc.login(ADMIN.username, ADMIN.password);
    const readKey = await createKey(svc, 'read');
    const seen: string[] = [];
    for (const op of secured) {
      const name = `${op.method.toUpperCase()} ${op.path}`;
      const status = async (headers: Record<string, string>) => {
        const res = await svc.fetch(...invalidCall(op, headers));
        const body = await json(res);
        expect(body.code, name).toBe(res.status);
        return res.status;
      };
      expect(await status({}), `${name} anonymous`).toBe(401);
      expect(await status(key('wrong-key')), `${name} bad key`).toBe(401);
      expect(await status(bearer('a.b.c')), `${name} bad bearer`).toBe(401);
      // A read key is not an administrator; an operation taking bearer tokens only does not take it at all.
      expect(await status(key(readKey)), `${name} read key`).toBe(adminOnly(op) ? 403 : 401);
      expect(await status(bearer(token)), `${name} administrator`).toBe(422);
      seen.push(op.operationId);
    }
    expect(seen).toContain('getUsage');
    expect(seen).toContain('deleteUser');
    expect(seen).toContain('changePassword');
  });

  it('when a path value is not valid percent-encoding (%zz), then anonymous or a bad credential 401, a read key on an admin operation 403, and only an allowed caller the 422', async () => {
    const withPathValue = secured.filter((op) => op.path.includes('{'));
    const svc = await start();
    const token = await svc.login(ADMIN.username, ADMIN.password);
    const readKey = await createKey(svc, 'read');
    const seen: string[] = [];
    for (const op of withPathValue) {
      const name = `${op.method.toUpperCase()} ${op.path}`;
      const call = async (headers: Record<string, string>) => {
        const res = await svc.fetch(op.path.replace(/\{[^}]+\}/g, '%zz'), { method: op.method.toUpperCase(), headers });
        return { status: res.status, body: await json(res) };
      };
      for (const [who, headers] of [['anonymous', {}], ['bad key', key('wrong-key')], ['bad bearer', bearer('a.b.c')]] as const) {
        const { status, body } = await call(headers);
        expect(status, `${name} ${who}`).toBe(401);
        expect(body, `${name} ${who}`).toMatchObject({ success: false, code: 401 });
        expect(JSON.stringify(body), `${name} ${who}`).not.toMatch(/percent-encoding/);
      }
      const read = await call(key(readKey));
      expect(read.status, `${name} read key`).toBe(adminOnly(op) ? 403 : 401);
      expect(JSON.stringify(read.body), `${name} read key`).not.toMatch(/percent-encoding/);
      const admin = await call(bearer(token));
      expect(admin.status, `${name} administrator`).toBe(422);
      expect(admin.body, `${name} administrator`).toMatchObject({ success: false, code: 422, violations: [{ path: 'path', message: 'is not valid percent-encoding' }] });
      seen.push(op.operationId);
    }
    expect(seen).toContain('deleteUser');

    // An operation anyone may call refuses the same path at once, with the same words.
    const open = await svc.fetch('/api/quotes/%zz');
    expect([open.status, await json(open)]).toEqual([422, expect.objectContaining({ code: 422, violations: [{ path: 'path', message: 'is not valid percent-encoding' }] })]);
  });
});

describe('quotas: every /api request counted, whatever its outcome', () => {
  /** Six calls; each answer's status and whether it carried both RateLimit headers. */
  async function six(svc: TestService, call: (i: number) => [string, RequestInit?]): Promise<Array<{ status: number; headers: boolean; remaining?: number }>> {
    const out = [];
    for (let i = 0; i < 6; i++) {
      const res = await svc.fetch(...call(i));
      await res.arrayBuffer();
      const state = STATE.exec(res.headers.get('ratelimit') ?? '');
      out.push({ status: res.status, headers: state !== null && res.headers.get('ratelimit-policy') !== null });
    }
    return out;
  }
  const expected = (status: number) => [status, status, status, 429, 429, 429].map((s) => ({ status: s, headers: true }));

  it('when six calls come with six bad keys, six invalid inputs, six unknown paths (or 405, 413, 415, 403) under a quota of 3, then 429 from the 4th, with RateLimit headers on every answer', async () => {
    await client.flushdb();
    // Each series from its own address (behind one trusted proxy), so each has its own anonymous quota.
    const svc = await start({ RATE_LIMIT_ANONYMOUS_PER_MINUTE: '3', RATE_LIMIT_AUTHENTICATED_PER_MINUTE: '1000', TRUST_PROXY: '1' });
    const from = (address: string, headers: Record<string, string> = {}) => ({ headers: { 'X-Forwarded-For': address, ...headers } });

    expect(await six(svc, (i) => ['/api/quotes/AAPL', from('198.51.100.1', key(`bad${i}`))])).toEqual(expected(401));
    expect(await six(svc, () => ['/api/quotes/AAPL?extra=1', from('198.51.100.2')])).toEqual(expected(422));
    expect(await six(svc, () => ['/api/no-such-thing', from('198.51.100.3')])).toEqual(expected(404));
    expect(await six(svc, () => ['/api/indices', { method: 'POST', ...from('198.51.100.4') }])).toEqual(expected(405));
    expect(await six(svc, () => ['/api/admin/status', from('198.51.100.5')])).toEqual(expected(401));
    const login = (headers: Record<string, string>, body: string): RequestInit => ({ method: 'POST', headers, body });
    expect(await six(svc, () => ['/api/auth/login', login(from('198.51.100.7', { 'content-type': 'application/json' }).headers, 'x'.repeat(20_000))])).toEqual(expected(413));
    expect(await six(svc, () => ['/api/auth/login', login(from('198.51.100.8', { 'content-type': 'text/plain' }).headers, 'hello')])).toEqual(expected(415));

    // With good credentials, against the key's own quota: 422s, 404s and 403s count too.
    const limited = await createKey(svc, 'read', 3);
    const limited2 = await createKey(svc, 'read', 3);
    const limited3 = await createKey(svc, 'read', 3);
    expect(await six(svc, () => ['/api/quotes/AAPL?extra=1', from('198.51.100.6', key(limited))])).toEqual(expected(422));
    expect(await six(svc, () => ['/api/no-such-thing', from('198.51.100.6', key(limited2))])).toEqual(expected(404));
    expect(await six(svc, () => ['/api/admin/status', from('198.51.100.6', key(limited3))])).toEqual(expected(403));
  });
});

describe('the client address: TRUST_PROXY', () => {
  it('when TRUST_PROXY=1 and the leftmost X-Forwarded-For entry rotates, then the address does not change: the quota, the login throttle and the stream cap hold', async () => {
    await client.flushdb();
    const provider = new ControlledProvider();
    const symbol = uniqueSymbol('P');
    provider.set(symbol, 100);
    const svc = await start(
      { TRUST_PROXY: '1', RATE_LIMIT_ANONYMOUS_PER_MINUTE: '3', LOGIN_MAX_FAILURES: '100', LOGIN_MAX_FAILURES_PER_ADDRESS: '2', STREAM_MAX_PER_ADDRESS: '1' },
      { provider },
    );
    const rotating = (i: number, address: string) => ({ 'X-Forwarded-For': `203.0.113.${i + 10}, ${address}` });

    const quota = [];
    for (let i = 0; i < 5; i++) {
      const res = await svc.fetch(`/api/quotes/${symbol}`, { headers: rotating(i, '198.51.100.20') });
      await res.arrayBuffer();
      quota.push(res.status);
    }
    expect(quota).toEqual([200, 200, 200, 429, 429]);
    expect(await client.exists('mds:v1:ratelimit:ip:198.51.100.20')).toBe(1);

    const logins = [];
    for (let i = 0; i < 4; i++) {
      const res = await svc.fetch('/api/auth/login', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...rotating(i, '198.51.100.21') },
        body: JSON.stringify({ username: `nobody${i}`, password: 'wrong-password' }),
      });
      await res.arrayBuffer();
      logins.push(res.status);
    }
    expect(logins).toEqual([401, 401, 429, 429]);

    const first = await openStream(`${svc.url}/api/stream?symbols=${symbol}`, rotating(1, '198.51.100.22'));
    streams.push(first);
    await first.waitForEvents(1);
    const second = await openStream(`${svc.url}/api/stream?symbols=${symbol}`, rotating(2, '198.51.100.22'));
    streams.push(second);
    await waitFor(() => second.ended);
    expect([first.status, second.status]).toEqual([200, 429]);
  });

  it('when TRUST_PROXY=2, then the second hop from the right is the address; with a list of proxies and CIDRs, the first address outside it', async () => {
    await client.flushdb();
    const two = await start({ TRUST_PROXY: '2', RATE_LIMIT_ANONYMOUS_PER_MINUTE: '100' });
    await (await two.fetch('/api/indices', { headers: { 'X-Forwarded-For': '192.0.2.1, 198.51.100.31, 10.9.9.9' } })).arrayBuffer();
    expect(await client.keys('mds:v1:ratelimit:ip:*')).toEqual(['mds:v1:ratelimit:ip:198.51.100.31']);

    await client.flushdb();
    const listed = await start({ TRUST_PROXY: 'loopback, 10.0.0.0/8, 172.16.0.5', RATE_LIMIT_ANONYMOUS_PER_MINUTE: '100' });
    await (await listed.fetch('/api/indices', { headers: { 'X-Forwarded-For': '192.0.2.1, 198.51.100.32, 172.16.0.5, 10.1.2.3' } })).arrayBuffer();
    expect(await client.keys('mds:v1:ratelimit:ip:*')).toEqual(['mds:v1:ratelimit:ip:198.51.100.32']);
  });

  it('when TRUST_PROXY=true, then startup stops with a line naming the variable and what to set', () => {
    expect(() => loadConfig({ TRUST_PROXY: 'true' }, { readFile: false })).toThrow(/TRUST_PROXY="true": .*TRUST_PROXY=1/);
    expect(loadConfig({ TRUST_PROXY: '0' }, { readFile: false }).server.trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '2' }, { readFile: false }).server.trustProxy).toBe(2);
    expect(() => loadConfig({ TRUST_PROXY: '10.0.0.0/99' }, { readFile: false })).toThrow(/TRUST_PROXY/);
  });
});

describe('the cached-answer shortcut answers as the full path', () => {
  const IGNORED = new Set(['date', 'x-request-id', 'keep-alive', 'connection']);

  function comparable(res: Response, body: Buffer): { status: number; headers: Record<string, string>; body: string } {
    const headers: Record<string, string> = {};
    res.headers.forEach((value, name) => {
      if (IGNORED.has(name)) return;
      // The quota counts down between the two calls, and each instance estimates the seconds left of
      // the shared window: the policy and the quota's name must agree.
      headers[name] = name === 'ratelimit' ? value.replace(/;r=\d+;t=\d+/, ';r=_;t=_') : value;
    });
    return { status: res.status, headers, body: body.toString('base64') };
  }

  /**
   * The same GET to a service with the shortcut and to one without it: both answers, and whether the
   * shortcut answered the first. `prime` runs before each try (a first request that lets the shortcut
   * answer the target). max-age counts whole seconds down, and on a loaded machine the target may be
   * half-way through its second (then one request revalidates it the full way): such a pair is read again.
   */
  async function bothWays(shortcut: TestService, full: TestService, path: string, headers: Record<string, string>, expectShortcut: boolean, prime?: () => Promise<unknown>) {
    let pair: Array<ReturnType<typeof comparable>> = [];
    let viaShortcut = false;
    for (let attempt = 0; attempt < 5; attempt++) {
      await prime?.();
      const a = await shortcut.fetch(path, { headers });
      const aBody = Buffer.from(await a.arrayBuffer());
      const b = await full.fetch(path, { headers });
      const bBody = Buffer.from(await b.arrayBuffer());
      pair = [comparable(a, aBody), comparable(b, bBody)];
      // The full way writes a request line at info; the shortcut's is at debug (not captured). The
      // later call's line is awaited, so the earlier one's would be in by then.
      const ids = [a.headers.get('x-request-id'), b.headers.get('x-request-id')];
      await waitFor(() => full.logs.some((l) => l.reqId === ids[1] && l.msg === 'request completed'));
      viaShortcut = !shortcut.logs.some((l) => l.reqId === ids[0] && l.msg === 'request completed');
      if (viaShortcut === expectShortcut && pair[0]!.headers['cache-control'] === pair[1]!.headers['cache-control']) break;
    }
    return { shortcut: pair[0]!, full: pair[1]!, viaShortcut };
  }

  it('when the same cached GETs (plain, If-None-Match, CORS Origin, Accept: text/csv, an API key) go through the shortcut and the full path, then status, headers and bytes agree', async () => {
    await client.flushdb();
    const env = { CORS_ORIGINS: 'https://app.example', RATE_LIMIT_ANONYMOUS_PER_MINUTE: '100000', RATE_LIMIT_AUTHENTICATED_PER_MINUTE: '100000' };
    const shortcut = await start(env);
    const full = await start(env, { fastPath: false });

    const first = await shortcut.fetch('/api/quotes?symbols=AAPL,MSFT');
    const etag = first.headers.get('etag')!;
    await first.arrayBuffer();
    const cases: Array<[string, Record<string, string>]> = [
      ['/api/quotes?symbols=AAPL,MSFT', {}],
      ['/api/quotes?symbols=AAPL,MSFT', { 'If-None-Match': etag }],
      ['/api/quotes?symbols=AAPL,MSFT', { Origin: 'https://app.example' }],
      ['/api/quotes?symbols=AAPL,MSFT', key(API_KEY)],
      ['/api/history/AAPL?interval=1d&range=1mo', {}],
      ['/api/history/AAPL?interval=1d&range=1mo', { Accept: 'text/csv' }],
    ];
    for (const [path, headers] of cases) {
      await (await shortcut.fetch(path, { headers })).arrayBuffer();
      const exportAsked = headers.Accept !== undefined;
      const answers = await bothWays(shortcut, full, path, headers, !exportAsked);
      expect(answers.shortcut, `${path} ${JSON.stringify(headers)}`).toEqual(answers.full);
      expect(answers.shortcut.status, path).toBe(headers['If-None-Match'] ? 304 : 200);
      // Every JSON read was answered by the shortcut; an export never is.
      expect(answers.viaShortcut, `${path} ${JSON.stringify(headers)} via the shortcut`).toBe(!exportAsked);
    }
  });

  it('when a history URL the shortcut holds is asked for with an Accept the full path answers with CSV (text/*, text/csv, CSV over JSON), then the shortcut declines and both answer the CSV; an Accept that negotiates JSON, and a quote asked for as text/*, are still taken by the shortcut', async () => {
    await client.flushdb();
    const env = { RATE_LIMIT_ANONYMOUS_PER_MINUTE: '100000', RATE_LIMIT_AUTHENTICATED_PER_MINUTE: '100000' };
    const shortcut = await start(env);
    const full = await start(env, { fastPath: false });
    const history = '/api/history/AAPL?interval=1d&range=1mo';
    const quotes = '/api/quotes?symbols=AAPL,MSFT';
    const cases: Array<[string, string | undefined, 'csv' | 'json']> = [
      [history, 'text/*', 'csv'],
      [history, 'text/csv', 'csv'],
      [history, 'text/csv;q=1, application/json;q=0.5', 'csv'],
      [history, 'text/*, application/json;q=0.9', 'csv'],
      [history, undefined, 'json'],
      [history, 'application/json', 'json'],
      [history, '*/*', 'json'],
      [history, 'application/json, text/csv;q=0.5', 'json'],
      [history, 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', 'json'],
      // A quote has one format: the full path answers it whatever the Accept, and so does the shortcut.
      [quotes, 'text/*', 'json'],
      [quotes, 'text/csv', 'json'],
    ];
    for (const [path, accept, format] of cases) {
      const name = `${path} Accept: ${accept ?? '(none)'}`;
      const headers: Record<string, string> = accept === undefined ? {} : { Accept: accept };
      // The first request (no Accept, the full way) lets the shortcut answer the target for a second.
      const prime = async () => (await shortcut.fetch(path)).arrayBuffer();
      const answers = await bothWays(shortcut, full, path, headers, format === 'json', prime);

      expect(answers.shortcut.status, name).toBe(200);
      expect(answers.shortcut.headers['content-type'], name).toBe(format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8');
      expect(answers.shortcut, name).toEqual(answers.full);
      expect(answers.viaShortcut, `${name} via the shortcut`).toBe(format === 'json');
    }
  });
});
