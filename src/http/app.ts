/**
 * `createApp(deps)` builds the Express app from the contract: body parser, request validation
 * (express-openapi-validator, which also finds each request's operation), the contract's security
 * (`security.ts`), then the handler of that operationId, and one error middleware.
 * No I/O happens here; everything it needs is handed in.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type ErrorRequestHandler, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { OpenApiRequestMetadata } from 'express-openapi-validator/dist/framework/types.js';
import type { Contract } from './contract.js';
import { createCors } from './cors.js';
import { ForbiddenError, StartupError } from '../domain/errors.js';
import { toErrorResponse, writeEnvelope } from './envelope.js';
import type { Handlers } from './handlers/types.js';
import type { Logger } from '../domain/ports/logger.js';
import { openApiValidatorMiddleware } from './openapi-validator.js';
import { requestLog } from './request-log.js';
import { contractSecurity, credentialCheck, type Authenticator } from './security.js';
import { runStep, series } from './series.js';
import { NO_METRICS, UNMATCHED_ROUTE, type Metrics } from '../domain/ports/metrics.js';
import type { Principal } from '../domain/ports/accounts.js';
import { isRateLimitedPath, type RateLimit } from './rate-limit.js';

declare module 'express-serve-static-core' {
  interface Request {
    /** Who is calling, set by the security step when the caller sent credentials the operation takes. */
    principal?: Principal;
    /** The operation the validator matched (route template, path parameters, operation object); absent when none. */
    openapi?: OpenApiRequestMetadata;
    /** The request arrived as HEAD and is routed as GET; Node sends its answer without the body. */
    head?: boolean;
  }
}

