/**
 * The MCP endpoint: `/mcp` over the Streamable HTTP transport (stateless: a server per request, so
 * any instance of a fleet answers any request, and nothing is held between requests), and the same
 * server over stdio for `mds mcp`. Both learn who is calling as REST does (`Authorization` or the
 * API-key header; stdio: MCP_API_KEY), refuse at the transport what REST would refuse for every
 * market-data operation (bad credentials; none under DATA_REQUIRES_AUTH: 401), and hand every tool
 * call to the app's own request path (`dispatch.ts`).
 *
 * `/mcp` is a branch of the app's front door (app.ts), after the caller step: it is JSON-RPC, not an
 * operation of the contract, so the contract's validator never sees it; the request id, CORS
 * preflight, log line and metrics are the front door's. A tool call of a cached read may be answered
 * by the tool-call shortcut (shortcut.ts).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import express, { type Request } from 'express';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Contract } from '../contract.js';
import { AUTH_MESSAGES, readBearer } from '../../domain/credentials.js';
import { ForbiddenError, InvalidCredentialsError, NotAuthenticatedError, StartupError } from '../../domain/errors.js';
import type { Logger } from '../../domain/ports/logger.js';
import type { Principal } from '../../domain/ports/accounts.js';
import { toErrorResponse, writeEnvelope } from '../envelope.js';
import { credentialSchemes, type Authenticator } from '../security.js';
import { inProcess, type CallerRequest } from './dispatch.js';
import { createMcpServer, type McpParts } from './server.js';
import type { CountAs } from '../app.js';
import { headersQualify, ToolCallShortcut, type ReadBody } from './shortcut.js';
import { generateTools } from './tools.js';
import type { FastPath } from '../fast-path.js';

/** The transport's path. */
export const MCP_PATH = '/mcp';

export interface McpEndpointOptions {
  contract: Contract;
  /** The app's request listener (the one the HTTP server runs): every tool call is a request into it. Called once the app exists. */
  listener: RequestListener;
  /** The cached-answer shortcut, which the tool-call shortcut asks; none when absent. */
  fastPath?: Pick<FastPath, 'answerForTarget'> | undefined;
  authenticator: Authenticator;
  logger: Logger;
  /** DATA_REQUIRES_AUTH: without credentials the transport answers 401. */
  dataRequiresAuth: boolean;
  bodyLimitBytes: number;
  /** Origins allowed to call from a browser (CORS_ORIGINS); a request with another Origin is refused (DNS rebinding). */
  corsOrigins: readonly string[];
}

export class McpEndpoint {
  /** The path the front door hands here. */
  readonly path = MCP_PATH;
  readonly #parts: McpParts;
  readonly #shortcut: ToolCallShortcut | undefined;
  readonly #authenticator: Authenticator;
  readonly #logger: Logger;
  readonly #dataRequiresAuth: boolean;
  readonly #bodyLimitBytes: number;
  readonly #corsOrigins: readonly string[];
  readonly #json: express.RequestHandler;
  /** The request headers that carry credentials (lower case), from the contract's security schemes. */
  readonly #credentialHeaders: { bearer?: string; apiKey?: string };

