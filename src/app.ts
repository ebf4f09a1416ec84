/**
 * `createApp(deps)` builds the Express app from the contract: body parser, request validation and
 * security (express-openapi-validator), one route per operationId, one error middleware.
 * No I/O happens here; everything it needs is handed in.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type ErrorRequestHandler, type Request, type RequestHandler } from 'express';
import type { Contract } from './contract.js';
import { createCors } from './cors.js';
import { AppError, ForbiddenError, InvalidCredentialsError, NotAuthenticatedError, StartupError, toErrorResponse } from './errors.js';
import type { Handlers } from './handlers/types.js';
import type { Logger } from './logger.js';
import { openApiValidatorMiddleware } from './openapi-validator.js';
import { requestLog } from './request-log.js';
import { NO_METRICS, UNMATCHED_ROUTE, type Metrics, type Principal } from './ports.js';
import { hasCredentials, isRateLimitedPath, type RateLimit } from './rate-limit.js';

declare module 'express-serve-static-core' {
  interface Request {
    /** Who is calling, set by the security handlers on protected operations. */
    principal?: Principal;
    /** Why each credential offered was refused, so the error mapper can say which. */
    authFailures?: unknown[];
  }
}

/** Checks the credentials of a request. Rejects with NotAuthenticatedError / InvalidCredentialsError. */
export interface Authenticator {
  authenticateBearer(req: Request): Promise<Principal>;
  authenticateApiKey(req: Request): Promise<Principal>;
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

function securityHandler(authenticate: (req: Request) => Promise<Principal>) {
  return async (req: Request, scopes: string[]): Promise<boolean> => {
    try {
      const principal = await authenticate(req);
      if (scopes.includes('admin') && !principal.isAdmin) throw new ForbiddenError();
      req.principal = principal;
      return true;
    } catch (err) {
      (req.authFailures ??= []).push(err);
      throw err;
    }
  };
}

/**
 * The validator reports a failed security requirement as a bare 401/403 of its own; the reasons our
 * handlers gave are on the request. Picks the one the caller should hear.
 */
function explainSecurityFailure(err: unknown, req: Request): unknown {
  const status = (err as { status?: number } | null)?.status;
  if (err instanceof AppError || (status !== 401 && status !== 403)) return err;
  const failures = req.authFailures ?? [];
  const unexpected = failures.find((f) => !(f instanceof AppError));
  if (unexpected) return unexpected;
  const forbidden = failures.find((f) => f instanceof ForbiddenError);
  if (forbidden) return forbidden;
  const invalid = failures.find((f) => f instanceof InvalidCredentialsError);
  if (invalid) return invalid;
  if (req.headers.authorization !== undefined) {
    return new InvalidCredentialsError("Invalid credentials: send the token as 'Authorization: Bearer <token>'");
  }
  // Only where API keys are accepted: on a bearer-only operation a valid key is not "invalid", just not enough.
  if (req.headers['x-api-key'] !== undefined && acceptsScheme(req, 'apiKeyAuth')) return new InvalidCredentialsError('Invalid API key');
  return new NotAuthenticatedError();
}

/**
 * True when the request offers a credential that the matched operation takes. On an operation open
 * to anonymous callers (`{}` among its requirements) the validator lets the request through even
 * when that credential is bad; it must not then pass as anonymous.
 */
function offersAcceptedCredential(req: Request): boolean {
  return (req.headers.authorization !== undefined && acceptsScheme(req, 'bearerAuth')) || (req.headers['x-api-key'] !== undefined && acceptsScheme(req, 'apiKeyAuth'));
}

/** True when the operation the validator matched lists `scheme` in one of its security requirements. */
function acceptsScheme(req: Request, scheme: string): boolean {
  const security = (req as { openapi?: { schema?: { security?: Array<Record<string, unknown>> } } }).openapi?.schema?.security;
  return security?.some((requirement) => scheme in requirement) ?? false;
}

/** The contract's path template the validator matched (`/api/admin/users/{username}`), else the fixed label. */
function routeOf(req: Request): string {
  return (req as { openapi?: { openApiRoute?: string } }).openapi?.openApiRoute ?? UNMATCHED_ROUTE;
}

export function createApp(deps: AppDeps): express.Express {
  const { contract, handlers, authenticator, logger } = deps;
  assertHandlersComplete(contract, handlers);

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', deps.trustProxy ?? false);

  const metrics = deps.metrics ?? NO_METRICS;
  if (metrics !== NO_METRICS) {
    app.use((req, res, next) => {
      const startedAt = performance.now();
      // Taken now: HEAD is rewritten to GET below.
      const method = req.method;
      res.once('finish', () => metrics.httpRequest(method, routeOf(req), res.statusCode, (performance.now() - startedAt) / 1000));
      next();
    });
  }

  app.use(requestLog(app, logger, requestId));
  const cors = createCors(deps.corsOrigins ?? []);
  app.use((req, res, next) => {
    // Before validation: a preflight is answered here, whatever the contract says about OPTIONS.
    if (cors.handle(req, res)) return;
    // HEAD is GET without the body (RFC 9110). Node decided that this response has no body when the
    // request arrived, so validating and routing it as the GET it stands for sends exactly the headers.
    if (req.method === 'HEAD') req.method = 'GET';
    next();
  });
  // Anonymous requests count against their address's quota before any parsing or validation, so a
  // flood of bad requests is refused cheaply; requests with credentials count once they are checked.
  const rateLimit = deps.rateLimit;
  const counted = new WeakSet<Request>();
  if (rateLimit) {
    app.use((req, res, next) => {
      if (!isRateLimitedPath(req.path) || hasCredentials(req)) {
        next();
        return;
      }
      counted.add(req);
      if (rateLimit.tryApply(req, res)) next();
      else rateLimit.apply(req, res).then(() => next(), next);
    });
  }
  app.use(express.json({ limit: deps.bodyLimitBytes }));

  const onViolation = deps.onResponseViolation;
  app.use(
    openApiValidatorMiddleware({
      apiSpec: structuredClone(contract.document) as never,
      validateRequests: { allErrors: true },
      // The contract has no multipart bodies; without this, every request passes one more step.
      fileUploader: false,
      validateResponses: onViolation
        ? {
            onError: (error: { message: string }, _body: unknown, req: Request) => {
              logger.error({ reqId: req.id, violation: error.message }, 'response breaks the contract');
              onViolation(error.message, req);
            },
          }
        : false,
      validateSecurity: {
        handlers: {
          bearerAuth: securityHandler((req) => authenticator.authenticateBearer(req)) as never,
          apiKeyAuth: securityHandler((req) => authenticator.authenticateApiKey(req)) as never,
        },
      },
    }),
  );

  app.use((req, _res, next) => {
    if (req.principal || !offersAcceptedCredential(req)) next();
    else next(explainSecurityFailure(Object.assign(new Error('unauthorized'), { status: 401 }), req));
  });
  if (rateLimit) {
    app.use((req, res, next) => {
      if (counted.has(req) || !isRateLimitedPath(req.path) || rateLimit.tryApply(req, res, req.principal)) next();
      else rateLimit.apply(req, res, req.principal).then(() => next(), next);
    });
  }

  const router = express.Router();
  for (const op of contract.operations) {
    const handler = (handlers as unknown as Record<string, RequestHandler>)[op.operationId] as RequestHandler;
    router[op.method](op.expressPath, handler);
  }
  app.use(router);

  app.use((req, _res, next) => {
    next(Object.assign(new Error('not found'), { status: 404, path: req.path }));
  });

  const errorHandler: ErrorRequestHandler = (err, req, res, next) => {
    const explained = explainSecurityFailure(err, req);
    const response = toErrorResponse(explained, { method: req.method, path: req.path });
    if (response.unexpected) req.log.error({ err: explained }, 'unexpected failure');
    if (res.headersSent) {
      next(err);
      return;
    }
    res.status(response.status).set(response.headers).json(response.body);
  };
  app.use(errorHandler);
  return app;
}