export interface AppDeps {
  contract: Contract;
  handlers: Handlers;
  authenticator: Authenticator;
  logger: Logger;
  bodyLimitBytes: number;
  trustProxy?: boolean;
  /** Request quotas on /api (RATE_LIMIT_*); none when absent. */
  rateLimit?: RateLimit;
  /** Origins allowed to call from a browser (CORS_ORIGINS); none by default. */
  corsOrigins?: readonly string[];
  /** When set, every response is validated against the contract and each violation is reported here. */
  onResponseViolation?: (message: string, req: Request) => void;
  /** Records every response's duration by route template; none by default. */
  metrics?: Metrics;
  /** Serves the web console at /app/ (and redirects / there) before the API's steps; no console when absent. */
  console?: RequestHandler;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

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

/** The contract's path template the validator matched (`/api/admin/users/{username}`), else the fixed label. */
export function routeOf(req: Request): string {
  return req.openapi?.openApiRoute ?? UNMATCHED_ROUTE;
}

export function createApp(deps: AppDeps): express.Express {
  const { contract, handlers, authenticator, logger } = deps;
  assertHandlersComplete(contract, handlers);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', deps.trustProxy ?? false);

  const metrics = deps.metrics ?? NO_METRICS;
  // One listener per request both logs it and, with metrics on, records its duration by route template.
  const recordDuration = metrics === NO_METRICS ? undefined : (req: Request, method: string, statusCode: number, seconds: number) => metrics.httpRequest(method, routeOf(req), statusCode, seconds);
  const beginLog = requestLog(app, logger, requestId, recordDuration);
  const cors = createCors(deps.corsOrigins ?? []);
  // Anonymous requests count against their address's quota before any parsing or validation, so a
  // flood of bad requests is refused cheaply; requests with credentials count once they are checked.
  const rateLimit = deps.rateLimit;
  const hasCredentials = credentialCheck(contract.document);
  const counted = new WeakSet<Request>();
  // Only a request that announces a body (RFC 9112: Content-Length or Transfer-Encoding) has one to parse.
  const json = express.json({ limit: deps.bodyLimitBytes });
  const parseBody = (req: Request, res: Response, next: NextFunction) => {
    const declared = req.headers['content-length'];
    if (declared === undefined && req.headers['transfer-encoding'] === undefined) next();
    else if (declared !== undefined && Number(declared) > deps.bodyLimitBytes) {
      // Refused on its declared length, before a byte of it is read (body-parser would read it all
      // first): the connection closes after the answer, so the rest of the body is never waited for.
      res.setHeader('Connection', 'close');
      next(Object.assign(new Error('request entity too large'), { status: 413, type: 'entity.too.large' }));
    } else json(req, res, next);
  };
  // What every request goes through before validation, in order.
  const front: RequestHandler = (req, res, next) => {
    beginLog(req, res);
    // Before validation: a preflight is answered here, whatever the contract says about OPTIONS.
    if (cors.handle(req, res)) return;
    // HEAD is GET without the body (RFC 9110). Node decided that this response has no body when the
    // request arrived, so validating and routing it as the GET it stands for sends exactly the headers.
    if (req.method === 'HEAD') {
      req.method = 'GET';
      req.head = true;
    }
    if (rateLimit === undefined || !isRateLimitedPath(req.path) || hasCredentials(req)) {
      parseBody(req, res, next);
      return;
    }
    counted.add(req);
    if (rateLimit.tryApply(req, res)) parseBody(req, res, next);
    else rateLimit.apply(req, res).then(() => parseBody(req, res, next), next);
  };

  const onViolation = deps.onResponseViolation;
  const validate = openApiValidatorMiddleware({
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
    // Checked by `contractSecurity` below, which tries only the credentials a request offers.
    validateSecurity: false,
  });
  const checkSecurity = contractSecurity(contract.operations, contract.document, authenticator);
  // A caller refused for its role (403) is still a caller: the refusal counts against its quota, with
  // the RateLimit headers, and over the quota it is a 429 like any other call. Without quotas there is
  // nothing to count, and no continuation to make per request.
  const security: RequestHandler =
    rateLimit === undefined
      ? checkSecurity
      : (req, res, next) =>
          checkSecurity(req, res, (err?: unknown) => {
            const refused = err instanceof ForbiddenError ? err.principal : undefined;
            if (refused === undefined || !isRateLimitedPath(req.path)) next(err);
            else if (rateLimit.tryApply(req, res, refused)) next(err);
            else rateLimit.apply(req, res, refused).then(() => next(err), next);
          });
  // The validator already found the operation; its handler is one Map lookup away (no second routing).
  // A caller with credentials is counted against its quota here, once the security step knows who it is.
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
    if (rateLimit === undefined || counted.has(req) || !isRateLimitedPath(req.path) || rateLimit.tryApply(req, res, req.principal)) runStep(handler, req, res, next);
    else rateLimit.apply(req, res, req.principal).then(() => runStep(handler, req, res, next), next);
  };
  const notFound: RequestHandler = (req, _res, next) => {
    next(Object.assign(new Error('not found'), { status: 404, path: req.path }));
  };

  // Every request takes these steps in this order; one Express layer runs them (see series.ts).
  // The console is no API operation: it is answered before the validator calls its paths unknown.
  app.use(series(deps.console ? [front, deps.console, validate, security, dispatch, notFound] : [front, validate, security, dispatch, notFound]));

  const errorHandler: ErrorRequestHandler = (err, req, res, _next) => {
    // The wire already answered this request (its framing broke while the app worked on it): the
    // app's own answer then fails on the sent one, as expected.
    if (res.writableEnded && (err as { code?: unknown } | undefined)?.code === 'ERR_HTTP_HEADERS_SENT') {
      req.log.debug({ err }, 'failure after the request was answered');
      return;
    }
    const response = toErrorResponse(err, { method: req.method, path: req.path });
    if (response.unexpected) req.log.error({ err }, 'unexpected failure');
    // Part of the answer is out, so the client can only learn of the failure from the connection
    // closing (Express's final handler would do the same, and print the stack to stderr first); an
    // answer already complete (the parser's refusal of this request) stays the only one.
    writeEnvelope(res, response);
  };
  app.use(errorHandler);
  return app;
}
