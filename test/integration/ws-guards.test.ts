/**
 * GET /api/ws as a guarded door (DESIGN 24; issue 46, defects 2, 5, 7, 8 and 12), over real sockets
 * against the real service: every action priced and charged before its work, one `auth` per socket,
 * actions answered in the order sent, foreign Origins refused, and only answers to the server's own
 * pings keeping a connection.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { noteSecrets } from '../helpers/log-files.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';
import { openWs, type TestWs } from '../helpers/ws-client.js';

const opened: TestWs[] = [];
const wsUrl = (svc: TestService) => `${svc.url.replace(/^http/, 'ws')}/api/ws`;

async function connect(svc: TestService, headers: Record<string, string> = {}): Promise<TestWs> {
  const ws = await openWs(wsUrl(svc), headers);
  opened.push(ws);
  return ws;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

afterAll(() => {
  for (const ws of opened) ws.close();
});

describe('GET /api/ws: every action is charged before its work', () => {
  const provider = new ControlledProvider();
  let redis: RedisProcess;
  let svc: TestService;
  beforeAll(async () => {
    // Quotas count per address in Redis: its own redis-server, as every quota test has.
    redis = await startRedis();
    svc = await startTestService({ CACHE_URL: redis.url, RATE_LIMIT_ANONYMOUS_PER_MINUTE: '30', STREAM_REFRESH_SECONDS: '0', STREAM_MAX_PER_ADDRESS: '5' }, { provider });
  });
  afterAll(async () => {
    await svc?.close();
    await redis?.stop();
  });

  it('when 5 anonymous sockets subscribe to 50 unknown symbols 10 times a second for 5 s, then the upstream look-ups stay within what the quota paid for', async () => {
    const sockets = await Promise.all(Array.from({ length: 5 }, () => connect(svc)));
    const lookups = () => [...provider.calls.values()].reduce((sum, n) => sum + n, 0);
    const before = lookups();
    let sent = 0;
    const until = Date.now() + 5000;
    while (Date.now() < until) {
      for (const ws of sockets) {
        if (ws.ws.readyState !== WebSocket.OPEN) continue;
        ws.send({ action: 'subscribe', symbols: Array.from({ length: 50 }, () => uniqueSymbol('PRICED')) });
        sent += 1;
      }
      await sleep(100);
    }
    await sleep(500);
    const made = lookups() - before;
    const answered = sockets.reduce((sum, ws) => sum + ws.events.filter((e) => e.event === 'subscribed').length, 0);
    const refused = sockets.map((ws) => ws.events.filter((e) => e.event === 'error' && e.code === 429).length);
    console.log(`priced subscribe: ${sent} subscribes of 50 unknown symbols sent, ${answered} answered, ${made} upstream look-ups; 429s per socket ${refused.join(', ')}; close codes ${sockets.map((ws) => ws.closeCode).join(', ')}`);
    // 30 points a minute for the address: 5 handshakes, then 5 points a subscribe (one per started
    // 10 symbols, as getQuotes): at most 5 subscribes, 250 look-ups. On 1b454cb: 11,500 for 5 points.
    expect(made).toBeLessThanOrEqual(250);
    expect(answered).toBeLessThanOrEqual(5);
    for (const count of refused) expect(count).toBeGreaterThan(0);
    // Refused again and again: closed after a few refusals in a row, not answered for ever.
    for (const ws of sockets) expect(await ws.waitForClose()).toBe(1008);
  });
});

describe('GET /api/ws: the actions of a caller are metered', () => {
  const READ_KEY = `ws-usage-read-${randomBytes(8).toString('hex')}`;
  const ADMIN_KEY = `ws-usage-admin-${randomBytes(8).toString('hex')}`;
  const provider = new ControlledProvider();
  let svc: TestService;
  beforeAll(async () => {
    noteSecrets(READ_KEY, ADMIN_KEY);
    svc = await startTestService({ API_KEYS: `${ADMIN_KEY},${READ_KEY}`, STREAM_REFRESH_SECONDS: '0' }, { provider });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('when a key sends 5 actions over a WebSocket, then the usage report counts them for that key', async () => {
    const symbol = uniqueSymbol('METER');
    provider.set(symbol, 100);
    const ws = await connect(svc, { 'X-API-Key': READ_KEY });
    const actions: unknown[] = [{ action: 'ping' }, { action: 'subscribe', symbols: [symbol] }, { action: 'ping' }, { action: 'unsubscribe', symbols: [symbol] }, { action: 'ping' }];
    for (const action of actions) ws.send(action);
    await waitFor(() => ws.events.filter((e) => e.event === 'pong').length === 3, { message: 'three pongs' });
    ws.close();
    const res = await svc.fetch('/api/admin/usage?days=1', { headers: { 'X-API-Key': ADMIN_KEY } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: Array<{ caller_kind: string; caller: string; requests: number }> };
    // The administrator's own call is metered once it ends: the reader's row is the only one yet.
    const rows = body.data.filter((r) => r.caller_kind === 'api-key');
    console.log(`usage after 5 WebSocket actions: ${JSON.stringify(rows.map((r) => r.requests))}`);
    // Each action once (the handshake is counted against the quota, not in this report).
    // (The report's breakdown by door and operation, `ws:ping`..., is another change's: only the
    // totals exist to assert on here.) On 1b454cb: the actions were not counted.
    expect(rows.map((r) => r.requests)).toEqual([actions.length]);
  });
});

describe('GET /api/ws: one auth per socket', () => {
  const KEY = `ws-auth-once-${randomBytes(8).toString('hex')}`;
  const provider = new ControlledProvider();
  let svc: TestService;
  beforeAll(async () => {
    noteSecrets(KEY);
    svc = await startTestService({ API_KEYS: KEY, STREAM_REFRESH_SECONDS: '0' }, { provider, init: true });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('when five wrong keys and then the right one are sent back to back, then the first wrong one closes the socket (1008) and the right one is never tried', async () => {
    const ws = await connect(svc);
    // Shaped like managed keys, so each is looked up (the slow path) while the right one is not.
    for (let i = 0; i < 5; i++) ws.send({ action: 'auth', key: `mds_${randomBytes(32).toString('base64url')}` });
    ws.send({ action: 'auth', key: KEY });
    expect(await ws.waitForClose()).toBe(1008);
    await sleep(200);
    console.log(`five wrong keys then the right one: ${JSON.stringify(ws.events.map((e) => [e.event, e.code]))}`);
    expect(ws.events.map((e) => [e.event, e.code])).toEqual([['error', 401]]);
  });

  it('when a socket sends a second auth, then it is refused and closed (1008), whether the first came by message or by header', async () => {
    const byMessage = await connect(svc);
    byMessage.send({ action: 'auth', key: KEY });
    await byMessage.waitFor((e) => e.event === 'authenticated', 'authenticated');
    byMessage.send({ action: 'auth', token: await svc.login(ADMIN.username, ADMIN.password) });
    expect(await byMessage.waitForClose()).toBe(1008);
    expect(byMessage.events.at(-1)).toMatchObject({ event: 'error', code: 422 });
    const byHeader = await connect(svc, { 'X-API-Key': KEY });
    byHeader.send({ action: 'auth', key: KEY });
    expect(await byHeader.waitForClose()).toBe(1008);
    expect(byHeader.events.map((e) => e.event)).toEqual(['error']);
  });
});

describe('GET /api/ws: actions are answered in the order sent', () => {
  const provider = new ControlledProvider();
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ DATA_REQUIRES_AUTH: 'true', STREAM_REFRESH_SECONDS: '0' }, { provider, init: true });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('when auth and subscribe are sent back to back, 20 times, then each answers authenticated, subscribed, then the quote', async () => {
    const symbol = uniqueSymbol('ORDER');
    provider.set(symbol, 100);
    const token = await svc.login(ADMIN.username, ADMIN.password);
    const orders: string[][] = [];
    for (let run = 0; run < 20; run++) {
      const ws = await connect(svc);
      ws.send({ action: 'auth', token });
      ws.send({ action: 'subscribe', symbols: [symbol] });
      await waitFor(() => ws.events.length >= 3 || ws.closeCode !== undefined, { timeoutMs: 1000 }).catch(() => undefined);
      orders.push(ws.events.slice(0, 3).map((e) => (e.event === 'error' ? `error ${e.code}` : e.event)));
      ws.close();
    }
    const wrong = orders.filter((order) => order.join() !== 'authenticated,subscribed,quote');
    console.log(`auth + subscribe back to back: ${20 - wrong.length} of 20 in order; out of order: ${JSON.stringify(wrong)}`);
    expect(wrong).toEqual([]);
  });
});

describe('GET /api/ws: the Origin of a browser page', () => {
  const provider = new ControlledProvider();
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ CORS_ORIGINS: 'https://app.example', STREAM_REFRESH_SECONDS: '0' }, { provider });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('when a page of another site opens the socket, then the upgrade is refused with the 403 envelope before any socket is made', async () => {
    for (const origin of ['https://evil.example', 'null', `http://127.0.0.1.evil.example:${new URL(svc.url).port}`]) {
      const refused = (await connect(svc, { Origin: origin }).catch((err: unknown) => err)) as { status?: number; body?: string };
      expect({ origin, status: refused.status }).toEqual({ origin, status: 403 });
      expect(JSON.parse(refused.body!)).toMatchObject({ success: false, code: 403 });
    }
    expect(svc.streams.size).toBe(0);
  });

  it("when the page is the service's own, one CORS_ORIGINS lists, or the client sends no Origin, then the socket opens", async () => {
    const own = new URL(svc.url);
    for (const origin of [own.origin, `https://${own.host}`, 'https://app.example', undefined]) {
      const ws = await connect(svc, origin === undefined ? {} : { Origin: origin });
      ws.send({ action: 'ping' });
      await ws.waitFor((e) => e.event === 'pong', `pong (${origin ?? 'no Origin'})`);
      ws.close();
    }
  });
});

describe('GET /api/ws: heartbeat', () => {
  const provider = new ControlledProvider();
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ STREAM_HEARTBEAT_SECONDS: '1', STREAM_REFRESH_SECONDS: '0' }, { provider });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it("when a client sends pongs of its own but never answers the server's pings, then it is dropped within two beats; a client that answers stays", async () => {
    // `autoPong: false`: the client never answers a ping; it sends unsolicited pongs instead.
    const silent = new WebSocket(wsUrl(svc), { autoPong: false });
    let closedAfterMs: number | undefined;
    const started = performance.now();
    silent.on('close', () => (closedAfterMs = performance.now() - started));
    await new Promise((resolve, reject) => {
      silent.once('open', resolve);
      silent.once('error', reject);
    });
    const pongs = setInterval(() => {
      if (silent.readyState === WebSocket.OPEN) silent.pong(Buffer.from('alive'));
    }, 100);
    const answering = await connect(svc);
    try {
      await waitFor(() => closedAfterMs !== undefined, { timeoutMs: 4000, message: 'the silent client to be dropped' }).catch(() => undefined);
      console.log(`unsolicited pongs every 100 ms, heartbeat 1 s: dropped after ${closedAfterMs?.toFixed(0) ?? 'never (4 s)'} ms`);
      expect(closedAfterMs).toBeDefined();
      expect(closedAfterMs!).toBeLessThan(3000);
      expect(answering.closeCode).toBeUndefined();
      answering.send({ action: 'ping' });
      await answering.waitFor((e) => e.event === 'pong', 'the answering client still served');
    } finally {
      clearInterval(pongs);
      silent.terminate();
      answering.close();
    }
  });
});
