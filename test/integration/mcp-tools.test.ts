/**
 * What an agent reads of the MCP tools (issue 52), over a real socket: the tools/list a client hands
 * the model at every start stays small, docs/mcp.md's table of tools is the list the server gives,
 * get_indicators answers with a rounded table as get_history does, and an argument outside its enum
 * (in a tool call or a resource's URI) is refused in the schema's words with the allowed values.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadContract } from '../../src/http/contract.js';
import { generateTools } from '../../src/http/mcp/tools.js';
import { servicesOnOwnRedis } from '../helpers/own-redis.js';
import type { TestService } from '../helpers/service.js';

const ADMIN_KEY = 'mcp-tools-test-admin-key-0123456789abc';
const { start } = servicesOnOwnRedis({ API_KEYS: ADMIN_KEY });

/** The most bytes an administrator's tools/list may take (issue 52: it was about 62 KB). */
const MAX_TOOLS_LIST_BYTES = 20_000;

let nextId = 1;

/** One JSON-RPC request on /mcp as the SDK's client sends it; the answer's body as text and parsed. */
async function rpc(svc: TestService, method: string, params: Record<string, unknown>, headers: Record<string, string> = {}) {
  const res = await svc.fetch('/mcp', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  expect(res.status, method).toBe(200);
  const text = await res.text();
  const answer = JSON.parse(text) as { result: Record<string, unknown>; error?: { code: number; message: string; data?: unknown } };
  return { text, result: answer.result, error: answer.error };
}

type ListedTool = { name: string; description: string; inputSchema: { properties: Record<string, unknown> }; outputSchema?: unknown };

async function listTools(svc: TestService, headers: Record<string, string> = {}) {
  const { text, result } = await rpc(svc, 'tools/list', {}, headers);
  return { bytes: Buffer.byteLength(text), resultBytes: Buffer.byteLength(JSON.stringify(result)), tools: result.tools as ListedTool[] };
}

async function callTool(svc: TestService, name: string, args: Record<string, unknown>) {
  const { result } = await rpc(svc, 'tools/call', { name, arguments: args });
  return result as { isError?: boolean; content: Array<{ text: string }>; structuredContent?: Record<string, unknown> };
}

/** `0.001235` -> 4, `-0.5` -> 1: the digits a number below 1 is written with, its leading zeros left out. */
function significantDigits(cell: string): number {
  const [mantissa] = cell.replace('-', '').split('e');
  return mantissa!.replace('.', '').replace(/^0+/, '').length;
}

/** The rows of the table in docs/mcp.md's "The tools" section: tool, operation, what it answers, who sees it (`"` repeats the row above). */
function documentedTools(): Array<{ name: string; operation: string; answers: string; who: string }> {
  const page = readFileSync(resolve(import.meta.dirname, '../../docs/mcp.md'), 'utf8');
  const section = page.slice(page.indexOf('\n## The tools\n'), page.indexOf('\n## ', page.indexOf('\n## The tools\n') + 1));
  const rows: Array<{ name: string; operation: string; answers: string; who: string }> = [];
  for (const line of section.split('\n')) {
    const cells = /^\| `([a-z_]+)` \| `GET ([^`]+)` \| (.+) \| (.+) \|$/.exec(line);
    if (cells === null) continue;
    const who = cells[4] === '"' ? rows.at(-1)!.who : cells[4]!;
    rows.push({ name: cells[1]!, operation: cells[2]!.split('?')[0]!, answers: cells[3]!, who });
  }
  return rows;
}

describe('mcp tools/list: small enough to hand a model at every start', () => {
  it('when an administrator and an anonymous caller list the tools, then each serialized answer is under 20,000 bytes, with every tool still described and its arguments schema', async () => {
    const svc = await start();
    const admin = await listTools(svc, { 'x-api-key': ADMIN_KEY });
    const anonymous = await listTools(svc);
    expect(admin.tools.length, 'the admin tools are listed to an administrator').toBeGreaterThan(anonymous.tools.length);
    for (const list of [admin, anonymous]) {
      expect(list.resultBytes).toBeLessThan(MAX_TOOLS_LIST_BYTES);
      expect(list.bytes).toBeLessThan(MAX_TOOLS_LIST_BYTES);
      for (const tool of list.tools) {
        expect(tool.description.length, tool.name).toBeGreaterThan(20);
        expect(tool.outputSchema, tool.name).toBeUndefined();
        expect(typeof tool.inputSchema.properties, tool.name).toBe('object');
      }
    }
  });
});

describe('docs/mcp.md: its table of tools is the server\'s', () => {
  it('when the table is read, then it names every tool an administrator lists and no other, each with its operation and who sees it', async () => {
    const svc = await start();
    const admin = (await listTools(svc, { 'x-api-key': ADMIN_KEY })).tools.map((t) => t.name);
    const anonymous = new Set((await listTools(svc)).tools.map((t) => t.name));
    const documented = documentedTools();
    expect(documented.map((row) => row.name).sort()).toEqual([...admin].sort());
    const paths = new Map(generateTools(loadContract()).map((tool) => [tool.name, tool.path]));
    for (const row of documented) {
      expect(row.operation, row.name).toBe(paths.get(row.name));
      expect(row.who, row.name).toBe(anonymous.has(row.name) ? 'anyone who may read market data' : 'administrators');
      expect(row.answers, row.name).not.toMatch(/once the contract has it/);
    }
  });
});

describe('mcp get_indicators: a table for the model, as history is', () => {
  it('when a model asks for a year of studies, then the text is a table of the last 100 bars, a column per series, numbers rounded from the structured content', async () => {
    const svc = await start();
    const result = await callTool(svc, 'get_indicators', { symbol: 'AAPL', studies: 'sma:20,rsi,macd', range: '1y' });
    expect(result.isError).toBeFalsy();
    const data = (result.structuredContent as { data: { times: string[]; studies: Record<string, number[] | Record<string, number[]>> } }).data;
    expect(data.times.length).toBeGreaterThan(100);
    const text = result.content[0]!.text;
    const lines = text.split('\n');
    expect(lines[0]).toContain(`${data.times.length} bars`);
    const header = lines.find((l) => l.startsWith('time '))!;
    expect(header).toBe('time macd_12_26_9_macd macd_12_26_9_signal macd_12_26_9_histogram rsi_14 sma_20');
    const rows = lines.filter((l) => /^\d{4}-\d\d-\d\dT/.test(l)).map((l) => l.split(' '));
    expect(rows).toHaveLength(100);
    const macd = data.studies['macd:12:26:9'] as Record<string, number[]>;
    const columns = [macd.macd!, macd.signal!, macd.histogram!, data.studies['rsi:14'] as number[], data.studies['sma:20'] as number[]];
    const first = data.times.length - 100;
    rows.forEach((cells, i) => {
      expect(cells[0]).toBe(data.times[first + i]);
      columns.forEach((values, c) => {
        const value = values[first + i] ?? null;
        const cell = cells[c + 1]!;
        const where = `${cells[0]} column ${c + 1}`;
        if (value === null) {
          expect(cell, where).toBe('-');
          return;
        }
        // At most 4 decimals (4 significant digits below 1), and within that rounding of the value.
        if (Math.abs(value) >= 1) expect(cell, where).toMatch(/^-?\d+(\.\d{1,4})?$/);
        else expect(significantDigits(cell), where).toBeLessThanOrEqual(4);
        expect(Math.abs(Number(cell) - value), where).toBeLessThanOrEqual(Math.abs(value) >= 1 ? 0.00005 : Math.abs(value) * 0.0005);
      });
    });
    expect(text).not.toMatch(/\d\.\d{7,}/);
  });
});

const RANGE_REFUSED = 'Invalid request parameters: query.range must be equal to one of the allowed values (1d, 5d, 1mo, 3mo, 6mo, 1y, 2y, 5y, 10y, ytd, max) (code 422).';

describe('mcp arguments: refused in the schema\'s words', () => {
  it('when range is "last month", then the tool error is the schema\'s, naming the allowed values, for history and indicators alike', async () => {
    const svc = await start();
    for (const [name, args] of [
      ['get_history', { symbol: 'AAPL', range: 'last month' }],
      ['get_indicators', { symbol: 'AAPL', studies: 'rsi', range: 'last month' }],
    ] as const) {
      const result = await callTool(svc, name, args);
      expect(result.isError, name).toBe(true);
      expect(result.content[0]!.text, name).toBe(RANGE_REFUSED);
    }
  });

  it('when the history resource is read with range "last month", then the JSON-RPC error is the same words, not the REST validator\'s', async () => {
    const svc = await start();
    const { error } = await rpc(svc, 'resources/read', { uri: 'mds://history/AAPL/1d?range=last%20month' });
    expect(error).toEqual({ code: -32602, message: `MCP error -32602: ${RANGE_REFUSED}`, data: { status: 422 } });
    const { result } = await rpc(svc, 'resources/read', { uri: 'mds://history/AAPL/1d?range=5d' });
    expect((result.contents as Array<{ text: string }>)[0]!.text).toMatch(/^time,open,high,low,close,adj_close,volume\r\n/);
  });
});
