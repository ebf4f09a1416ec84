/**
 * The MCP door: `/mcp` over the Streamable HTTP transport (stateless: a server per request, so any
 * instance of a fleet answers any request, and nothing is held between requests), and the same
 * server over stdio for `mds mcp`. A door only translates (DESIGN 24): who is calling was decided by
 * the caller step of the front door (app.ts: every credential checked, a bad one charged to the
 * address and refused with 401); this file reads no credential and no address. It prices what
 * arrives, one point per JSON-RPC message (a batch is as many actions as messages) charged before any
 * is handled, except tool calls and resource reads, which are their operations' own requests through
 * the app (dispatch.ts) and pay those operations' prices there.
 *
 * `/mcp` is a branch of the app's front door, after the caller step: it is JSON-RPC, not an
 * operation of the contract, so the contract's validator never sees it; the request id, CORS
 * preflight, log line and metrics are the front door's. A tool call of a cached read may be answered
 * by the tool-call shortcut (shortcut.ts).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Request } from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Contract } from '../contract.js';
import { ForbiddenError, NotAuthenticatedError } from '../../domain/errors.js';
import type { Logger } from '../../domain/ports/logger.js';
import type { Principal } from '../../domain/ports/accounts.js';
import { toErrorResponse, writeEnvelope } from '../envelope.js';
import type { Admission } from '../caller.js';
import { credentialSchemes } from '../security.js';
import { inProcess, type ToolCaller } from './dispatch.js';
import { createMcpServer, type McpCaller, type McpParts } from './server.js';
import { headersQualify, ToolCallShortcut } from './shortcut.js';
import { generateTools } from './tools.js';
import type { FastPath } from '../fast-path.js';

/** The transport's path. */
export const MCP_PATH = '/mcp';

/** The methods whose messages are priced as the operations they reach, not at the door. */
const PRICED_AS_OPERATIONS = new Set(['tools/call', 'resources/read']);

export interface McpEndpointOptions {
  contract: Contract;
  /** The app's request listener (the one the HTTP server runs): every tool call is a request into it. Called once the app exists. */
  listener: RequestListener;
  /** The app's admission (caller.ts), once the app exists: charges the door's own messages, checks `mds mcp`'s key. */
  admission: () => Admission;
  /** The cached-answer shortcut, which the tool-call shortcut asks; none when absent. */
  fastPath?: Pick<FastPath, 'answerForTarget'> | undefined;
  logger: Logger;
  /** DATA_REQUIRES_AUTH: without credentials the transport answers 401. */
  dataRequiresAuth: boolean;
  bodyLimitBytes: number;
  /** Origins allowed to call from a browser (CORS_ORIGINS); a request with another Origin is refused (DNS rebinding). */
  corsOrigins: readonly string[];
}

/** A body that is not one JSON value: handed to the SDK, which answers it with its parse error. */
const UNPARSABLE = Symbol('unparsable');

export class McpEndpoint {
  /** The path the front door hands here. */
  readonly path = MCP_PATH;
  readonly #parts: McpParts;
  readonly #shortcut: ToolCallShortcut | undefined;
  readonly #admission: () => Admission;
  readonly #logger: Logger;
  readonly #dataRequiresAuth: boolean;
  readonly #bodyLimitBytes: number;
  readonly #corsOrigins: readonly string[];
  /** The name of the contract's API-key scheme: the credential `mds mcp`'s key is. */
  readonly #apiKeyScheme: string | undefined;

  constructor(options: McpEndpointOptions) {
    this.#parts = { tools: generateTools(options.contract), dispatch: inProcess(options.listener), version: options.contract.version };
    this.#shortcut = options.fastPath === undefined ? undefined : new ToolCallShortcut(this.#parts.tools, options.fastPath);
    this.#admission = options.admission;
    this.#logger = options.logger.child({ component: 'mcp' });
    this.#dataRequiresAuth = options.dataRequiresAuth;
    this.#bodyLimitBytes = options.bodyLimitBytes;
    this.#corsOrigins = options.corsOrigins;
    this.#apiKeyScheme = credentialSchemes(options.contract.document).find((scheme) => scheme.kind === 'apiKey')?.name;
  }

