/**
 * The tool-call shortcut: to `/mcp` what the cached-answer shortcut (fast-path.ts) is to REST, a
 * branch of the same request path. A POST that carries one `tools/call` of a read whose exact
 * target the cached-answer shortcut would answer (a full request validated it within the last second
 * and its answer is cached) is answered here, without building the SDK's server and transport and
 * without the in-process request (dispatch.ts): those are most of a tool call's cost.
 *
 * What it does not skip: the call is charged as the operation it maps to (quota and usage meter, to
 * the caller the front door's caller step identified), as the in-process request would be; the result is built by the same `toolResult`
 * from the same cached bytes. Anything else, or anything this module is not sure the SDK would accept
 * exactly as sent (another method, a batch, extra members, an unsupported protocol version, headers the
 * transport would refuse, a body it would not parse), goes the SDK's way, which answers it as before.
 * test/e2e/mcp.test.ts sends the same calls both ways and compares the answers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import type { FastPath } from '../fast-path.js';
import type { Answer } from './dispatch.js';
import { refusedAnswer, toolResult } from './server.js';
import { argumentsProblem, requestOf, type ToolSpec } from './tools.js';

/** The longest body the shortcut takes (a tool call is a few hundred bytes); a longer one goes the SDK's way. */
const MAX_SHORTCUT_BODY = 4096;

/** True when the transport would take these headers of a POST as they are (see the module comment): `take` may read its body. */
export function headersQualify(req: IncomingMessage): boolean {
  const h = req.headers;
  const accept = h.accept;
  const length = h['content-length'];
  const version = h['mcp-protocol-version'];
  return (
    accept !== undefined &&
    accept.includes('application/json') &&
    accept.includes('text/event-stream') &&
    h['content-type'] === 'application/json' &&
    h['content-encoding'] === undefined &&
    h['transfer-encoding'] === undefined &&
    length !== undefined &&
    Number(length) <= MAX_SHORTCUT_BODY &&
    (version === undefined || (typeof version === 'string' && SUPPORTED_PROTOCOL_VERSIONS.includes(version)))
  );
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** True when `record` has no member but those of `allowed`. */
function onlyMembers(record: Record<string, unknown>, allowed: readonly string[]): boolean {
  for (const name in record) if (!allowed.includes(name)) return false;
  return true;
}

const MESSAGE_MEMBERS = ['jsonrpc', 'id', 'method', 'params'] as const;
const PARAMS_MEMBERS = ['name', 'arguments'] as const;

/** `message` when it is exactly one `tools/call` request with nothing the SDK would act on besides. */
function toolCallOf(message: unknown): { id: string | number; name: string; args: Record<string, unknown> } | undefined {
  if (!isRecord(message) || message.jsonrpc !== '2.0' || message.method !== 'tools/call') return undefined;
  const id = message.id;
  if (!(typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)))) return undefined;
  const params = message.params;
  if (!isRecord(params) || !onlyMembers(message, MESSAGE_MEMBERS) || !onlyMembers(params, PARAMS_MEMBERS)) return undefined;
  const { name, arguments: args } = params;
  if (typeof name !== 'string') return undefined;
  if (args !== undefined && !isRecord(args)) return undefined;
  return { id, name, args: args ?? {} };
}

export class ToolCallShortcut {
  readonly #tools: ReadonlyMap<string, ToolSpec>;
  readonly #answers: Pick<FastPath, 'answerForTarget'>;
  /** A cached answer's result as JSON, per cached body (one per cache fill) and tool call. */
  readonly #results = new WeakMap<Buffer, Map<string, string>>();

  constructor(tools: readonly ToolSpec[], answers: Pick<FastPath, 'answerForTarget'>) {
    this.#tools = new Map(tools.map((tool) => [tool.name, tool]));
    this.#answers = answers;
  }

  /**
   * Answers `message` (the body of `req`, whose headers qualify) when it is a tool call the shortcut
   * takes, with `headers` (the front door's, see `McpBranch`) in its one `writeHead`, after `charge`
   * charged the call as the operation it maps to; otherwise calls `pass`, for the SDK's way.
   */
  take(req: IncomingMessage, res: ServerResponse, headers: Record<string, string>, message: unknown, charge: (operation: string) => Promise<void>, pass: () => void, fail: (err: unknown) => void): void {
    const call = toolCallOf(message);
    const tool = call === undefined ? undefined : this.#tools.get(call.name);
    const target = call === undefined || tool === undefined || argumentsProblem(tool, call.args) !== undefined ? undefined : requestOf(tool, call.args);
    const hit = target === undefined || 'missing' in target ? undefined : this.#answers.answerForTarget(target.path);
    if (hit === undefined) {
      pass();
      return;
    }
    const path = (target as { path: string }).path;
    const answer = (refusal: unknown) => {
      try {
        const result = refusal === undefined ? this.#cachedResult(tool!, call!.args, hit.rep.body) : JSON.stringify(toolResult(tool!, call!.args, refusedAnswer(refusal, { method: 'GET', path })));
        // Logged at debug, as a hit of the cached-answer shortcut is (request-log.ts).
        req.caller.shortcut = true;
        const body = `{"result":${result},"jsonrpc":"2.0","id":${JSON.stringify(call!.id)}}`;
        headers['Content-Type'] = 'application/json';
        headers['Content-Length'] = String(Buffer.byteLength(body));
        res.writeHead(200, headers);
        res.end(body);
      } catch (err) {
        fail(err);
      }
    };
    charge(hit.operation).then(() => answer(undefined), answer);
  }

  #cachedResult(tool: ToolSpec, args: Record<string, unknown>, body: Buffer): string {
    let byCall = this.#results.get(body);
    if (byCall === undefined) {
      byCall = new Map();
      this.#results.set(body, byCall);
    }
    // The result depends on the tool and, for history, on the arguments (its resource link).
    const key = tool.operationId === 'getHistory' ? `${tool.name}\n${JSON.stringify(args)}` : tool.name;
    let result = byCall.get(key);
    if (result === undefined) {
      const answer: Answer = { status: 200, headers: {}, body: body.toString('utf8') };
      result = JSON.stringify(toolResult(tool, args, answer));
      // Bounded: one entry per distinct history call of one cached body.
      if (byCall.size < 64) byCall.set(key, result);
    }
    return result;
  }
}
