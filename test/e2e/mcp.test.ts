/**
 * MCP (DESIGN 22) with the SDK's own client, over both transports, against real processes: `mds serve`
 * (/mcp, Streamable HTTP) and `mds mcp` (stdio), on one SQLite database and the run's Redis. The
 * tools must be the contract's read operations with the contract's parameter schemas; each tool answers what
 * REST answers, meets the same credentials, quotas and usage meter, and fails as a tool error
 * carrying the envelope's message and code.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { logFile, noteSecrets } from '../helpers/log-files.js';
import { cliEnv } from '../helpers/cli-env.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

const ADMIN_KEY = 'mcp-test-static-admin-key-0123456789';
const TIMEOUT_MS = 60_000;

let dir: string;
let env: NodeJS.ProcessEnv;
/** DATA_REQUIRES_AUTH off: anonymous callers welcome. */
let open: ServeProcess;
/** DATA_REQUIRES_AUTH on, on the same database and Redis. */
let closed: ServeProcess;
let readKey: string;
/** A read key whose own quota is 3 requests a minute. */
let tightKey: string;
let tightKeyId: string;
/** The read key `mds mcp` runs with. */
let deskKey: { key: string; id: string };
const clients: Client[] = [];

const cliStderr = logFile('cli-stderr');

function mds(args: string[]) {
  const r = spawnSync(process.execPath, [MDS_BIN, ...args], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  cliStderr(r.stderr);
  noteSecrets(...(r.stdout.match(/mds_[A-Za-z0-9_-]{43}/g) ?? []));
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function httpClient(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'mds-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
  clients.push(client);
  return client;
}

async function stdioClient(extra: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'mds-test', version: '1.0.0' });
  const transport = new StdioClientTransport({ command: process.execPath, args: [MDS_BIN, 'mcp'], env: { ...(env as Record<string, string>), ...extra }, cwd: dir, stderr: 'pipe' });
  const stderr = logFile('mcp-stdio-stderr');
  transport.stderr?.on('data', (c: Buffer) => stderr(c.toString()));
  await client.connect(transport);
  clients.push(client);
  return client;
}

/** `mds mcp` with `extra` in its environment and no client: how it exits. */
function mcpExit(extra: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [MDS_BIN, 'mcp'], { cwd: dir, env: { ...env, ...extra }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('exit', (status) => done({ status, stdout, stderr }));
  });
}

async function rest(url: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: unknown; text: string }> {
  const res = await fetch(`${url}${path}`, { headers });
  const text = await res.text();
  return { status: res.status, text, body: res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : undefined };
}

const call = (client: Client, name: string, args: Record<string, unknown> = {}) => client.callTool({ name, arguments: args }) as Promise<CallToolResult>;
const textOf = (result: CallToolResult) => (result.content[0] as { text: string }).text;

// --- What the contract says the tools must be, read here from openapi.yaml itself. ---
type Schema = Record<string, unknown>;
const contract = parse(readFileSync(resolve(import.meta.dirname, '../../openapi.yaml'), 'utf8')) as Schema;

function deref(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(deref);
  if (value === null || typeof value !== 'object') return value;
  const node = value as Schema;
  if (typeof node.$ref === 'string') {
    const target = node.$ref
      .slice(2)
      .split('/')
      .reduce<unknown>((at, part) => (at as Schema)[part], contract);
    const { $ref: _ref, ...rest } = node;
    return { ...(deref(target) as Schema), ...(deref(rest) as Schema) };
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, deref(v)]));
}

interface ContractRead {
  tool: string;
  admin: boolean;
  parameters: Array<{ name: string; in: string; required?: boolean; description?: string; schema: Schema }>;
}