  /** The tool names, for the startup log. */
  get toolNames(): string[] {
    return this.#parts.tools.map((tool) => tool.name);
  }

  /**
   * Who `apiKey` (MCP_API_KEY of `mds mcp`) names: undefined without a key; rejects with the 401 REST
   * would answer for a bad one, or for none under DATA_REQUIRES_AUTH.
   */
  async identifyKey(apiKey: string | undefined): Promise<Principal | undefined> {
    if (apiKey === undefined) {
      if (this.#dataRequiresAuth) throw new NotAuthenticatedError();
      return undefined;
    }
    return this.#admission().authenticate({ address: '127.0.0.1' }, { scheme: 'apiKey', value: apiKey }, 'mcp');
  }

  /**
   * Serves `transport` (stdio) for the holder of `apiKey`: the key is checked again for every call,
   * so a key revoked meanwhile stops working at its next call.
   */
  async connect(transport: Transport, apiKey: string | undefined): Promise<void> {
    const address = '127.0.0.1';
    const scheme = this.#apiKeyScheme;
    const caller: McpCaller = {
      current: async (): Promise<ToolCaller> => {
        const principal = await this.identifyKey(apiKey);
        return { caller: { address, credentials: principal === undefined || scheme === undefined ? [] : [{ scheme, principal }], principal, door: 'mcp' } };
      },
      charge: async (operation) => this.#admission().charge({ address, principal: await this.identifyKey(apiKey) }, 'mcp', operation, 1),
    };
    const server = createMcpServer(this.#parts, caller);
    await server.connect(transport);
  }

  /**
   * Answers a request to `/mcp`, which the front door (app.ts) hands here after the caller step.
   * `headers` are the front door's (request id, quota state), not yet set on `res`.
   */
  handle(req: IncomingMessage, res: ServerResponse, headers: Record<string, string>): void {
    // A request refused before its messages are priced still costs a point, so nothing here is free.
    const fail = (err: unknown) =>
      this.#admission()
        .charge(req.caller, 'mcp', 'mcp:refused', 1, headers)
        .then(
          () => this.#fail(req, res, err, headers),
          (refusal: unknown) => this.#fail(req, res, refusal, headers),
        );
    const origin = req.headers.origin;
    if (origin !== undefined && !this.#corsOrigins.includes('*') && !this.#corsOrigins.includes(origin)) {
      fail(new ForbiddenError(`Origin '${origin.slice(0, 100)}' may not call ${MCP_PATH}: CORS_ORIGINS does not list it`));
      return;
    }
    // Stateless: no session to resume (GET) or end (DELETE).
    if (req.method !== 'POST') {
      fail(Object.assign(new Error('method not allowed'), { status: 405, headers: { Allow: 'POST' } }));
      return;
    }
    if (req.caller.principal === undefined && this.#dataRequiresAuth) {
      fail(new NotAuthenticatedError());
      return;
    }
    this.#readBody(req, res, (err, body) => {
      if (err !== undefined) {
        fail(err);
        return;
      }
      this.#priced(req, res, headers, body!, (err) => this.#fail(req, res, err, headers));
    });
  }

