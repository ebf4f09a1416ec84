/**
 * Identity followed for the life of a connection (DESIGN 24), across a fleet: two instances share one
 * redis-server (started by this file) and one SQLite file. Streams and sessions are opened on B; the
 * key is revoked, the user deleted or its password changed on A (over HTTP, or by the CLI's code in
 * another process's stead); B closes them within 5 s and both instances refuse the old credential
 * at once. A credential's expiry closes what it opened, on time.
 */
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAccounts } from '../../src/cli/open-accounts.js';
import { loadConfig } from '../../src/config.js';
import { RECHECK_INTERVAL_MS } from '../../src/services/stream/credential-watch.js';
import { createLogger } from '../../src/infra/logger.js';
import { TokenService } from '../../src/infra/auth/tokens.js';
import { openUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { noteSecrets } from '../helpers/log-files.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { ADMIN, startTestService, testEnv, type TestService } from '../helpers/service.js';
import { openStream, type TestStream } from '../helpers/sse.js';
import { openWs, type TestWs } from '../helpers/ws-client.js';
import { waitFor } from '../helpers/wait-for.js';

/** DESIGN 24: what closes a caller's streams does so within this, on every instance. */
const CLOSE_WITHIN_MS = 5000;
const json = { 'content-type': 'application/json' };
const provider = new ControlledProvider();
const opened: Array<{ close(): void }> = [];

let redis: RedisProcess;
let a: TestService;
let b: TestService;
let adminToken: string;

beforeAll(async () => {
  redis = await startRedis();
  // The refresher is off: nothing but the identity event (or an expiry) may close a stream.
  const env = { CACHE_URL: `${redis.url}/0`, STREAM_REFRESH_SECONDS: '0' };
  a = await startTestService(env, { provider, init: true });
  b = await startTestService(env, { provider, dir: a.dir });
  adminToken = await a.login(ADMIN.username, ADMIN.password);
});

afterAll(async () => {
  for (const client of opened) client.close();
  await b?.close();
  await a?.close();
  await redis?.stop();
});

async function admin(svc: TestService, method: string, path: string, body?: unknown): Promise<Response> {
  return svc.fetch(path, { method, headers: { ...json, authorization: `Bearer ${adminToken}` }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
}

async function newKey(name: string, extra: Record<string, unknown> = {}): Promise<{ id: string; key: string }> {
  const res = await admin(a, 'POST', '/api/admin/api-keys', { name, role: 'read', ...extra });
  expect(res.status).toBe(201);
  const created = ((await res.json()) as { data: { id: string; key: string } }).data;
  noteSecrets(created.key);
  return created;
}

async function newUser(): Promise<{ username: string; password: string }> {
  const user = { username: `u-${randomBytes(4).toString('hex')}`, password: `pw-${randomBytes(8).toString('hex')}` };
  noteSecrets(user.password);
  expect((await admin(a, 'POST', '/api/admin/users', { ...user, is_admin: false })).status).toBe(201);
  return user;
}

/** A WebSocket on `svc` with `headers`, following `symbol` (its first quote arrived). */
async function wsFollowing(svc: TestService, symbol: string, headers: Record<string, string>): Promise<TestWs> {
  const ws = await openWs(`${svc.url.replace(/^http/, 'ws')}/api/ws`, headers);
  opened.push(ws);
  ws.send({ action: 'subscribe', symbols: [symbol] });
  await ws.waitFor((e) => e.event === 'subscribed', 'subscribed');
  return ws;
}

/** An SSE stream on `svc` with `headers`, its first quote arrived. */
async function sseFollowing(svc: TestService, symbol: string, headers: Record<string, string>): Promise<TestStream> {
  const stream = await openStream(`${svc.url}/api/stream?symbols=${symbol}`, headers);
  opened.push(stream);
  expect(stream.status, stream.body).toBe(200);
  await stream.waitForEvents(1);
  return stream;
}

/** The quote of `symbol` on `svc` with `headers`: its status. */
async function quoteStatus(svc: TestService, symbol: string, headers: Record<string, string>): Promise<number> {
  return (await svc.fetch(`/api/quotes/${symbol}`, { headers })).status;
}

/**
 * Waits until the WebSocket and the SSE stream are closed by the server, then checks how: the socket
 * with an `error` event (401, `message`) and close 1008, the stream with an `error` event carrying
 * the 401 envelope before its end. Resolves to how long each took after `since` (performance.now()).
 */
async function closedFor(ws: TestWs, stream: TestStream, since: number, message: string, what: string): Promise<{ wsMs: number; sseMs: number }> {
  await waitFor(() => ws.closeCode !== undefined && stream.ended, { timeoutMs: CLOSE_WITHIN_MS + 2000, message: `${what}: the WebSocket and the SSE stream to close` });
  const wsMs = Math.round(ws.closedAt! - since);
  const sseMs = Math.round(stream.endedAt! - since);
  expect(wsMs, `${what}: the WebSocket closed ${wsMs} ms after the change`).toBeLessThan(CLOSE_WITHIN_MS);
  expect(sseMs, `${what}: the SSE stream ended ${sseMs} ms after the change`).toBeLessThan(CLOSE_WITHIN_MS);
  expect(ws.closeCode).toBe(1008);
  expect(ws.events.at(-1)).toMatchObject({ event: 'error', code: 401, error: message });
  const last = stream.events.at(-1)!;
  expect(last.event).toBe('error');
  expect(JSON.parse(last.data)).toEqual({ success: false, error: message, code: 401, detail: message });
  return { wsMs, sseMs };
}

describe('identity followed while a connection lives, across two instances', () => {
  it('key revoked: when a managed key is revoked on A, then its WebSocket and SSE stream on B close within 5 s, and the key is 401 on both at once', async () => {
    const symbol = uniqueSymbol('IDK');
    provider.set(symbol, 100);
    const { id, key } = await newKey('streamer');
    const ws = await wsFollowing(b, symbol, { 'x-api-key': key });
    const stream = await sseFollowing(b, symbol, { 'x-api-key': key });
    // A stream of another caller stays.
    const bystander = await sseFollowing(b, symbol, {});

    const since = performance.now();
    expect((await admin(a, 'DELETE', `/api/admin/api-keys/${id}`)).status).toBe(204);
    const restA = await quoteStatus(a, symbol, { 'x-api-key': key });
    const restB = await quoteStatus(b, symbol, { 'x-api-key': key });

    expect([restA, restB], 'the revoked key right after the revocation, on A and B').toEqual([401, 401]);
    const took = await closedFor(ws, stream, since, 'API key has been revoked', 'key revoked');
    console.info(`key revoked on A: WebSocket on B closed after ${took.wsMs} ms, SSE stream after ${took.sseMs} ms`);
    expect(bystander.ended).toBe(false);
  });

  it('user deleted: when a user is deleted on A, then the streams on B opened with any of its tokens close within 5 s, and its tokens are 401 on both at once', async () => {
    const symbol = uniqueSymbol('IDU');
    provider.set(symbol, 100);
    const user = await newUser();
    // Two tokens of one user, from two instances: both are that user.
    const first = await a.login(user.username, user.password);
    const second = await b.login(user.username, user.password);
    const ws = await openWs(`${b.url.replace(/^http/, 'ws')}/api/ws`);
    opened.push(ws);
    ws.send({ action: 'auth', token: first });
    await ws.waitFor((e) => e.event === 'authenticated', 'authenticated');
    ws.send({ action: 'subscribe', symbols: [symbol] });
    await ws.waitFor((e) => e.event === 'subscribed', 'subscribed');
    const stream = await sseFollowing(b, symbol, { authorization: `Bearer ${second}` });

    const since = performance.now();
    expect((await admin(a, 'DELETE', `/api/admin/users/${user.username}`)).status).toBe(204);
    const statuses = [];
    for (const svc of [a, b]) for (const token of [first, second]) statuses.push(await quoteStatus(svc, symbol, { authorization: `Bearer ${token}` }));

    expect(statuses, 'both tokens right after the deletion, on A and B').toEqual([401, 401, 401, 401]);
    const took = await closedFor(ws, stream, since, 'Token has been revoked', 'user deleted');
    console.info(`user deleted on A: WebSocket on B closed after ${took.wsMs} ms, SSE stream after ${took.sseMs} ms`);
  });

  it('password changed: when a user changes its password on A, then its streams on B close within 5 s, its old tokens are 401 on both at once and the new one works', async () => {
    const symbol = uniqueSymbol('IDP');
    provider.set(symbol, 100);
    const user = await newUser();
    const token = await b.login(user.username, user.password);
    const ws = await wsFollowing(b, symbol, { authorization: `Bearer ${token}` });
    const stream = await sseFollowing(b, symbol, { authorization: `Bearer ${token}` });

    const since = performance.now();
    const changed = await a.fetch('/api/auth/change-password', {
      method: 'POST',
      headers: { ...json, authorization: `Bearer ${token}` },
      body: JSON.stringify({ old_password: user.password, new_password: `${user.password}-new` }),
    });
    expect(changed.status).toBe(200);
    const fresh = ((await changed.json()) as { data: { access_token: string } }).data.access_token;
    noteSecrets(`${user.password}-new`, fresh);
    const old = [await quoteStatus(a, symbol, { authorization: `Bearer ${token}` }), await quoteStatus(b, symbol, { authorization: `Bearer ${token}` })];

    expect(old, 'the old token right after the change, on A and B').toEqual([401, 401]);
    const took = await closedFor(ws, stream, since, 'Token has been revoked', 'password changed');
    console.info(`password changed on A: WebSocket on B closed after ${took.wsMs} ms, SSE stream after ${took.sseMs} ms`);
    expect(await quoteStatus(b, symbol, { authorization: `Bearer ${fresh}` })).toBe(200);
    const again = await sseFollowing(b, symbol, { authorization: `Bearer ${fresh}` });
    expect(again.ended).toBe(false);
  });

  it('CLI: when a key is revoked, a user deleted or a password set by the CLI, then the streams on B close within 5 s and REST refuses at once on both', async () => {
    const symbol = uniqueSymbol('IDC');
    provider.set(symbol, 100);
    const { id, key } = await newKey('cli-revoked');
    const deleted = await newUser();
    const reset = await newUser();
    const deletedToken = await b.login(deleted.username, deleted.password);
    const resetToken = await b.login(reset.username, reset.password);
    const cases: Array<{ what: string; headers: Record<string, string>; message: string; act: (cli: Cli) => Promise<unknown> }> = [
      { what: 'mds keys revoke', headers: { 'x-api-key': key }, message: 'API key has been revoked', act: (cli: Cli) => cli.keys.revoke(id, { actor: 'cli' }) },
      { what: 'mds users delete', headers: { authorization: `Bearer ${deletedToken}` }, message: 'Token has been revoked', act: (cli: Cli) => cli.accounts.deleteUser(deleted.username) },
      {
        what: 'mds users set-password',
        headers: { authorization: `Bearer ${resetToken}` },
        message: 'Token has been revoked',
        act: (cli: Cli) => cli.accounts.setPassword(reset.username, `${reset.password}-reset`),
      },
    ];
    for (const c of cases) {
      const ws = await wsFollowing(b, symbol, c.headers);
      const stream = await sseFollowing(b, symbol, c.headers);
      // What the command runs, in this process: the accounts over the same database and Redis.
      const cli = await openAccounts(a.config, createLogger({ level: 'silent' }));
      const since = performance.now();
      try {
        await c.act(cli);
      } finally {
        await cli.close();
      }
      const rest = [await quoteStatus(a, symbol, c.headers), await quoteStatus(b, symbol, c.headers)];

      expect(rest, `${c.what}: the old credential right after, on A and B`).toEqual([401, 401]);
      const took = await closedFor(ws, stream, since, c.message, c.what);
      console.info(`${c.what}: WebSocket on B closed after ${took.wsMs} ms, SSE stream after ${took.sseMs} ms`);
    }
  });

  it('expiry: when the token a WebSocket and an SSE stream were opened with expires, then both close on time', async () => {
    const symbol = uniqueSymbol('IDE');
    provider.set(symbol, 100);
    const user = await newUser();
    const db = await openUserStore(a.config.database.url, { runMigrations: false });
    const record = await db.store.findByUsername(user.username);
    await db.close();
    // A token as the service issues them, with a lifetime of 2 s (the shortest a login gives is a minute).
    const tokens = new TokenService({ secret: a.config.auth.secretKey!, ttlMs: 2000 });
    const issued = tokens.sign({ username: user.username, isAdmin: false, passwordHash: record!.passwordHash });
    noteSecrets(issued.token);
    const ws = await wsFollowing(b, symbol, { authorization: `Bearer ${issued.token}` });
    const stream = await sseFollowing(b, symbol, { authorization: `Bearer ${issued.token}` });
    const expiresAt = performance.now() + (issued.expiresAt.getTime() - Date.now());

    await waitFor(() => ws.closeCode !== undefined && stream.ended, { timeoutMs: 5000, message: 'the WebSocket and the SSE stream to close at the expiry' });

    const lateWs = Math.round(ws.closedAt! - expiresAt);
    const lateSse = Math.round(stream.endedAt! - expiresAt);
    expect(Math.abs(lateWs), `the WebSocket closed ${lateWs} ms after the token's expiry`).toBeLessThan(1000);
    expect(Math.abs(lateSse), `the SSE stream ended ${lateSse} ms after the token's expiry`).toBeLessThan(1000);
    expect(ws.closeCode).toBe(1008);
    expect(ws.events.at(-1)).toMatchObject({ event: 'error', code: 401, error: 'Token has expired' });
    expect(JSON.parse(stream.events.at(-1)!.data)).toMatchObject({ code: 401, error: 'Token has expired' });
    console.info(`token expiry: WebSocket closed ${lateWs} ms, SSE stream ${lateSse} ms after the expiry`);
  });

  it('expiry: when a managed key with expires_at expires, then what it opened closes on time', async () => {
    const symbol = uniqueSymbol('IDX');
    provider.set(symbol, 100);
    const expiresAtMs = Date.now() + 2500;
    const { key } = await newKey('short-lived', { expires_at: new Date(expiresAtMs).toISOString() });
    const ws = await wsFollowing(b, symbol, { 'x-api-key': key });
    const stream = await sseFollowing(b, symbol, { 'x-api-key': key });
    const expiresAt = performance.now() + (expiresAtMs - Date.now());

    await waitFor(() => ws.closeCode !== undefined && stream.ended, { timeoutMs: 5000, message: 'the WebSocket and the SSE stream to close at the expiry' });

    const lateWs = Math.round(ws.closedAt! - expiresAt);
    const lateSse = Math.round(stream.endedAt! - expiresAt);
    expect(Math.abs(lateWs), `the WebSocket closed ${lateWs} ms after the key's expiry`).toBeLessThan(1000);
    expect(Math.abs(lateSse), `the SSE stream ended ${lateSse} ms after the key's expiry`).toBeLessThan(1000);
    expect(ws.events.at(-1)).toMatchObject({ event: 'error', code: 401, error: 'API key has expired' });
    expect(JSON.parse(stream.events.at(-1)!.data)).toMatchObject({ code: 401, error: 'API key has expired' });
  });
});

describe('MCP: stateless, identified on every call', () => {
  const toolCall = (symbol: string) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_quote', arguments: { symbol } } });
  const mcpPost = (svc: TestService, key: string, symbol: string) =>
    svc.fetch('/mcp', { method: 'POST', headers: { ...json, accept: 'application/json, text/event-stream', 'x-api-key': key }, body: JSON.stringify(toolCall(symbol)) });

  it('/mcp: when a key is revoked on A, then its next MCP call is HTTP 401 on both instances', async () => {
    const symbol = uniqueSymbol('IDM');
    provider.set(symbol, 100);
    const { id, key } = await newKey('mcp-http');
    const before = await mcpPost(b, key, symbol);
    expect(before.status).toBe(200);
    expect(((await before.json()) as { result: { isError?: boolean } }).result.isError).toBeUndefined();

    expect((await admin(a, 'DELETE', `/api/admin/api-keys/${id}`)).status).toBe(204);

    for (const svc of [b, a]) {
      const after = await mcpPost(svc, key, symbol);
      expect(after.status).toBe(401);
      expect(await after.json()).toMatchObject({ success: false, code: 401, error: 'Invalid API key' });
    }
  });

  it('stdio (`mds mcp`): when the key it was started with is revoked, then its next tool call is a 401 tool error', async () => {
    const symbol = uniqueSymbol('IDS');
    provider.set(symbol, 100);
    const { id, key } = await newKey('mcp-stdio');
    // What `mds mcp` does with MCP_API_KEY, over an in-memory pair instead of stdin/stdout.
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await b.mcp.connect(serverSide, key);
    const client = new Client({ name: 'identity-test', version: '1.0.0' });
    await client.connect(clientSide);
    opened.push({ close: () => void client.close() });
    const before = await client.callTool({ name: 'get_quote', arguments: { symbol } });
    expect(before.isError).toBeFalsy();

    expect((await admin(a, 'DELETE', `/api/admin/api-keys/${id}`)).status).toBe(204);
    const after = await client.callTool({ name: 'get_quote', arguments: { symbol } });

    expect(after.isError).toBe(true);
    expect(after._meta).toMatchObject({ 'mds/status': 401, 'mds/error': { code: 401, error: 'Invalid API key' } });
  });
});

describe('identity followed when the announcement is lost', () => {
  let c: TestService;
  beforeAll(async () => {
    // A third instance of the fleet that trusts a user it read for 1 s (AUTH_CACHE_SECONDS).
    c = await startTestService({ CACHE_URL: `${redis.url}/0`, STREAM_REFRESH_SECONDS: '0', AUTH_CACHE_SECONDS: '1' }, { provider, dir: a.dir });
  });
  afterAll(async () => {
    await c?.close();
  });

  it(`backstop: when the CLI cannot reach Redis to announce a revocation and a deletion, then each instance's own check closes the streams within AUTH_CACHE_SECONDS + ${RECHECK_INTERVAL_MS / 1000} s`, async () => {
    const symbol = uniqueSymbol('IDB');
    provider.set(symbol, 100);
    const { id, key } = await newKey('unannounced');
    const user = await newUser();
    const token = await c.login(user.username, user.password);
    const byKey = { ws: await wsFollowing(c, symbol, { 'x-api-key': key }), sse: await sseFollowing(c, symbol, { 'x-api-key': key }) };
    const byToken = { ws: await wsFollowing(c, symbol, { authorization: `Bearer ${token}` }), sse: await sseFollowing(c, symbol, { authorization: `Bearer ${token}` }) };
    // The CLI's code with a Redis nobody answers at: nothing is announced.
    const unreachable = loadConfig(testEnv(a.dir, { CACHE_URL: 'redis://127.0.0.1:1/0' }), { readFile: false });
    const cli = await openAccounts(unreachable, createLogger({ level: 'silent' }));
    const since = performance.now();
    try {
      await cli.keys.revoke(id, { actor: 'cli' });
      await cli.accounts.deleteUser(user.username);
    } finally {
      await cli.close();
    }

    const boundMs = c.config.auth.userCacheTtlMs + RECHECK_INTERVAL_MS + 1000;
    for (const [what, opened, message] of [
      ['the revoked key', byKey, 'API key has been revoked'],
      ['the deleted user', byToken, 'Token has been revoked'],
    ] as const) {
      await waitFor(() => opened.ws.closeCode !== undefined && opened.sse.ended, { timeoutMs: boundMs + 2000, message: `${what}: the streams to close` });
      const wsMs = Math.round(opened.ws.closedAt! - since);
      const sseMs = Math.round(opened.sse.endedAt! - since);
      expect(wsMs, `${what}: the WebSocket closed ${wsMs} ms after the unannounced change`).toBeLessThan(boundMs);
      expect(sseMs, `${what}: the SSE stream ended ${sseMs} ms after the unannounced change`).toBeLessThan(boundMs);
      expect(opened.ws.events.at(-1)).toMatchObject({ event: 'error', code: 401, error: message });
      expect(JSON.parse(opened.sse.events.at(-1)!.data)).toMatchObject({ code: 401, error: message });
      console.info(`unannounced (${what}): WebSocket closed after ${wsMs} ms, SSE stream after ${sseMs} ms`);
    }
    expect(await quoteStatus(c, symbol, { 'x-api-key': key })).toBe(401);
    expect(await quoteStatus(c, symbol, { authorization: `Bearer ${token}` })).toBe(401);
  });
});

type Cli = Awaited<ReturnType<typeof openAccounts>>;
