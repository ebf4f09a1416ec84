/**
 * GET /api/ws, the WebSocket API (DESIGN 23), over real sockets against the real service: actions
 * and events, credentials by header and by message, the stream caps (error event and close 1008),
 * bounded messages, and a client that stops reading.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { startTestService, ADMIN, type TestService } from '../helpers/service.js';
import { openWs, type TestWs } from '../helpers/ws-client.js';
import { startRedis } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait-for.js';

const API_KEY = 'ws-api-test-key-0123456789abcdef';
const provider = new ControlledProvider();
const opened: TestWs[] = [];

async function connect(svc: TestService, headers: Record<string, string> = {}): Promise<TestWs> {
  const ws = await openWs(`${svc.url.replace(/^http/, 'ws')}/api/ws`, headers);
  opened.push(ws);
  return ws;
}

/** Moves the provider's price and has `svc` load it (a REST read after a flush of the cache). */
async function change(svc: TestService, symbol: string, price: number): Promise<void> {
  provider.set(symbol, price);
  expect((await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } })).status).toBe(200);
  expect((await svc.fetch(`/api/quotes/${symbol}`)).status).toBe(200);
}

afterAll(() => {
  for (const ws of opened) ws.close();
});

describe('the WebSocket API, open data', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ API_KEYS: API_KEY, STREAM_REFRESH_SECONDS: '0', STREAM_MAX_PER_ADDRESS: '3', STREAM_MAX_PER_CALLER: '1', WS_MAX_MESSAGE_BYTES: '1024' }, { provider, init: true });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('when a client subscribes, then it gets subscribed with the missing symbols and each known quote, then every change', async () => {
    const known = uniqueSymbol('WSA');
    const unknown = uniqueSymbol('WSX');
    provider.set(known, 100);
    const ws = await connect(svc);
    ws.send({ action: 'subscribe', symbols: [known, unknown.toLowerCase()] });
    const ack = await ws.waitFor((e) => e.event === 'subscribed', 'subscribed');
    expect(ack).toEqual({ event: 'subscribed', symbols: [known], missing: [unknown] });
    await ws.waitFor((e) => e.event === 'quote', 'the current quote');
    // The answer first, then the quotes of the symbols it names (docs/live.md).
    expect(ws.events.slice(0, 2).map((e) => e.event)).toEqual(['subscribed', 'quote']);
    expect(ws.quotes(known)).toEqual([100]);
    await change(svc, known, 105.5);
    await ws.waitFor((e) => e.event === 'quote' && e.data?.price === 105.5, 'the change');
    expect(ws.events.find((e) => e.event === 'quote')!.data).toMatchObject({ symbol: known, currency: 'USD', prev_close: 100 });
    ws.close();
  });

  it('when a client unsubscribes, then nothing more of that symbol arrives while the other keeps coming', async () => {
    const a = uniqueSymbol('WSU');
    const b = uniqueSymbol('WSK');
    provider.set(a, 100);
    provider.set(b, 200);
    const ws = await connect(svc);
    ws.send({ action: 'subscribe', symbols: [a, b] });
    await ws.waitFor((e) => e.event === 'subscribed', 'subscribed');
    ws.send({ action: 'unsubscribe', symbols: [a] });
    await ws.waitFor((e) => e.event === 'unsubscribed', 'unsubscribed');
    await change(svc, a, 111);
    await change(svc, b, 222);
    await ws.waitFor((e) => e.event === 'quote' && e.data?.price === 222, 'the change of the symbol still followed');
    // The change of `a` was announced before that of `b`: had it been sent, it would be here by now.
    expect(ws.quotes(a)).toEqual([100]);
    ws.close();
  });

  it('when a client sends bad JSON, an unknown action or bad symbols, then each gets an error event and the connection stays', async () => {
    const ws = await connect(svc);
    ws.send('{not json');
    ws.send({ action: 'dance' });
    ws.send({ action: 'subscribe', symbols: ['BAD SYMBOL!'] });
    ws.send({ action: 'subscribe', symbols: [] });
    await waitFor(() => ws.events.filter((e) => e.event === 'error').length === 4, { message: 'four error events' });
    const errors = ws.events.filter((e) => e.event === 'error');
    expect(errors.map((e) => e.code)).toEqual([422, 422, 422, 422]);
    expect(errors[0]!.error).toContain('must be a JSON object');
    expect(errors[1]!.error).toContain('must be one of auth, subscribe, unsubscribe, ping');
    expect(errors[2]!.error).toContain('symbols[0]');
    ws.send({ action: 'ping' });
    await ws.waitFor((e) => e.event === 'pong', 'pong: the connection still answers');
    expect(ws.closeCode).toBeUndefined();
    ws.close();
  });

  it('when a message passes WS_MAX_MESSAGE_BYTES, then the connection is closed with 1009', async () => {
    const ws = await connect(svc);
    ws.send({ action: 'subscribe', symbols: ['A'.repeat(2000)] });
    expect(await ws.waitForClose()).toBe(1009);
  });

  it('when an address opens more connections than STREAM_MAX_PER_ADDRESS, then the extra one gets an error event and close 1008', async () => {
    const held = [await connect(svc), await connect(svc), await connect(svc)];
    const extra = await connect(svc);
    const refusal = await extra.waitFor((e) => e.event === 'error', 'the refusal');
    expect(refusal).toMatchObject({ code: 429 });
    expect(refusal.error).toContain('Too many open streams from this address');
    expect(await extra.waitForClose()).toBe(1008);
    // SSE streams share the same places.
    const sse = await fetch(`${svc.url}/api/stream?symbols=AAPL`);
    expect(sse.status).toBe(429);
    await sse.body?.cancel();
    for (const ws of held) ws.close();
    await waitFor(() => svc.streams.size === 0, { message: 'the places given back' });
  });

  it('when a caller authenticates by header, then its own cap applies, and a bad key refuses the upgrade with the 401 envelope', async () => {
    const first = await connect(svc, { 'X-API-Key': API_KEY });
    const second = await connect(svc, { 'X-API-Key': API_KEY });
    const refusal = await second.waitFor((e) => e.event === 'error', 'the per-caller refusal');
    expect(refusal.error).toContain('Too many open streams for this caller');
    expect(await second.waitForClose()).toBe(1008);
    first.close();
    const refused = await connect(svc, { 'X-API-Key': 'not-a-valid-key-at-all-0000' }).catch((err: { status?: number; body?: string }) => err);
    expect((refused as { status?: number }).status).toBe(401);
    expect(JSON.parse((refused as { body: string }).body)).toMatchObject({ success: false, code: 401 });
  });

  it('when a client stops reading, then its quotes wait as the latest per symbol and the process does not queue them', async () => {
    const symbol = uniqueSymbol('SLOW');
    provider.set(symbol, 100);
    const ws = await connect(svc);
    ws.send({ action: 'subscribe', symbols: [symbol] });
    await ws.waitFor((e) => e.event === 'subscribed', 'subscribed');
    // Stop reading: the socket's receive buffer fills and the server's send buffer with it.
    (ws.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    for (let i = 1; i <= 150; i++) await change(svc, symbol, 100 + i / 100);
    const rss = process.memoryUsage().rss;
    (ws.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    await ws.waitFor((e) => e.event === 'quote' && e.data?.price === 101.5, 'the latest price once it reads again', 10_000);
    expect(ws.quotes(symbol).at(-1)).toBe(101.5);
    expect(process.memoryUsage().rss - rss).toBeLessThan(64 * 1024 * 1024);
    ws.close();
  });
});

