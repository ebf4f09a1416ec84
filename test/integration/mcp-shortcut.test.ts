/**
 * The tool-call shortcut (mcp/shortcut.ts) answers as the SDK's way does: the same tool calls are
 * sent over real sockets to a service with the shortcut and to one without it (on the same Redis, so
 * both read the same cached answers), and their JSON-RPC answers compared. The shortcut still counts
 * each call as its operation (quota, usage) and refuses bad credentials at the transport.
 */
import { describe, expect, it } from 'vitest';
import { servicesOnOwnRedis } from '../helpers/own-redis.js';
import type { TestService } from '../helpers/service.js';

const API_KEY = 'mcp-shortcut-test-api-key-0123456789';
const { start } = servicesOnOwnRedis({ API_KEYS: API_KEY });

let nextId = 1;

/** One tools/call as the SDK's client sends it over Streamable HTTP. */
async function callTool(svc: TestService, name: string, args: Record<string, unknown>, headers: Record<string, string> = {}, id: string | number = nextId++) {
  const res = await svc.fetch('/mcp', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }),
  });
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type'), requestId: res.headers.get('x-request-id')!, rateLimit: res.headers.get('ratelimit'), body: JSON.parse(text) as Record<string, unknown> };
}

/**
 * True when the shortcut answered: under a quota, its answer carries the `RateLimit` headers of the
 * call it counted, while the SDK's way counts its in-process request and answers /mcp without them.
 */
function viaShortcut(answer: { rateLimit: string | null }): boolean {
  return answer.rateLimit !== null;
}

describe('mcp: the tool-call shortcut answers as the SDK does', () => {
  it('when cached reads are called as tools on a service with the shortcut and on one without, then the JSON-RPC answers are equal, and the shortcut answered them', async () => {
    const env = { RATE_LIMIT_ANONYMOUS_PER_MINUTE: '100000' };
    const shortcut = await start(env);
    const full = await start(env, { fastPath: false });
    const calls: Array<[string, Record<string, unknown>, string]> = [
      ['get_quote', { symbol: 'AAPL' }, '/api/quotes/AAPL'],
      ['get_quotes', { symbols: 'AAPL,MSFT' }, '/api/quotes?symbols=AAPL%2CMSFT'],
      ['get_history', { symbol: 'AAPL', interval: '1d', range: '1mo' }, '/api/history/AAPL?interval=1d&range=1mo'],
      ['search_symbols', { q: 'apple' }, '/api/search?q=apple'],
      ['get_indices', {}, '/api/indices'],
    ];
    for (const [name, args, rest] of calls) {
      // A REST read validates the target and fills the cache; the tool call then maps to that very target.
      expect((await shortcut.fetch(rest)).status, rest).toBe(200);
      let pair: Array<Awaited<ReturnType<typeof callTool>>> = [];
      let shortcutTook = false;
      // On a loaded machine the target may be half-way through its second, when one call goes the full
      // way to validate it again: such a pair is sent again.
      for (let attempt = 0; attempt < 5 && !shortcutTook; attempt++) {
        const id = `call-${name}-${attempt}`;
        pair = [await callTool(shortcut, name, args, {}, id), await callTool(full, name, args, {}, id)];
        shortcutTook = viaShortcut(pair[0]!);
        if (!shortcutTook) await shortcut.fetch(rest);
      }
      expect(shortcutTook, `${name} via the shortcut`).toBe(true);
      const [a, b] = pair;
      expect(a!.status, name).toBe(200);
      expect([a!.status, a!.type], name).toEqual([b!.status, b!.type]);
      // The front door's headers reach the shortcut's one writeHead as they reach the SDK's answer.
      expect([a!.requestId, b!.requestId], name).toEqual([expect.stringMatching(/^[0-9a-f-]{36}$/), expect.stringMatching(/^[0-9a-f-]{36}$/)]);
      expect(a!.body, name).toEqual(b!.body);
      const result = a!.body.result as { structuredContent?: unknown; isError?: boolean };
      expect(result.isError, name).toBeUndefined();
      const restBody = (await (await shortcut.fetch(rest)).json()) as unknown;
      expect(result.structuredContent, name).toEqual(restBody);
    }
    // A numeric id comes back as a number; a request id sent is echoed.
    const numeric = await callTool(shortcut, 'get_quote', { symbol: 'AAPL' }, { 'X-Request-Id': 'agent-call-42' }, 42);
    expect(numeric.body.id).toBe(42);
    expect(numeric.requestId).toBe('agent-call-42');
  });

  it('when a caller past its quota calls a cached read, then the shortcut answers the 429 as the same tool error with retry advice, and every call was counted', async () => {
    const svc = await start({ RATE_LIMIT_ANONYMOUS_PER_MINUTE: '4' });
    expect((await svc.fetch('/api/quotes/AAPL')).status).toBe(200);
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await callTool(svc, 'get_quote', { symbol: 'AAPL' }));
    // The REST read was the first of 4: three tool calls pass, the fourth is over the quota.
    expect(answers.map((a) => (a.body.result as { isError?: boolean }).isError === true)).toEqual([false, false, false, true]);
    expect(answers.slice(0, 3).map((a) => a.rateLimit)).toEqual([expect.stringMatching(/r=2;/), expect.stringMatching(/r=1;/), expect.stringMatching(/r=0;/)]);
    const refused = answers[3]!.body.result as { content: Array<{ text: string }>; _meta: Record<string, unknown> };
    expect(refused._meta['mds/status']).toBe(429);
    expect(refused._meta['mds/retry_after_s']).toEqual(expect.any(Number));
    expect(refused.content[0]!.text).toMatch(/429/);
    expect(answers[3]!.status).toBe(200);
  });

  it('when a bad API key calls a cached read, then the transport answers 401 with the envelope, with the shortcut as without it', async () => {
    const shortcut = await start({});
    const full = await start({}, { fastPath: false });
    expect((await shortcut.fetch('/api/quotes/AAPL')).status).toBe(200);
    const a = await callTool(shortcut, 'get_quote', { symbol: 'AAPL' }, { 'X-API-Key': 'mds_not-a-key' });
    const b = await callTool(full, 'get_quote', { symbol: 'AAPL' }, { 'X-API-Key': 'mds_not-a-key' });
    expect(a.status).toBe(401);
    expect([a.status, a.body]).toEqual([b.status, b.body]);
    expect([a.requestId, b.requestId]).toEqual([expect.stringMatching(/^[0-9a-f-]{36}$/), expect.stringMatching(/^[0-9a-f-]{36}$/)]);
    expect(a.body).toMatchObject({ success: false, code: 401 });
  });
});
