/**
 * The MCP door guarded as REST is (DESIGN 24; issue 46 items 1, 4 and 9), tried as an attacker would
 * over a real socket: a history resource read always ends and gives its memory back, every message is
 * charged (a batch as many actions as messages), bad credentials on /mcp are charged to the address
 * like REST's, and tool arguments pass the tool's schema before any path is built from them.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { servicesOnOwnRedis } from '../helpers/own-redis.js';
import type { TestService } from '../helpers/service.js';

const API_KEY = 'mcp-doors-test-api-key-0123456789abcdef';
const { start } = servicesOnOwnRedis({ API_KEYS: API_KEY, MARKET_DATA_PROVIDER: 'simulated' });

let nextId = 1;

/** One JSON-RPC POST to /mcp as the SDK's client sends it; `body` is a message or a batch. */
async function post(svc: TestService, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) {
  const res = await svc.fetch('/mcp', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json: json as Record<string, unknown> | undefined };
}

const message = (method: string, params: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id: nextId++, method, params });

/** Forces a full collection, so the RSS measured is what is still held. */
function collect(): void {
  setFlagsFromString('--expose_gc');
  (runInNewContext('gc') as () => void)();
}

const MB = 1024 * 1024;

describe('mcp: a history resource read', () => {
  /** The rows of two CSV exports over the bar times both hold, the last (still forming) bar of either left out. */
  const sameSpan = (a: string, b: string): [string[], string[]] => {
    const rows = (text: string) => text.trimEnd().split('\r\n').slice(1);
    const time = (row: string) => row.slice(0, row.indexOf(','));
    const [ra, rb] = [rows(a), rows(b)];
    const from = [time(ra[0]!), time(rb[0]!)].sort().at(-1)!;
    const to = [time(ra.at(-1)!), time(rb.at(-1)!)].sort()[0]!;
    const within = (list: string[]) => list.filter((row) => time(row) >= from && time(row) < to);
    return [within(ra), within(rb)];
  };

  it('when 20 reads of more than 5,000 candles are made at once, then every one ends with the CSV and the memory comes back', async () => {
    // A queue that admits the 20 at once: this test is about memory, not the pool's bound (its own tests).
    const svc = await start({ RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0', WORKER_POOL_QUEUE: '64' });
    const uri = 'mds://history/BTC-USD/5m?range=1mo';
    // One read first, so the process has loaded everything it needs before the baseline is taken.
    const first = await post(svc, message('resources/read', { uri }), {}, AbortSignal.timeout(20_000));
    expect(first.status).toBe(200);
    const contents = (first.json!.result as { contents: Array<{ text: string; mimeType: string }> }).contents;
    expect(contents[0]!.mimeType).toBe('text/csv');
    const rows = contents[0]!.text.trimEnd().split('\r\n').length - 1;
    expect(rows, 'a month of 5-minute bars of a market open around the clock').toBeGreaterThan(5000);
    const round = async () => {
      const reads = await Promise.all(Array.from({ length: 20 }, () => post(svc, message('resources/read', { uri }), {}, AbortSignal.timeout(20_000))));
      expect(reads.map((r) => r.status)).toEqual(Array(20).fill(200));
      // The same candles over the minutes both reads span: a market open around the clock has a bar still
      // forming at the window's end, and a bar boundary may pass between two reads (the window moves with it).
      for (const read of reads) {
        const [mine, theirs] = sameSpan((read.json!.result as { contents: Array<{ text: string }> }).contents[0]!.text, contents[0]!.text);
        expect(mine.length).toBeGreaterThan(5000);
        expect(mine).toEqual(theirs);
      }
    };
    // The first round grows the heap to what 20 reads at once need; what a second round leaves held
    // on top of that is what the reads kept.
    await round();
    // What the process still holds after a full collection (heap and buffers): RSS itself is not given
    // back to the system at once, and swings with the rest of the suite running beside this file.
    const held = () => {
      collect();
      const usage = process.memoryUsage();
      return usage.heapUsed + usage.external;
    };
    const before = held();
    await round();
    const after = held();
    expect((after - before) / MB, `${Math.round(before / MB)} MB held before, ${Math.round(after / MB)} MB after the 20 reads`).toBeLessThan(30);
  }, 60_000);
});

describe('mcp: every message is charged', () => {
  it('when an anonymous caller lists the tools 120 times under a quota of 50 a minute, then 50 are answered and the rest are 429 with Retry-After', async () => {
    const svc = await start({ RATE_LIMIT_ANONYMOUS_PER_MINUTE: '50' });
    const statuses: number[] = [];
    for (let i = 0; i < 120; i += 1) statuses.push((await post(svc, message('tools/list'))).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(50);
    expect(statuses.slice(50).every((s) => s === 429)).toBe(true);
    const refused = await post(svc, message('tools/list'));
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.json).toMatchObject({ success: false, code: 429 });
  });

  it('when a batch carries more messages than the caller can pay for, then it is refused with 429 before any is answered', async () => {
    const svc = await start({ RATE_LIMIT_ANONYMOUS_PER_MINUTE: '50' });
    const batch = Array.from({ length: 60 }, () => message('tools/list'));
    const refused = await post(svc, batch);
    expect(refused.status).toBe(429);
    expect(refused.text.length, 'the envelope, not 60 tool lists').toBeLessThan(1000);
    // A refused charge stays in the window's count, as REST's refused requests do: the caller is over
    // its quota until the window ends.
    expect((await post(svc, message('tools/list'))).status).toBe(429);
  });

  it('when wrong API keys or bearer tokens are tried on /mcp, then each is charged to the address and guessing ends in 429', async () => {
    const svc = await start({ RATE_LIMIT_ANONYMOUS_PER_MINUTE: '30' });
    const statuses: number[] = [];
    for (let i = 0; i < 40; i += 1) statuses.push((await post(svc, message('tools/list'), { 'x-api-key': `mds_wrong-guess-${i}` })).status);
    for (let i = 0; i < 10; i += 1) statuses.push((await post(svc, message('tools/list'), { authorization: `Bearer not.a.token${i}` })).status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(30);
    expect(statuses.slice(30).every((s) => s === 429)).toBe(true);
    // The right key is answered (its own quota), so the guesser learnt nothing from the 429s.
    expect((await post(svc, message('tools/list'), { 'x-api-key': API_KEY })).status).toBe(200);
  });
});

describe('mcp: tool arguments', () => {
  it('when a path argument is "." or "..", then the tool refuses it with 422 and no other operation is served', async () => {
    const svc = await start();
    for (const symbol of ['.', '..', '../health', 'AAPL/../../health']) {
      const answer = await post(svc, message('tools/call', { name: 'get_quote', arguments: { symbol } }));
      expect(answer.status).toBe(200);
      const result = answer.json!.result as { isError?: boolean; content: Array<{ text: string }>; structuredContent?: unknown; _meta?: Record<string, unknown> };
      expect(result.isError, symbol).toBe(true);
      expect(result.structuredContent, symbol).toBeUndefined();
      expect(result._meta?.['mds/status'], symbol).toBe(422);
      expect(result.content[0]!.text, symbol).toMatch(/^Invalid request parameters: path\.symbol must match pattern/);
    }
  });

  it('when an argument breaks the schema, then the answer names the parameter in the schema\'s words', async () => {
    const svc = await start();
    const answer = await post(svc, message('tools/call', { name: 'get_history', arguments: { symbol: 'AAPL', interval: '7h', nonsense: 1 } }));
    const result = answer.json!.result as { isError?: boolean; content: Array<{ text: string }> };
    expect(result.isError).toBe(true);
    expect(result.content[0]!.text).toContain('query.interval must be equal to one of the allowed values');
    expect(result.content[0]!.text).toContain('must NOT have additional properties');
  });
});
