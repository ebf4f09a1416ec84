/**
 * The MCP server of one caller (DESIGN 22), on any transport: the tools generated from the contract
 * (`tools.ts`), listed as the caller may call them, and the resources (history as CSV, the markets
 * and their sessions). Every tool call and resource read is the operation's own request through the
 * app (`dispatch.ts`): the same credentials, validation, quotas, usage metering and envelope as REST.
 *
 * The SDK's low-level `Server` is used because the tools' schemas are the contract's own JSON
 * Schemas; the high-level `McpServer` takes zod schemas and would rebuild them.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type CallToolResult,
  type ReadResourceResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { Principal } from '../../domain/ports/accounts.js';
import { toErrorResponse } from '../envelope.js';
import type { Answer, Dispatch, ToolCaller } from './dispatch.js';
import { answerText, errorText } from './text.js';
import { argumentsProblem, mayCall, requestOf, type ToolSpec } from './tools.js';

/** What every caller's server shares: built once at startup. */
export interface McpParts {
  tools: readonly ToolSpec[];
  dispatch: Dispatch;
  /** The service's version (the contract's), as the server's. */
  version: string;
}

/** Who a server acts for. */
export interface McpCaller {
  /** Whom a tool call acts for, decided now (stdio checks its key again for every call: a revoked key stops working). */
  current(): Promise<ToolCaller>;
  /** Charges one action that reaches no operation (an unknown tool, arguments the tool's schema refuses); rejects with `RateLimitedError`. */
  charge(operation: string): Promise<void>;
}

/** A refusal before any operation ran (the quota, a key refused), as the answer REST gives it; `request` names the operation's request in the log. */
export function refusedAnswer(err: unknown, request?: Parameters<typeof toErrorResponse>[1]): Answer {
  const response = toErrorResponse(err, request);
  const headers = Object.fromEntries(Object.entries(response.headers).map(([name, value]) => [name.toLowerCase(), value]));
  return { status: response.status, headers, body: JSON.stringify(response.body) };
}

/** A refusal before any operation ran, as a tool error with the envelope. */
function refusal(err: unknown): CallToolResult {
  return toolError(refusedAnswer(err));
}

const INSTRUCTIONS =
  'Market data from mds: quotes, history, search and the trading calendar, through the same keys, limits and metering as its REST API. ' +
  'Each tool is one REST operation; its structured content is the REST answer. History: get_history shows at most 100 candles as text, ' +
  'all of them in the structured content, and as CSV in the resource mds://history/{symbol}/{interval}?range=... .';

/** The history resource of a `get_history` call's arguments: `mds://history/AAPL/1d?range=1y`. */
export function historyResource(args: Record<string, unknown>): string {
  const interval = typeof args.interval === 'string' ? args.interval : '1d';
  const query = new URLSearchParams();
  for (const name of ['range', 'start', 'end', 'adjust', 'currency']) if (typeof args[name] === 'string') query.set(name, args[name]);
  const text = query.toString();
  return `mds://history/${encodeURIComponent(String(args.symbol))}/${encodeURIComponent(interval)}${text ? `?${text}` : ''}`;
}

function retryAfter(answer: Answer): number | undefined {
  const value = Number(answer.headers['retry-after']);
  return Number.isFinite(value) && value >= 0 ? value : undefined;
}

function parse(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

/** A failed answer as a tool error: the envelope's message and code in the text, the envelope itself in `_meta`. */
function toolError(answer: Answer): CallToolResult {
  const envelope = parse(answer.body) as { error?: unknown; code?: unknown } | undefined;
  const after = retryAfter(answer);
  return {
    isError: true,
    content: [{ type: 'text', text: errorText(answer.status, envelope, after) }],
    _meta: { 'mds/status': answer.status, ...(envelope ? { 'mds/error': envelope } : {}), ...(after !== undefined ? { 'mds/retry_after_s': after } : {}) },
  };
}

/** Arguments the tool's schema refuses, said as REST would refuse the parameters (422), in the schema's words. */
function invalidText(problem: string): string {
  return `Invalid request parameters: ${problem} (code 422).`;
}

function invalidArguments(problem: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: invalidText(problem) }], _meta: { 'mds/status': 422 } };
}

/** A tool call without a path parameter its operation needs, refused as REST would (422). */
function missingArguments(missing: readonly string[]): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: `${missing.join(', ')} is required (code 422).` }], _meta: { 'mds/status': 422 } };
}

/**
 * A tool call's result from its operation's answer: on 200, the structured content is the REST
 * answer (the contract's `{success, data}`) and the text a short reading of it; otherwise a tool
 * error. Both ways of answering a tool call (the SDK's server here, the shortcut in shortcut.ts) build it here.
 */
export function toolResult(tool: ToolSpec, args: Record<string, unknown>, answer: Answer): CallToolResult {
  if (answer.status !== 200) return toolError(answer);
  const body = parse(answer.body);
  const structuredContent = body as Record<string, unknown>;
  const resource = tool.operationId === 'getHistory' ? historyResource(args) : undefined;
  return { content: [{ type: 'text', text: answerText(body, resource) }], structuredContent };
}

/** A refused resource read, as a JSON-RPC error carrying the envelope. */
function resourceError(answer: Answer): McpError {
  const envelope = parse(answer.body) as { error?: unknown; code?: unknown } | undefined;
  const code = answer.status === 404 ? ErrorCode.InvalidParams : answer.status === 422 ? ErrorCode.InvalidParams : ErrorCode.InternalError;
  return new McpError(code, errorText(answer.status, envelope, retryAfter(answer)), { status: answer.status, ...(envelope ? { envelope } : {}) });
}