/** Every GET of the market-data and admin tags that answers JSON, named as its tool must be. */
function contractReads(): ContractRead[] {
  const reads: ContractRead[] = [];
  for (const item of Object.values(contract.paths as Record<string, Record<string, Schema>>)) {
    const op = item.get;
    if (op === undefined) continue;
    const tags = op.tags as string[];
    if (!tags.includes('Market data') && !tags.includes('Admin')) continue;
    const json = (deref(op.responses) as Record<string, { content?: Record<string, { schema: Schema }> }>)['200']?.content?.['application/json'];
    if (json === undefined) continue;
    reads.push({
      tool: (op.operationId as string).replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`),
      admin: tags.includes('Admin'),
      parameters: (deref(op.parameters ?? []) as ContractRead['parameters']).filter((p) => p.in !== 'header' && p.name !== 'format'),
    });
  }
  return reads;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mds-mcp-'));
  env = cliEnv(dir, 'mcp-test-secret-0123456789abcdefghij', { API_KEYS: ADMIN_KEY });
  expect(mds(['init']).code).toBe(0);
  readKey = (JSON.parse(mds(['keys', 'create', 'agent', '--json']).stdout) as { data: { key: string } }).data.key;
  const tight = (JSON.parse(mds(['keys', 'create', 'tight-agent', '--rate-limit', '7', '--json']).stdout) as { data: { key: string; id: string } }).data;
  tightKey = tight.key;
  tightKeyId = tight.id;
  deskKey = (JSON.parse(mds(['keys', 'create', 'desk-agent', '--json']).stdout) as { data: { key: string; id: string } }).data;
  [open, closed] = await Promise.all([spawnServe(['--port', '0'], { env, cwd: dir }), spawnServe(['--port', '0'], { env: { ...env, DATA_REQUIRES_AUTH: 'true' }, cwd: dir })]);
}, 120_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await Promise.all([open?.stop(), closed?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

describe('mcp: the tools are the contract', () => {
  it('when an administrator lists the tools, then there is one per market-data and admin read of the contract, with its parameters and no answer schema', async () => {
    const client = await httpClient(open.url, { 'X-API-Key': ADMIN_KEY });
    const { tools } = await client.listTools();
    const reads = contractReads();
    expect(reads.map((r) => r.tool)).toEqual(expect.arrayContaining(['get_quote', 'get_quotes', 'get_history', 'search_symbols', 'get_markets', 'list_market_sessions', 'get_indices', 'get_usage']));
    expect(tools.map((t) => t.name).sort()).toEqual(reads.map((r) => r.tool).sort());
    const byName = new Map<string, Tool>(tools.map((t) => [t.name, t]));
    for (const read of reads) {
      const tool = byName.get(read.tool)!;
      const properties = tool.inputSchema.properties as Record<string, Schema>;
      // Every parameter, with the contract's own schema (patterns, enums, limits) and description; nothing else.
      expect(Object.keys(properties).sort(), read.tool).toEqual(read.parameters.map((p) => p.name).sort());
      for (const p of read.parameters) expect(properties[p.name], `${read.tool}.${p.name}`).toEqual({ ...p.schema, ...(p.description ? { description: p.description } : {}) });
      expect((tool.inputSchema.required ?? []).sort(), read.tool).toEqual(read.parameters.filter((p) => p.in === 'path' || p.required).map((p) => p.name).sort());
      // The answers' schemas stay in the contract: listed, they were four fifths of the list (issue 52).
      expect(tool.outputSchema, read.tool).toBeUndefined();
      expect(tool.description, read.tool).toBeTruthy();
    }
  }, TIMEOUT_MS);
});

describe('mcp over HTTP: the same answers as REST', () => {
  it('when get_quote, get_quotes, get_history, search_symbols, get_markets and list_market_sessions are called, then each structured content is the REST answer and its data', async () => {
    const client = await httpClient(open.url);
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['get_quote', { symbol: 'AAPL' }, '/api/quotes/AAPL'],
      ['get_quotes', { symbols: 'AAPL,MSFT,NOSUCH' }, '/api/quotes?symbols=AAPL,MSFT,NOSUCH'],
      ['get_history', { symbol: 'AAPL', interval: '1d', range: '1y' }, '/api/history/AAPL?interval=1d&range=1y'],
      ['search_symbols', { q: 'apple', limit: 5 }, '/api/search?q=apple&limit=5'],
      ['get_markets', {}, '/api/markets'],
      ['list_market_sessions', { market: 'US', start: '2026-11-23', end: '2026-11-30' }, '/api/markets/US/sessions?start=2026-11-23&end=2026-11-30'],
    ];
    for (const [name, args, path] of cases) {
      const result = await call(client, name, args);
      expect(result.isError, name).toBeFalsy();
      const answer = await rest(open.url, path);
      expect(answer.status, path).toBe(200);
      const body = answer.body as { data: unknown };
      // The calendar is computed per call (its data is the same within the test's second, its updated_at is not).
      expect(result.structuredContent, name).toEqual(name === 'get_markets' ? { ...body, updated_at: expect.any(String) } : body);
      expect((result.structuredContent as { data: unknown }).data, name).toEqual(body.data);
    }
  }, TIMEOUT_MS);

  it('when a quote or history is called, then the text is one line per quote, and history a table of at most 100 rows naming the CSV resource', async () => {
    const client = await httpClient(open.url);
    const quote = textOf(await call(client, 'get_quote', { symbol: 'aapl' }));
    expect(quote.split('\n')[0]).toMatch(/^AAPL \(Apple Inc\.\) [\d.]+ USD, [+-][\d.]+ \([+-][\d.]+%\), .*market (open|closed|pre|post)/);
    const history = await call(client, 'get_history', { symbol: 'AAPL', interval: '1d', range: '1y' });
    const candles = (history.structuredContent as { data: { candles: unknown[] } }).data.candles;
    expect(candles.length).toBeGreaterThan(100);
    const lines = textOf(history).split('\n');
    expect(lines[0]).toContain(`${candles.length} in all`);
    expect(textOf(history)).toContain('mds://history/AAPL/1d?range=1y');
    expect(lines.filter((l) => /^\d{4}-\d\d-\d\dT\S+ [\d.]+ /.test(l))).toHaveLength(100);
  }, TIMEOUT_MS);

  it('when the history resource is read, then it is the CSV export of REST, byte for byte', async () => {
    const client = await httpClient(open.url);
    const read = await client.readResource({ uri: 'mds://history/AAPL/1d?range=1mo' });
    const csv = await rest(open.url, '/api/history/AAPL?interval=1d&range=1mo&format=csv');
    expect(csv.status).toBe(200);
    expect(read.contents).toEqual([{ uri: 'mds://history/AAPL/1d?range=1mo', mimeType: 'text/csv', text: csv.text }]);
    expect(csv.text.startsWith('time,open,high,low,close,adj_close,volume\r\n')).toBe(true);
    const markets = await client.readResource({ uri: 'mds://markets' });
    expect(JSON.parse((markets.contents[0] as { text: string }).text)).toEqual({ ...((await rest(open.url, '/api/markets')).body as object), updated_at: expect.any(String) });
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(['mds://history/{symbol}/{interval}{?range,start,end,adjust,currency}', 'mds://markets/{market}/sessions{?start,end}']);
  }, TIMEOUT_MS);

  it('when the symbol is unknown or a value breaks the contract, then the tool error carries the envelope message and code (404, 422)', async () => {
    const client = await httpClient(open.url);
    const unknown = await call(client, 'get_quote', { symbol: 'NOSUCH' });
    expect(unknown.isError).toBe(true);
    expect(textOf(unknown)).toBe("Unknown symbol 'NOSUCH' (code 404).");
    expect(unknown._meta?.['mds/error']).toEqual({ success: false, error: "Unknown symbol 'NOSUCH'", code: 404, detail: "Unknown symbol 'NOSUCH'" });
    const bad = await call(client, 'get_history', { symbol: 'AAPL', interval: '7h' });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toMatch(/^Invalid request parameters: query\.interval .*\(code 422\)\.$/);
  }, TIMEOUT_MS);
});

describe('mcp: the same doors as REST', () => {
  it('when DATA_REQUIRES_AUTH is on and no credentials are sent, then /mcp answers 401 with the envelope; a bad key is 401 too', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'curl', version: '1' } } };
    const post = (headers: Record<string, string>) =>
      fetch(`${closed.url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(init) });
    const anonymous = await post({});
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toEqual({ success: false, error: 'Not authenticated: please log in first', code: 401, detail: 'Not authenticated: please log in first' });
    const bad = await post({ 'x-api-key': 'mds_not-a-key' });
    expect(bad.status).toBe(401);
    await expect(httpClient(closed.url)).rejects.toThrow(/401/);
    const good = await post({ 'x-api-key': readKey });
    expect(good.status).toBe(200);
  }, TIMEOUT_MS);

  it('when a read key lists the tools, then no admin tool is shown, and calling one is refused with 403', async () => {
    const client = await httpClient(closed.url, { 'X-API-Key': readKey });
    const names = (await client.listTools()).tools.map((t) => t.name);
    const reads = contractReads();
    expect(names.sort()).toEqual(reads.filter((r) => !r.admin).map((r) => r.tool).sort());
    const refused = await call(client, 'get_usage', { days: 1 });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toBe('Administrator rights required (code 403).');
    const quote = await call(client, 'get_quote', { symbol: 'MSFT' });
    expect(quote.isError).toBeFalsy();
  }, TIMEOUT_MS);

  it('when a key past its quota calls a tool, then the 429 is a tool error with retry advice, and the admin usage report counts every call', async () => {
    const client = await httpClient(closed.url, { 'X-API-Key': tightKey });
    // Every message is an action (DESIGN 24): initialize, the initialized notification, the transport's
    // GET for a server stream (405: the endpoint is stateless) and the listing cost a point each, so
    // three of the key's seven points are left for tool calls.
    await client.listTools();
    for (let i = 0; i < 3; i += 1) expect((await call(client, 'get_quote', { symbol: 'AAPL' })).isError, `call ${i + 1}`).toBeFalsy();
    const refused = await call(client, 'get_quote', { symbol: 'AAPL' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/\(code 429\)\. Retry after \d+ s \(Retry-After\)\.$/);
    expect(refused._meta?.['mds/retry_after_s']).toEqual(expect.any(Number));
    let row: { requests: number; rate_limited: number } | undefined;
    await waitFor(
      async () => {
        const usage = await rest(closed.url, '/api/admin/usage?days=1', { 'x-api-key': ADMIN_KEY });
        row = (usage.body as { data: Array<{ caller: string; requests: number; rate_limited: number }> }).data.find((r) => r.caller === tightKeyId);
        return row?.requests === 8;
      },
      { timeoutMs: 15_000, intervalMs: 250, message: 'the usage report to count the four actions and the four calls' },
    );
    expect(row).toMatchObject({ requests: 8, rate_limited: 1 });
  }, TIMEOUT_MS);
});

