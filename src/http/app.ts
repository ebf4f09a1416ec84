/**
 * `createApp(deps)` builds the one request path from the contract, as a `node:http` listener:
 *
 *   the front door (request id and log, CORS preflight, HEAD as GET)
 *   -> the caller step (caller.ts: address, credentials, principal, quota -> `req.caller`)
 *   -> `/mcp` (mcp/endpoint.ts), a branch: JSON-RPC, each tool call counted as the operation it maps to
 *   -> the cached-answer shortcut (fast-path.ts), a branch: a cached public answer, same reply builder
 *   -> the full way (series.ts; Express's helpers, not its router): the operation (validator's
 *      metadata step) -> the caller's rights (security.ts: 401/403) -> the body -> the input
 *      against the contract (422) -> the handler
 *   -> every failure through `fail`, the one envelope writer.
 *
 * No I/O happens here; everything it needs is handed in.
 */
import { randomUUID } from 'node:crypto';
import { ServerResponse, type IncomingMessage, type RequestListener } from 'node:http';
import express, { type Express, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { Contract } from './contract.js';
import { createCors, isAllowedOrigin } from './cors.js';
import { ForbiddenError, RateLimitedError, StartupError } from '../domain/errors.js';
import { toErrorResponse, writeEnvelope } from './envelope.js';
import type { Handlers } from './handlers/types.js';
import type { Logger } from '../domain/ports/logger.js';
import { openApiValidatorMiddleware, type OpenApiRequestMetadata } from './openapi-validator.js';
import { lendHelpers, messageClasses, type MessageClasses } from './express-messages.js';
import { requestLog } from './request-log.js';
import { contractSecurity, credentialCheck, credentialSchemes, type Authenticator } from './security.js';
import { runStep, series } from './series.js';
import { isConsolePath } from './console.js';
import { NO_METRICS, UNMATCHED_ROUTE, type Metrics } from '../domain/ports/metrics.js';
import type { Principal } from '../domain/ports/accounts.js';
import { NO_USAGE, type UsageRecorder } from '../domain/ports/usage.js';
import { priceOf } from '../domain/prices.js';
import { UNMATCHED_OPERATION } from '../domain/usage-operations.js';
import { isRateLimitedPath, type RateLimit } from './rate-limit.js';
import { callerStep, clientAddressOf, createAdmission, type Admission, type RequestContext, type TrustProxy } from './caller.js';
import type { FastPath } from './fast-path.js';
import { writeRepresentation } from './handlers/representation.js';

declare module 'express-serve-static-core' {
  interface Request {
    /** Who is calling, set by the rights step when the caller's credentials meet the operation's requirement. */
    principal?: Principal;
    /** The operation the validator matched (route template, path parameters, operation object); absent when none. */
    openapi?: OpenApiRequestMetadata;
  }
}

export interface AppDeps {
  contract: Contract;
  handlers: Handlers;
  authenticator: Authenticator;
  logger: Logger;
  bodyLimitBytes: number;
  /** TRUST_PROXY: whose X-Forwarded-For hops to believe; the socket's peer when absent. */
  trustProxy?: TrustProxy;
  /** The cached-answer shortcut; every request goes the full way when absent. */
  fastPath?: FastPath;
  /** Request quotas on /api (RATE_LIMIT_*); none when absent. */
  rateLimit?: RateLimit;
  /** Origins allowed to call from a browser (CORS_ORIGINS); none by default. */
  corsOrigins?: readonly string[];
  /** When set, every response is validated against the contract and each violation is reported here. */
  onResponseViolation?: (message: string, req: Request) => void;
  /** Records every response's duration by route template; none by default. */
  metrics?: Metrics;
  /** Counts every action of a known caller, by door and operation, for the usage report; nothing by default. */
  usage?: UsageRecorder;
  /** `/mcp` (mcp/endpoint.ts), answered after the caller step; none when absent. */
  mcp?: McpBranch;
  /** Serves the web console at /app/ (and redirects / there) before the API's steps; no console when absent. */
  console?: RequestHandler;
}

/** A branch of the front door for one path, after the caller step. */
export interface McpBranch {
  path: string;
  /**
   * Answers the request. `headers` are the ones the front door decided (request id, quota state), not
   * yet set on `res`: every answer carries them, and one written whole at once passes them to its one
   * `writeHead` (a header set on `res` first sends Node's `writeHead` down its slow case).
   */
  handle(req: IncomingMessage, res: ServerResponse, headers: Record<string, string>): void;
}

/** The path of a request target (`/api/quotes?symbols=A` -> `/api/quotes`). */
function pathOf(target: string): string {
  const query = target.indexOf('?');
  return query === -1 ? target : target.slice(0, query);
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The route of the requests the MCP branch answers. */
const MCP_ROUTE = '/mcp';



/** The incoming `X-Request-Id` when it is sane, else a fresh UUID; echoed in the response. */
export function requestId(req: IncomingMessage, res: ServerResponse): string {
  const id = requestIdOf(req);
  res.setHeader('X-Request-Id', id);
  return id;
}

/** `requestId` without setting the header, for a caller that writes all its headers at once. */
export function requestIdOf(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** Verifies that every operation of the contract has a handler; throws StartupError naming the missing ones. */
export function assertHandlersComplete(contract: Contract, handlers: Partial<Record<string, unknown>>): void {
  const missing = contract.operations.filter((op) => typeof handlers[op.operationId] !== 'function');
  if (missing.length > 0) {
    const names = missing.map((op) => `${op.operationId} (${op.method.toUpperCase()} ${op.path})`).join(', ');
    throw new StartupError(`The contract has operations without a handler: ${names}`);
  }
}

/** The contract's path template the request was answered under (`/api/admin/users/{username}`), else the fixed label. */
export function routeOf(req: IncomingMessage): string {
  return req.caller?.route ?? (req as Request).openapi?.openApiRoute ?? UNMATCHED_ROUTE;
}

/**
 * Runs the caller step on a request no response object answers (an upgrade): its refusal, or nothing,
 * and the headers decided. A browser page of another site (an Origin neither the service's own nor in
 * CORS_ORIGINS) is refused with 403, after the handshake was counted.
 */
export type IdentifyUpgrade = (req: IncomingMessage, done: (refusal: unknown, headers: Record<string, string>) => void) => void;

/**
 * The app's request listener, the message classes a server should build its requests with, the
 * caller step for the requests that leave the listener (an upgrade to a WebSocket, ws/api.ts), and
 * the admission of the actions of doors that are not one request each (caller.ts `Admission`).
 */
export type AppListener = RequestListener & { messages: MessageClasses; identifyUpgrade: IdentifyUpgrade; admission: Admission };

export function createApp(deps: AppDeps): AppListener {
  const { contract, handlers, authenticator, logger } = deps;
  assertHandlersComplete(contract, handlers);

  const address = clientAddressOf(deps.trustProxy ?? false);
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Express's own idea of the address (`req.ip`, `req.protocol`) agrees with the caller step's.
  app.set('trust proxy', address.trust);
  const messages = messageClasses(app);

  const metrics = deps.metrics ?? NO_METRICS;
  // One listener per request both logs it and, with metrics on, records its duration by route template.
  const recordDuration = metrics === NO_METRICS ? undefined : (req: IncomingMessage, method: string, statusCode: number, seconds: number) => metrics.httpRequest(method, routeOf(req), statusCode, seconds);
  const usage = deps.usage ?? NO_USAGE;
  // Every request of a known caller is metered once it ends, with the door, operation and points it was charged.
  const meter =
    usage === NO_USAGE
      ? undefined
      : (req: IncomingMessage) => {
          const caller = req.caller as RequestContext | undefined;
          // An MCP request's messages are metered as they are charged (mcp/endpoint.ts), not the request.
          if (caller?.principal === undefined || caller.route === MCP_ROUTE) return;
          const operation = caller.operation ?? UNMATCHED_OPERATION;
          usage.record(caller.principal, { door: caller.door === 'rest' && operation === 'streamQuotes' ? 'sse' : caller.door, operation, points: caller.points, limited: caller.limited });
        };
  const log = requestLog(app, logger, requestIdOf, recordDuration, meter);
  const corsOrigins = deps.corsOrigins ?? [];
  const cors = createCors(corsOrigins);
  const checkCredentials = credentialCheck(contract.document, authenticator);
  const identify = callerStep({ address: address.address, checkCredentials, rateLimit: deps.rateLimit, identifyOnly: deps.mcp ? new Set([deps.mcp.path]) : undefined });
  const admission = createAdmission({ checkCredentials, apiKeyHeader: credentialSchemes(contract.document).find((s) => s.kind === 'apiKey')?.header, rateLimit: deps.rateLimit, usage: deps.usage });
  const shortcut = deps.fastPath;
  const mcp = deps.mcp;

  /** The one way a request refused or failed is answered: the envelope, its cause logged when unexpected. */
  const fail = (req: IncomingMessage, res: ServerResponse, err: unknown, path: string, headers?: Record<string, string>) => {
    // The wire already answered this request (its framing broke while the app worked on it): the
    // app's own answer then fails on the sent one, as expected.
    if (res.writableEnded && (err as { code?: unknown } | undefined)?.code === 'ERR_HTTP_HEADERS_SENT') {
      req.log?.debug({ err }, 'failure after the request was answered');
      return;
    }
    const response = toErrorResponse(err, { method: req.method ?? 'GET', path });
    if (response.unexpected) logger.error({ reqId: req.id, err }, 'unexpected failure');
    // Part of the answer is out, so the client can only learn of the failure from the connection
    // closing (Express's final handler would do the same, and print the stack to stderr first); an
    // answer already complete (the parser's refusal of this request) stays the only one.
    writeEnvelope(res, response, headers);
  };

  // Only a request that announces a body (RFC 9112: Content-Length or Transfer-Encoding) has one to parse.
  const json = express.json({ limit: deps.bodyLimitBytes });
  const parseBody: RequestHandler = (req, res, next) => {
    const declared = req.headers['content-length'];
    if (declared === undefined && req.headers['transfer-encoding'] === undefined) next();
    else if (declared !== undefined && Number(declared) > deps.bodyLimitBytes) {
      // Refused on its declared length, before a byte of it is read (body-parser would read it all
      // first): the connection closes after the answer, so the rest of the body is never waited for.
      res.setHeader('Connection', 'close');
      next(Object.assign(new Error('request entity too large'), { status: 413, type: 'entity.too.large' }));
    } else json(req, res, next);
  };

  const onViolation = deps.onResponseViolation;
  // Once the validator has found the operation: the caller's rights (401/403 before any 422), then
  // the body, then the input against the contract.
  const validate = openApiValidatorMiddleware(
    {
      apiSpec: structuredClone(contract.document) as never,
      validateRequests: { allErrors: true },
      // The contract has no multipart bodies.
      fileUploader: false,
      validateResponses: onViolation
        ? {
            onError: (error: { message: string }, _body: unknown, req: Request) => {
              logger.error({ reqId: req.id, violation: error.message }, 'response breaks the contract');
              onViolation(error.message, req);
            },
          }
        : false,
      // Checked by `contractSecurity`, from the credentials the caller step found.
      validateSecurity: false,
    },
    [contractSecurity(contract.operations, contract.document), parseBody],
  );
  // The price (DESIGN 24): once the operation and its input are known and valid, and before any work,
  // the caller pays the rest of its price (the caller step charged 1 point); one who cannot pay gets 429.
  const costOf = new Map(contract.operations.map((op) => [op.operationId, op.cost]));
  const rateLimit = deps.rateLimit;
  const price: RequestHandler = (req, res, next) => {
    const operationId = req.openapi?.schema.operationId;
    const rule = operationId === undefined ? undefined : costOf.get(operationId);
    if (rule === undefined) {
      next();
      return;
    }
    const caller = req.caller;
    caller.operation = operationId;
    const points = rule === 'fixed' ? 1 : priceOf(rule, { ...(req.query as Record<string, unknown>), ...req.openapi!.pathParams });
    const extra = points - caller.points;
    if (extra <= 0 || rateLimit === undefined || !isRateLimitedPath(pathOf(req.originalUrl))) {
      if (extra > 0) caller.points = points;
      next();
      return;
    }
    rateLimit.apply(caller, res, extra).then(
      () => {
        caller.points = points;
        next();
      },
      (err: unknown) => {
        if (err instanceof RateLimitedError) caller.limited = true;
        next(err);
      },
    );
  };
  // The validator already found the operation; its handler is one Map lookup away (no second routing).
  const byOperation = new Map(contract.operations.map((op) => [op.operationId, (handlers as unknown as Record<string, RequestHandler>)[op.operationId]!]));
  const dispatch: RequestHandler = (req, res, next) => {
    const operationId = req.openapi?.schema.operationId;
    const handler = operationId === undefined ? undefined : byOperation.get(operationId);
    if (handler === undefined) {
      next();
      return;
    }
    // Express gives each `app.use` step the params of its own (empty) mount path; the operation's are the validator's.
    req.params = req.openapi!.pathParams;
    runStep(handler, req, res, next);
  };
  const notFound: RequestHandler = (req, _res, next) => {
    next(Object.assign(new Error('not found'), { status: 404, path: req.path }));
  };

  // The full way, in this order (series.ts). Express lends it its request and response helpers
  // (`req.query`, `res.json`, its settings) and nothing else: the validator finds the operation, so
  // Express's router would only walk one layer that matches every path. The console is no API
  // operation: its paths go to its own step, before the validator calls them unknown.
  const api = series([validate, price, dispatch, notFound]);
  const consoleWay = deps.console ? series([deps.console, notFound]) : undefined;
  const fullWay = (req: IncomingMessage, res: ServerResponse, path: string) => {
    const request = req as Request;
    const response = res as Response;
    lendHelpers(app, messages, request, response);
    (consoleWay !== undefined && isConsolePath(path) ? consoleWay : api)(request, response, (err?: unknown) => fail(req, res, err ?? Object.assign(new Error('not found'), { status: 404, path }), path));
  };

  // The front door: every request, in this order. Headers decided here are gathered and written with
  // the answer (one writeHead on the shortcut), or set on the response before the full way.
  const listener: RequestListener = (req, res) => {
    log.begin(req, res);
    const headers: Record<string, string> = { 'X-Request-Id': req.id };
    // A preflight is answered here, whatever the contract says about OPTIONS.
    if (cors.handle(req, res)) {
      log.ended(req, res);
      return;
    }
    // HEAD is GET without the body (RFC 9110). Node decided that this response has no body when the
    // request arrived, so validating and routing it as the GET it stands for sends exactly the headers.
    if (req.method === 'HEAD') {
      req.method = 'GET';
      req.head = true;
    }
    const path = pathOf(req.url ?? '/');
    identify(req, path, res, headers, (refused) => {
      if (refused !== undefined) {
        log.watch(req, res);
        fail(req, res, refused, path, headers);
        return;
      }
      if (mcp !== undefined && path === mcp.path) {
        req.caller.route = mcp.path;
        log.watch(req, res);
        mcp.handle(req, res, headers);
        return;
      }
      const hit = shortcut?.answerFor(req);
      if (hit !== undefined) {
        req.caller.shortcut = true;
        req.caller.route = hit.route;
        req.caller.operation = hit.operation;
        writeRepresentation(res, hit.rep, req.headers['if-none-match'], headers);
        log.ended(req, res);
        return;
      }
      log.watch(req, res);
      for (const name in headers) res.setHeader(name, headers[name]!);
      fullWay(req, res, path);
    });
  };
  // An upgrade meets the same step (address, every credential, the quota) before it becomes a socket.
  const identifyUpgrade: IdentifyUpgrade = (req, done) => {
    const res = new ServerResponse(req);
    const headers: Record<string, string> = {};
    const path = pathOf(req.url ?? '/');
    identify(req, path, res, headers, (refusal) => {
      for (const [name, value] of Object.entries(res.getHeaders())) headers[name] = String(value);
      const origin = req.headers.origin;
      // A socket outlives the page's same-origin checks: a page of another site must not ride on the
      // browser's connection (DNS rebinding, DESIGN 24). Clients that are not browsers send no Origin.
      if ((refusal === undefined || refusal === null) && origin !== undefined && !isAllowedOrigin(origin, req.headers.host, corsOrigins)) {
        refusal = new ForbiddenError(`Origin '${origin.slice(0, 100)}' may not open ${path}: neither this service's own nor listed in CORS_ORIGINS`);
      }
      done(refusal, headers);
    });
  };
  return Object.assign(listener, { messages, identifyUpgrade, admission });
}