/** A resource read as the tool call it is: the operation, its arguments, and whether it reads the CSV export. */
interface ResourceCall {
  operationId: 'getMarkets' | 'listMarketSessions' | 'getHistory';
  args: Record<string, string>;
  csv: boolean;
}

/**
 * `mds://markets`, `mds://markets/US/sessions?start=...&end=...`, `mds://history/AAPL/1d?range=1y` as
 * the tool call it reads (the query's members are its arguments, checked against that tool's schema
 * as a tool call's are); undefined for any other URI.
 */
function resourceCall(uri: string): ResourceCall | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'mds:') return undefined;
  const segments = url.pathname.split('/').filter((s) => s.length > 0);
  let decoded: string[];
  try {
    decoded = segments.map((s) => decodeURIComponent(s));
  } catch {
    return undefined;
  }
  const query = Object.fromEntries(new URLSearchParams(url.search));
  if (url.host === 'markets' && decoded.length === 0) return { operationId: 'getMarkets', args: query, csv: false };
  if (url.host === 'markets' && decoded.length === 2 && decoded[1] === 'sessions') return { operationId: 'listMarketSessions', args: { ...query, market: decoded[0]! }, csv: false };
  if (url.host === 'history' && decoded.length === 2) return { operationId: 'getHistory', args: { ...query, symbol: decoded[0]!, interval: decoded[1]! }, csv: true };
  return undefined;
}

/**
 * The JSON Schema validator every server shares (the SDK uses it for elicitation, which mds never
 * asks for): by default each `Server` builds its own Ajv instance, which cost more than the rest of
 * a tool call.
 */
let sharedValidator: AjvJsonSchemaValidator | undefined;

/** A new server for one caller: per request on the HTTP transport, per process on stdio. */
export function createMcpServer(parts: McpParts, caller: McpCaller): Server {
  sharedValidator ??= new AjvJsonSchemaValidator();
  const server = new Server({ name: 'mds', version: parts.version }, { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS, jsonSchemaValidator: sharedValidator });
  const byName = new Map(parts.tools.map((tool) => [tool.name, tool]));
  const byOperation = new Map(parts.tools.map((tool) => [tool.operationId, tool]));

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const principal: Principal | undefined = (await caller.current()).caller.principal;
    const tools: Tool[] = parts.tools
      .filter((tool) => mayCall(tool, principal))
      .map((tool) => ({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema, annotations: { readOnlyHint: true, openWorldHint: true } }));
    return { tools };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const tool = byName.get(request.params.name);
    // An operation that is no tool; an admin tool a caller may not see is called like any, and refused by the app (403).
    if (tool === undefined) {
      await caller.charge('mcp:tools/call');
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool '${request.params.name.slice(0, 100)}'`);
    }
    const args = request.params.arguments ?? {};
    // The tool's own schema (the operation's parameters) before any path is built from the arguments.
    const problem = argumentsProblem(tool, args);
    if (problem !== undefined) {
      try {
        await caller.charge(tool.operationId);
      } catch (err) {
        return refusal(err);
      }
      return invalidArguments(problem);
    }
    const target = requestOf(tool, args);
    if ('missing' in target) return missingArguments(target.missing);
    let acting: ToolCaller;
    try {
      acting = await caller.current();
    } catch (err) {
      // `mds mcp`'s key refused at this call (revoked, expired): the 401 as REST would answer it.
      return refusal(err);
    }
    return toolResult(tool, args, await parts.dispatch(target.path, acting));
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [{ uri: 'mds://markets', name: 'markets', title: 'Markets', description: "Every market's state now and its next open and close (GET /api/markets).", mimeType: 'application/json' }],
  }));

  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [
      {
        uriTemplate: 'mds://history/{symbol}/{interval}{?range,start,end,adjust,currency}',
        name: 'history',
        title: 'History as CSV',
        description: 'Candles of one symbol as CSV (time,open,high,low,close,adj_close,volume), the export of GET /api/history/{symbol}?format=csv: up to 200,000 rows.',
        mimeType: 'text/csv',
      },
      {
        uriTemplate: 'mds://markets/{market}/sessions{?start,end}',
        name: 'market-sessions',
        title: "A market's sessions",
        description: "One market's trading sessions between two dates (GET /api/markets/{market}/sessions).",
        mimeType: 'application/json',
      },
    ],
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request): Promise<ReadResourceResult> => {
    const uri = request.params.uri;
    const call = resourceCall(uri);
    const tool = call === undefined ? undefined : byOperation.get(call.operationId);
    if (call === undefined || tool === undefined) {
      await caller.charge('mcp:resources/read');
      throw new McpError(ErrorCode.InvalidParams, `Unknown resource '${uri.slice(0, 200)}': mds://markets, mds://markets/{market}/sessions?start=&end=, mds://history/{symbol}/{interval}?range=`);
    }
    // The tool's schema, as for a tool call: `range=last month` is refused in its words, not the REST validator's.
    const problem = argumentsProblem(tool, call.args);
    const target = problem === undefined ? requestOf(tool, call.args) : undefined;
    if (target === undefined || 'missing' in target) {
      try {
        await caller.charge(tool.operationId);
      } catch (err) {
        throw resourceError(refusedAnswer(err));
      }
      throw new McpError(ErrorCode.InvalidParams, invalidText(problem ?? 'a path parameter is empty'), { status: 422 });
    }
    const mimeType = call.csv ? 'text/csv' : 'application/json';
    const path = call.csv ? `${target.path}${target.path.includes('?') ? '&' : '?'}format=csv` : target.path;
    const answer = await parts.dispatch(path, await caller.current(), mimeType);
    if (answer.status !== 200) throw resourceError(answer);
    return { contents: [{ uri, mimeType, text: answer.body }] };
  });

  return server;
}