  constructor(options: McpEndpointOptions) {
    this.#parts = { tools: generateTools(options.contract), dispatch: inProcess(options.listener), version: options.contract.version };
    this.#shortcut = options.fastPath === undefined ? undefined : new ToolCallShortcut(this.#parts.tools, options.fastPath);
    this.#authenticator = options.authenticator;
    this.#logger = options.logger.child({ component: 'mcp' });
    this.#dataRequiresAuth = options.dataRequiresAuth;
    this.#bodyLimitBytes = options.bodyLimitBytes;
    this.#corsOrigins = options.corsOrigins;
    this.#json = express.json({ limit: options.bodyLimitBytes });
    const schemes = credentialSchemes(options.contract.document);
    this.#credentialHeaders = {
      bearer: schemes.find((s) => s.kind === 'bearer')?.header,
      apiKey: schemes.find((s) => s.kind === 'apiKey')?.header,
    };
  }

  /** The tool names, for the startup log. */
  get toolNames(): string[] {
    return this.#parts.tools.map((tool) => tool.name);
  }

  /** The credential headers of `headers` that the contract's schemes read. */
  credentialsOf(headers: IncomingMessage['headers']): Record<string, string> {
    const out: Record<string, string> = {};
    for (const header of [this.#credentialHeaders.bearer, this.#credentialHeaders.apiKey]) {
      const value = header === undefined ? undefined : headers[header];
      if (typeof value === 'string') out[header!] = value;
    }
    return out;
  }

  /** `key` as the credentials of a request, in the header the contract's API-key scheme names. */
  apiKeyCredentials(key: string): Record<string, string> {
    const header = this.#credentialHeaders.apiKey;
    if (header === undefined) throw new StartupError('The contract declares no API-key scheme: MCP_API_KEY cannot be sent');
    return { [header]: key };
  }

  /**
   * Who sent `credentials`: undefined when none; rejects with the 401 REST would answer for a bad
   * one (every credential sent is checked), or for none under DATA_REQUIRES_AUTH.
   */
  async identify(credentials: Record<string, string>): Promise<Principal | undefined> {
    const { bearer, apiKey } = this.#credentialHeaders;
    const request = { headers: credentials } as unknown as Request;
    const check = (run: (done: (err: unknown, principal?: Principal) => void) => void) =>
      new Promise<Principal>((resolve, reject) => run((err, principal) => (err !== null && err !== undefined ? reject(err) : principal ? resolve(principal) : reject(new InvalidCredentialsError(AUTH_MESSAGES.invalid)))));
    let principal: Principal | undefined;
    if (bearer !== undefined && credentials[bearer] !== undefined) {
      if (readBearer(credentials[bearer]).kind === 'other-scheme') throw new InvalidCredentialsError(AUTH_MESSAGES.notBearer);
      principal = await check((done) => this.#authenticator.authenticateBearer(request, done));
    }
    if (apiKey !== undefined && credentials[apiKey] !== undefined) {
      const byKey = await check((done) => this.#authenticator.authenticateApiKey(request, done));
      principal ??= byKey;
    }
    if (principal === undefined && this.#dataRequiresAuth) throw new NotAuthenticatedError();
    return principal;
  }

  /** Connects a server for `caller` to `transport` (stdio: one caller for the process's life). */
  async connect(transport: Transport, caller: CallerRequest): Promise<void> {
    const server = createMcpServer(this.#parts, { request: caller, principal: () => this.identify(caller.credentials) });
    await server.connect(transport);
  }

  /**
   * Answers a request to `/mcp`, which the front door (app.ts) hands here after the caller step:
   * `countAs` counts it as a GET of a target (the caller step again, with that path), for the
   * tool-call shortcut.
   */
  handle(req: IncomingMessage, res: ServerResponse, headers: Record<string, string>, countAs: CountAs): void {
    const fail = (err: unknown) => this.#fail(req, res, err, headers);
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
    const sdkWay = (body?: ReadBody) => {
      for (const name in headers) res.setHeader(name, headers[name]!);
      void this.#answer(req as Request, res, body).catch(fail);
    };
    if (this.#shortcut !== undefined && headersQualify(req)) this.#shortcut.take(req, res, headers, countAs, sdkWay, fail);
    else sdkWay();
  }

  /** The SDK's way: a server and transport for this request; `body` when the shortcut read it. */
  async #answer(req: Request, res: ServerResponse, body: ReadBody | undefined): Promise<void> {
    const credentials = this.credentialsOf(req.headers);
    const principal = await this.identify(credentials);
    if (body !== undefined) {
      // The shortcut read the body and left the call to the SDK: refused as the body parser would.
      if ('unparsable' in body) throw Object.assign(new SyntaxError('Unexpected token in JSON'), { status: 400, type: 'entity.parse.failed', body: body.unparsable });
      req.body = body.parsed;
    } else {
      const declared = req.headers['content-length'];
      if (declared !== undefined && Number(declared) > this.#bodyLimitBytes) {
        res.setHeader('Connection', 'close');
        throw Object.assign(new Error('request entity too large'), { status: 413, type: 'entity.too.large' });
      }
      await new Promise<void>((resolve, reject) => this.#json(req, res as express.Response, (err?: unknown) => (err === undefined ? resolve() : reject(err))));
    }
    if (req.body === undefined) throw Object.assign(new Error('unsupported media type'), { status: 415 });
    const caller: CallerRequest = {
      credentials,
      remoteAddress: req.socket.remoteAddress ?? '127.0.0.1',
      forwardedFor: typeof req.headers['x-forwarded-for'] === 'string' ? req.headers['x-forwarded-for'] : undefined,
      requestId: req.id,
    };
    const server = createMcpServer(this.#parts, { request: caller, principal: async () => principal });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.once('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  }

  #fail(req: IncomingMessage, res: ServerResponse, err: unknown, headers: Record<string, string>): void {
    const response = toErrorResponse(err, { method: req.method, path: MCP_PATH });
    if (response.unexpected) this.#logger.error({ err, reqId: req.id }, 'mcp request failed');
    else this.#logger.debug({ reqId: req.id, status: response.status }, 'mcp request refused');
    writeEnvelope(res, response, headers);
  }
}