describe('mds mcp (stdio)', () => {
  it('when started with a read key, then it lists the read tools, answers as REST does, and its calls are counted for the key', async () => {
    const client = await stdioClient({ MCP_API_KEY: deskKey.key });
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names.sort()).toEqual(contractReads().filter((r) => !r.admin).map((r) => r.tool).sort());
    for (const [name, args, path] of [
      ['get_quote', { symbol: 'AAPL' }, '/api/quotes/AAPL'],
      ['get_history', { symbol: 'AAPL', range: '1mo' }, '/api/history/AAPL?range=1mo'],
      ['list_market_sessions', { market: 'JP', start: '2026-11-02', end: '2026-11-06' }, '/api/markets/JP/sessions?start=2026-11-02&end=2026-11-06'],
    ] as const) {
      const result = await call(client, name, args);
      expect(result.structuredContent, name).toEqual((await rest(open.url, path)).body);
    }
    const unknown = await call(client, 'get_quote', { symbol: 'NOSUCH' });
    expect(unknown.isError).toBe(true);
    expect(textOf(unknown)).toContain('(code 404)');
    const csv = await client.readResource({ uri: 'mds://history/AAPL/1d?range=1mo' });
    expect((csv.contents[0] as { text: string }).text).toBe((await rest(open.url, '/api/history/AAPL?interval=1d&range=1mo&format=csv')).text);
    const refused = await call(client, 'get_admin_status');
    expect(textOf(refused)).toBe('Administrator rights required (code 403).');
    // Three tools, the unknown symbol, the resource and the refusal: six requests of the key.
    await waitFor(
      async () => {
        const usage = await rest(open.url, '/api/admin/usage?days=1', { 'x-api-key': ADMIN_KEY });
        return (usage.body as { data: Array<{ caller: string; requests: number }> }).data.find((r) => r.caller === deskKey.id)?.requests === 6;
      },
      { timeoutMs: 15_000, intervalMs: 250, message: "the usage report to count the stdio server's six calls" },
    );
  }, TIMEOUT_MS);

  it('when DATA_REQUIRES_AUTH is on and MCP_API_KEY is unset or refused, then it exits 1 with one line saying so', async () => {
    const [none, bad] = await Promise.all([mcpExit({ DATA_REQUIRES_AUTH: 'true' }), mcpExit({ MCP_API_KEY: 'mds_nope' })]);
    expect(none.status).toBe(1);
    expect(none.stderr.split('\n').filter((l) => l.startsWith('Error:'))).toEqual(['Error: Not authenticated: please log in first: DATA_REQUIRES_AUTH is on, so set MCP_API_KEY to an API key']);
    expect(bad.status).toBe(1);
    expect(bad.stderr.split('\n').filter((l) => l.startsWith('Error:'))).toEqual(['Error: MCP_API_KEY: Invalid API key']);
    expect(bad.stdout).toBe('');
  }, TIMEOUT_MS);
});