  /** Charges the messages of `body` priced at the door, then answers them: the shortcut's way or the SDK's. */
  #priced(req: IncomingMessage, res: ServerResponse, headers: Record<string, string>, body: unknown, fail: (err: unknown) => void): void {
    const messages = body === UNPARSABLE ? [undefined] : Array.isArray(body) ? (body as unknown[]) : [body];
    // One point per message, by method; tool calls and resource reads pay their operations' prices.
    const byMethod = new Map<string, number>();
    for (const message of messages) {
      const method = (message as { method?: unknown } | undefined)?.method;
      const name = typeof method === 'string' && method.length <= 64 ? method : 'invalid';
      if (PRICED_AS_OPERATIONS.has(name)) continue;
      byMethod.set(name, (byMethod.get(name) ?? 0) + 1);
    }
    const caller = req.caller;
    const admission = this.#admission();
    const charges = [...byMethod].map(([method, points]) => () => admission.charge(caller, 'mcp', `mcp:${method}`, points, headers));
    const next = (at: number): void => {
      if (at < charges.length) {
        charges[at]!().then(() => next(at + 1), fail);
        return;
      }
      const sdkWay = () => {
        for (const name in headers) res.setHeader(name, headers[name]!);
        void this.#answer(req as Request, res, body).catch(fail);
      };
      const single = messages.length === 1 ? messages[0] : undefined;
      if (this.#shortcut !== undefined && single !== undefined && headersQualify(req)) {
        this.#shortcut.take(req, res, headers, single, (operation) => admission.charge(caller, 'mcp', operation, 1, headers), sdkWay, fail);
      } else sdkWay();
    };
    next(0);
  }

  /** Reads the body whole, refusing one longer than the body limit (413) or not JSON (415). */
  #readBody(req: IncomingMessage, res: ServerResponse, done: (err: unknown, body?: unknown) => void): void {
    const type = req.headers['content-type'];
    if (type === undefined || !/^application\/json\s*(;|$)/i.test(type) || (req.headers['content-encoding'] !== undefined && req.headers['content-encoding'] !== 'identity')) {
      done(Object.assign(new Error('unsupported media type'), { status: 415 }));
      return;
    }
    const tooLarge = () => {
      // The rest of the body is never waited for: the connection closes after the answer.
      res.setHeader('Connection', 'close');
      return Object.assign(new Error('request entity too large'), { status: 413, type: 'entity.too.large' });
    };
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > this.#bodyLimitBytes) {
      done(tooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let length = 0;
    let ended = false;
    const finish = (err: unknown, body?: unknown) => {
      if (ended) return;
      ended = true;
      done(err, body);
    };
    req.on('data', (chunk: Buffer) => {
      length += chunk.length;
      if (length > this.#bodyLimitBytes) {
        req.removeAllListeners('data');
        req.pause();
        finish(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.once('error', (err) => finish(err));
    req.once('end', () => {
      const text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8');
      try {
        finish(undefined, JSON.parse(text));
      } catch {
        finish(undefined, UNPARSABLE);
      }
    });
  }

  /** The SDK's way: a server and transport for this request, with the body already read. */
  async #answer(req: Request, res: ServerResponse, body: unknown): Promise<void> {
    if (body === UNPARSABLE) throw Object.assign(new SyntaxError('Unexpected token in JSON'), { status: 400, type: 'entity.parse.failed' });
    const context = req.caller;
    // The operations a tool call makes are abandoned with this request, so nothing outlives it.
    const abandoned = new AbortController();
    const caller: ToolCaller = { caller: { address: context.address, credentials: context.credentials, principal: context.principal, door: 'mcp' }, requestId: req.id, signal: abandoned.signal };
    const admission = this.#admission();
    const server = createMcpServer(this.#parts, { current: async () => caller, charge: (operation) => admission.charge(context, 'mcp', operation, 1) });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.once('close', () => {
      if (!res.writableFinished) abandoned.abort();
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  #fail(req: IncomingMessage, res: ServerResponse, err: unknown, headers: Record<string, string>): void {
    const response = toErrorResponse(err, { method: req.method, path: MCP_PATH });
    if (response.unexpected) this.#logger.error({ err, reqId: req.id }, 'mcp request failed');
    else this.#logger.debug({ reqId: req.id, status: response.status }, 'mcp request refused');
    writeEnvelope(res, response, headers);
  }
}