describe('the WebSocket API when data requires credentials', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ API_KEYS: API_KEY, DATA_REQUIRES_AUTH: 'true', STREAM_REFRESH_SECONDS: '0' }, { provider, init: true });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('when a client subscribes before auth, then it is told to authenticate; a token by message then opens its session', async () => {
    const symbol = uniqueSymbol('AUTH');
    provider.set(symbol, 100);
    const ws = await connect(svc);
    ws.send({ action: 'subscribe', symbols: [symbol] });
    const refusal = await ws.waitFor((e) => e.event === 'error', 'not authenticated');
    expect(refusal.code).toBe(401);
    const token = await svc.login(ADMIN.username, ADMIN.password);
    ws.send({ action: 'auth', token });
    await ws.waitFor((e) => e.event === 'authenticated', 'authenticated');
    ws.send({ action: 'subscribe', symbols: [symbol] });
    await ws.waitFor((e) => e.event === 'quote', 'the quote');
    expect(ws.quotes(symbol)).toEqual([100]);
    ws.close();
  });

  it('when a client authenticates by message with an API key, then it subscribes; with a bad key, error and close 1008', async () => {
    const ws = await connect(svc);
    ws.send({ action: 'auth', key: API_KEY });
    await ws.waitFor((e) => e.event === 'authenticated', 'authenticated');
    const bad = await connect(svc);
    bad.send({ action: 'auth', key: 'wrong-key-wrong-key-wrong-key' });
    const refusal = await bad.waitFor((e) => e.event === 'error', 'refused');
    expect(refusal.code).toBe(401);
    expect(await bad.waitForClose()).toBe(1008);
    ws.close();
  });

  it('when a client authenticates by header, then it subscribes at once', async () => {
    const symbol = uniqueSymbol('HDR');
    provider.set(symbol, 100);
    const ws = await connect(svc, { 'X-API-Key': API_KEY });
    ws.send({ action: 'subscribe', symbols: [symbol] });
    await ws.waitFor((e) => e.event === 'quote', 'the quote');
    ws.close();
  });

  it('when another path asks to upgrade, then it is answered as the plain request it is', async () => {
    const ws = new WebSocket(`${svc.url.replace(/^http/, 'ws')}/api/health`);
    const status = await new Promise<number>((resolve) => {
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.once('error', () => resolve(-1));
    });
    expect(status).toBe(200);
  });
});

describe('GET /api/ws: the handshake meets the caller step', () => {
  it('when an address opens more WebSocket handshakes than its quota, then each was counted and the one over it is refused with the 429 envelope and RateLimit headers', async () => {
    // Quotas count per address in Redis: its own redis-server, as every quota test has (the suites share one).
    const redis = await startRedis();
    const provider = new ControlledProvider();
    const limited = await startTestService({ CACHE_URL: redis.url, RATE_LIMIT_ANONYMOUS_PER_MINUTE: '2', STREAM_REFRESH_SECONDS: '0' }, { provider });
    try {
      const held = [await connect(limited), await connect(limited)];
      const refused = (await connect(limited).catch((err: unknown) => err)) as { status?: number; body?: string; headers?: Record<string, string> };
      expect(refused.status).toBe(429);
      expect(JSON.parse(refused.body!)).toMatchObject({ success: false, code: 429 });
      expect(refused.headers?.['ratelimit']).toMatch(/^"anonymous";r=0;t=\d+$/);
      expect(Number(refused.headers?.['retry-after'])).toBeGreaterThan(0);
      // The handshakes used the same quota as REST: the next REST call is over it too.
      expect((await limited.fetch('/api/quotes/AAPL')).status).toBe(429);
      for (const ws of held) ws.close();
    } finally {
      await limited.close();
      await redis.stop();
    }
  });
});
