/**
 * Prometheus metrics over real sockets: the whole service (startTestService) with its metrics
 * listener on a free port, the shared redis-server (in a database of its own, so the first read is a
 * miss), scraped as Prometheus would and linted with `promtool check metrics`.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseSamples, promtoolCheck, sampleValue, scrape } from '../helpers/metrics.js';
import { freePort } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { openStream } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait-for.js';

const API_KEY = 'metrics-test-api-key-0123456789';
const HTTP = 'http_server_request_duration_seconds_count';
const INDICES_200 = { http_request_method: 'GET', http_route: '/api/indices', http_response_status_code: '200' };

let service: TestService;
let metricsUrl: string;

beforeAll(async () => {
  service = await startTestService(
    {
      METRICS_PORT: String(await freePort()),
      CACHE_URL: `redis://127.0.0.1:${inject('redisPort')}/11`,
      API_KEYS: API_KEY,
      TRUST_PROXY: '1',
      LOGIN_MAX_FAILURES: '1',
    },
    { init: true },
  );
  metricsUrl = service.metricsUrl!;
  await service.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } });
});
afterAll(async () => {
  await service?.close();
});

describe('metrics listener', () => {
  it('when metrics are on, then they have their own loopback listener, apart from the API port', () => {
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    expect(new URL(metricsUrl).port).not.toBe(new URL(service.url).port);
    expect(service.logs.some((l) => l.msg === `metrics on ${metricsUrl}`)).toBe(true);
  });

  it('when the API port is asked for /metrics, then it answers the 404 envelope', async () => {
    const res = await service.fetch('/metrics');
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ success: false, error: 'Not found: GET /metrics', code: 404, detail: 'Not found: GET /metrics' });
  });

  it('when the metrics listener is asked for another path or method, then it answers 404 or 405 envelopes', async () => {
    const other = await fetch(metricsUrl.replace(/\/metrics$/, '/api/indices'));
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ success: false, code: 404 });
    const post = await fetch(metricsUrl, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect(await post.json()).toMatchObject({ success: false, code: 405 });
  });
});

describe('what the metrics count', () => {
  it('when cached GET /api/indices is read on the fast path, then the histogram and the cache counters move by as many', async () => {
    const first = await service.fetch('/api/indices');
    expect(first.status).toBe(200);
    expect(first.headers.get('x-cache')).toBe('MISS');
    const before = await scrape(metricsUrl);
    const expressLines = () => service.logs.filter((l) => l.responseTime !== undefined && (l.req as { url?: string } | undefined)?.url === '/api/indices').length;
    const expressBefore = expressLines();

    for (let i = 0; i < 5; i += 1) {
      const res = await service.fetch('/api/indices');
      expect(res.status).toBe(200);
      expect(res.headers.get('x-cache')).toBe('HIT');
      await res.arrayBuffer();
    }
    const after = await scrape(metricsUrl);

    expect(sampleValue(after, HTTP, INDICES_200) - sampleValue(before, HTTP, INDICES_200)).toBe(5);
    const hits = (t: string) => sampleValue(t, 'mds_cache_requests_total', { kind: 'indices', result: 'hit' });
    expect(hits(after) - hits(before)).toBe(5);
    expect(sampleValue(before, 'mds_cache_requests_total', { kind: 'indices', result: 'miss' })).toBe(1);
    // The miss loaded one quote per configured index.
    expect(sampleValue(after, 'mds_upstream_request_duration_seconds_count', { outcome: 'success' })).toBe(service.config.market.symbols.length);
    // Express logs every request it serves (pino-http adds responseTime); these never reached it.
    expect(expressLines()).toBe(expressBefore);
  });

  it('when a request goes through Express, then it is counted under the contract template, never the raw path', async () => {
    const res = await service.fetch('/api/admin/users/no-such-user-4711', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } });
    expect(res.status).toBe(404);
    const invalid = await service.fetch('/api/indices?unexpected=1');
    expect(invalid.status).toBe(422);

    const text = await scrape(metricsUrl);
    expect(sampleValue(text, HTTP, { http_request_method: 'DELETE', http_route: '/api/admin/users/{username}', http_response_status_code: '404' })).toBe(1);
    expect(sampleValue(text, HTTP, { http_request_method: 'GET', http_route: '/api/indices', http_response_status_code: '422' })).toBe(1);
    expect(text).not.toContain('no-such-user-4711');
  });

  it('when a path matches no operation, then it is counted under one fixed label', async () => {
    for (const path of ['/nothing-here-1', '/api/nothing-here-2']) expect((await service.fetch(path)).status).toBe(404);
    expect((await service.fetch('/api/indices', { method: 'PUT' })).status).toBe(405);
    const text = await scrape(metricsUrl);
    expect(sampleValue(text, HTTP, { http_route: 'unmatched', http_response_status_code: '404' })).toBeGreaterThanOrEqual(2);
    expect(sampleValue(text, HTTP, { http_request_method: 'PUT', http_route: 'unmatched', http_response_status_code: '405' })).toBe(1);
    expect(text).not.toMatch(/nothing-here/);
    const routes = new Set(parseSamples(text).filter((s) => s.name === HTTP).map((s) => s.labels.http_route));
    expect([...routes].every((r) => r === 'unmatched' || r?.startsWith('/'))).toBe(true);
  });

  it('when HEAD /api/indices is answered, then it is counted as HEAD, not as the GET it is served as', async () => {
    const before = sampleValue(await scrape(metricsUrl), HTTP, { http_request_method: 'HEAD', http_route: '/api/indices' });
    expect((await service.fetch('/api/indices', { method: 'HEAD' })).status).toBe(200);
    expect(sampleValue(await scrape(metricsUrl), HTTP, { http_request_method: 'HEAD', http_route: '/api/indices' })).toBe(before + 1);
  });

  it('when a live-quote stream closes, then it is counted under its template with its 200', async () => {
    const labels = { http_request_method: 'GET', http_route: '/api/stream', http_response_status_code: '200' };
    const before = sampleValue(await scrape(metricsUrl), HTTP, labels);
    const stream = await openStream(`${service.url}/api/stream?symbols=AAPL`);
    await stream.waitForEvents(1);
    stream.close();
    await waitFor(async () => sampleValue(await scrape(metricsUrl), HTTP, labels) === before + 1, { timeoutMs: 3000, message: 'the closed stream is counted' });
  });

  it('when logins are throttled, then every 429 counts as a rejection of the login policy', async () => {
    // An address and a user of this run alone: throttling counters in the shared Redis outlive the run.
    const address = `2001:db8::${Date.now().toString(16).slice(-4)}:${Math.floor(Math.random() * 0xffff).toString(16)}`;
    const username = `metrics-${Date.now()}`;
    const statuses: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      const res = await service.fetch('/api/auth/login', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'X-Forwarded-For': address },
        body: JSON.stringify({ username, password: 'wrong-password-1' }),
      });
      statuses.push(res.status);
    }
    expect(statuses).toEqual([401, 429, 429]);
    const text = await scrape(metricsUrl);
    expect(sampleValue(text, 'mds_rate_limit_rejections_total', { policy: 'login' })).toBe(2);
    expect(sampleValue(text, HTTP, { http_request_method: 'POST', http_route: '/api/auth/login', http_response_status_code: '429' })).toBe(2);
  });

  it('when scraped, then the cache mode, the breaker state and the process count show the current state', async () => {
    const text = await scrape(metricsUrl);
    expect(sampleValue(text, 'mds_cache_mode', { mode: 'redis' })).toBe(1);
    expect(sampleValue(text, 'mds_cache_mode', { mode: 'memory' })).toBe(0);
    expect(sampleValue(text, 'mds_upstream_breaker_state', { state: 'closed' })).toBe(1);
    expect(sampleValue(text, 'mds_upstream_breaker_state', { state: 'open' })).toBe(0);
    expect(sampleValue(text, 'mds_processes')).toBe(1);
    expect(text).toMatch(/^# TYPE mds_stream_clients gauge$/m);
    expect(text).toMatch(/^# TYPE mds_stream_events_total counter$/m);
    expect(text).toMatch(/^process_cpu_seconds_total \d/m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds \d/m);
  });

  it('when scraped after traffic, then promtool check metrics finds nothing to report', async () => {
    const text = await scrape(metricsUrl);
    expect(sampleValue(text, HTTP)).toBeGreaterThan(0);
    expect(promtoolCheck(text)).toEqual({ status: 0, output: '' });
  });
});

describe('metrics off', () => {
  it('when METRICS_PORT is 0, then the service opens no metrics listener and says so', async () => {
    const off = await startTestService({ METRICS_PORT: '0' });
    try {
      expect(off.metricsUrl).toBeUndefined();
      expect(off.logs.some((l) => l.msg === 'metrics off (METRICS_PORT=0)')).toBe(true);
      expect((await off.fetch('/metrics')).status).toBe(404);
      expect((await off.fetch('/api/health')).status).toBe(200);
    } finally {
      await off.close();
    }
  });
});
