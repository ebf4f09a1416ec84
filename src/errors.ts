/**
 * Errors of the service and the one function that turns any failure into the error envelope.
 * Domain errors carry a stable `code` and a `cause`, never an HTTP status: `toErrorResponse` maps them.
 */
import type { Principal } from './ports.js';

/** Base class of every error the service raises on purpose. */
export class AppError extends Error {
  /** Stable machine-readable code, SCREAMING_SNAKE. */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A business rule was broken (wrong old password, same new password, ...). */
export class BusinessRuleError extends AppError {
  constructor(code: string, message: string) {
    super(code, message);
  }
}

/** Deleting would leave no administrator. */
export class LastAdminError extends BusinessRuleError {
  constructor(username: string) {
    super('LAST_ADMIN', `Cannot delete '${username}': it is the last administrator`);
  }
}

/** One or more request values break the contract. */
export class InvalidRequestError extends AppError {
  readonly violations: Violation[];

  constructor(violations: Violation[]) {
    super('INVALID_REQUEST', `Invalid request parameters: ${violations.map((v) => `${v.path} ${v.message}`).join('; ')}`);
    this.violations = violations;
  }
}

/** A protected endpoint was called without credentials. */
export class NotAuthenticatedError extends AppError {
  /** `hint`: what the caller sent that this operation does not take, said after the standard words. */
  constructor(hint?: string) {
    super('NOT_AUTHENTICATED', hint === undefined ? 'Not authenticated: please log in first' : `Not authenticated: please log in first (${hint})`);
  }
}

/** Credentials were given but are not valid (bad, expired or revoked token, unknown API key, failed login). */
export class InvalidCredentialsError extends AppError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('INVALID_CREDENTIALS', message, options);
  }
}

/** The caller is authenticated but lacks the required role. */
export class ForbiddenError extends AppError {
  constructor(
    message = 'Administrator rights required',
    /** Who was refused, when known: the refusal still counts against their quota. */
    readonly principal?: Principal,
  ) {
    super('FORBIDDEN', message);
  }
}

export class UserNotFoundError extends AppError {
  constructor(username: string) {
    super('USER_NOT_FOUND', `User '${username}' not found`);
  }
}

export class UsernameTakenError extends AppError {
  constructor(username: string) {
    super('USERNAME_TAKEN', `Username '${username}' is already taken`);
  }
}

/** The provider does not know a symbol (or, for a batch, any of the symbols asked for). */
export class UnknownSymbolError extends AppError {
  constructor(symbols: readonly string[]) {
    super(
      'UNKNOWN_SYMBOL',
      symbols.length === 1 ? `Unknown symbol '${symbols[0]}'` : `None of the symbols is known: ${symbols.join(', ')}`,
    );
  }
}

/** No managed API key has this id (never existed, or already revoked). */
export class ApiKeyNotFoundError extends AppError {
  constructor(id: string) {
    super('API_KEY_NOT_FOUND', `API key '${id}' not found`);
  }
}

/** Too many attempts; retry after `retryAfterSeconds`. */
export class TooManyRequestsError extends AppError {
  readonly retryAfterSeconds: number;

  constructor(message: string, retryAfterSeconds: number) {
    super('TOO_MANY_REQUESTS', message);
    this.retryAfterSeconds = Math.max(1, Math.ceil(retryAfterSeconds));
  }
}

/** The caller used up its request quota (RATE_LIMIT_*); retry after `retryAfterSeconds`. */
export class RateLimitedError extends AppError {
  readonly retryAfterSeconds: number;

  constructor(retryAfterSeconds: number) {
    const seconds = Math.max(1, Math.ceil(retryAfterSeconds));
    super('RATE_LIMITED', `Rate limit exceeded: retry in ${seconds} seconds`);
    this.retryAfterSeconds = seconds;
  }
}

/** The upstream market-data provider failed (error status, timeout, refused, unparsable). */
export class DataSourceError extends AppError {
  readonly retryAfterSeconds: number;

  constructor(message: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super('DATA_SOURCE_UNAVAILABLE', message, options);
    this.retryAfterSeconds = Math.max(1, Math.ceil(options?.retryAfterSeconds ?? 5));
  }
}

/** This instance is at capacity (or shutting down); another instance, or a later retry, can serve. */
export class ServiceBusyError extends AppError {
  readonly retryAfterSeconds: number;

  constructor(message: string, retryAfterSeconds: number) {
    super('SERVICE_BUSY', message);
    this.retryAfterSeconds = Math.max(1, Math.ceil(retryAfterSeconds));
  }
}

/** The cache store cannot answer; callers fall back or carry on without it. */
export class CacheUnavailableError extends AppError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CACHE_UNAVAILABLE', message, options);
  }
}

/** Configuration is invalid; the message names every bad variable. */
export class ConfigError extends AppError {
  constructor(message: string) {
    super('CONFIG_INVALID', message);
  }
}

/** A contract problem at startup (an operation without a handler, ...). */
export class StartupError extends AppError {
  constructor(message: string) {
    super('STARTUP_FAILED', message);
  }
}

export interface Violation {
  path: string;
  message: string;
}

/** The error envelope of every failure. */
export interface ErrorBody {
  success: false;
  error: string;
  code: number;
  detail: string;
  violations?: Violation[];
}

export interface ErrorResponse {
  status: number;
  body: ErrorBody;
  headers: Record<string, string>;
  /** True when the failure was unexpected and its cause must be logged. */
  unexpected: boolean;
}

export const MESSAGES = {
  internal: 'Internal server error',
  dataSource: 'Data source is temporarily unavailable, please retry later',
} as const;

const STATUS_BY_CODE: Record<string, number> = {
  INVALID_REQUEST: 422,
  NOT_AUTHENTICATED: 401,
  INVALID_CREDENTIALS: 401,
  FORBIDDEN: 403,
  USER_NOT_FOUND: 404,
  UNKNOWN_SYMBOL: 404,
  DOCS_NOT_BUILT: 404,
  USERNAME_TAKEN: 409,
  API_KEY_NOT_FOUND: 404,
  TOO_MANY_REQUESTS: 429,
  DATA_SOURCE_UNAVAILABLE: 503,
};

function envelope(status: number, message: string, extra?: { violations?: Violation[] }): ErrorBody {
  const body: ErrorBody = { success: false, error: message, code: status, detail: message };
  if (extra?.violations) body.violations = extra.violations;
  return body;
}

function respond(status: number, message: string, options: Partial<Omit<ErrorResponse, 'status' | 'body'>> & { violations?: Violation[] } = {}): ErrorResponse {
  return {
    status,
    body: envelope(status, message, options.violations ? { violations: options.violations } : undefined),
    headers: options.headers ?? {},
    unexpected: options.unexpected ?? false,
  };
}

/** The shape of errors thrown by express-openapi-validator and body-parser (both are http-errors). */
interface HttpLikeError {
  status?: number;
  statusCode?: number;
  type?: string;
  message?: string;
  path?: string;
  errors?: Array<{ path?: string; message?: string; errorCode?: string }>;
  headers?: Record<string, string>;
  /** body-parser: the text that failed to parse. */
  body?: unknown;
  /** Node's code of an underlying error (zlib's Z_DATA_ERROR, ...). */
  code?: unknown;
}

/** An `Allow` list with HEAD wherever GET is: HEAD is served as GET without the body (see app.ts). */
function withHead(allow: string): string {
  const methods = allow.split(',').map((m) => m.trim());
  return methods.includes('GET') && !methods.includes('HEAD') ? [...methods, 'HEAD'].join(', ') : allow;
}

function isJson(text: unknown): boolean {
  if (typeof text !== 'string') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function isHttpLike(err: unknown): err is HttpLikeError {
  return typeof err === 'object' && err !== null && ('status' in err || 'statusCode' in err);
}

/**
 * `/body/password` -> `body.password`, `/params/username` -> `path.username`: the validator's paths
 * point into the request; the contract names path parameters `path.<name>`.
 */
function violationPath(raw: string | undefined): string {
  if (!raw) return 'request';
  return raw.replace(/^\.?\//, '').replace(/\//g, '.').replace(/^params(?=\.|$)/, 'path') || 'request';
}

/** The contract's symbol patterns (a symbol, a comma-separated list) are explained in words, not quoted. */
const SYMBOL_CHARS = '[A-Za-z0-9^.=-]{1,32}';

function inPlainWords(message: string): string {
  if (!message.startsWith('must match pattern') || !message.includes(SYMBOL_CHARS)) return message;
  return message.includes(`(,${SYMBOL_CHARS})`)
    ? 'must be 1 to 50 symbols separated by commas (no empty one, no space), each 1 to 32 of A-Z a-z 0-9 ^ . = -'
    : 'must be a symbol of 1 to 32 of A-Z a-z 0-9 ^ . = -';
}

function violationOf(e: { path?: string; message?: string }): Violation {
  const message = e.message ?? 'is invalid';
  // The validator's message for a path it cannot percent-decode names the raw path, with a stray quote.
  if (/malformed uri/i.test(message)) return { path: 'path', message: 'is not valid percent-encoding' };
  const path = violationPath(e.path);
  // An empty body where one is required: the validator says the body lacks a property named 'body'.
  if (path === 'body' && message === "must have required property 'body'") return { path, message: 'is required: send a JSON object' };
  return { path, message: inPlainWords(message) };
}

function violationsOf(err: HttpLikeError): Violation[] {
  const list = (err.errors ?? []).map(violationOf);
  return list.length > 0 ? list : [{ path: 'request', message: err.message ?? 'is invalid' }];
}

/**
 * What a request Node's HTTP parser refused (before any of the app saw it) is answered with, by the
 * parser's error code: headers too large 431, an unknown method 501, too slow 408, anything else 400.
 */
export function toParserErrorResponse(code: string | undefined): ErrorResponse {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return respond(431, 'Request header fields too large (at most 16 KiB in all)');
    case 'HPE_INVALID_METHOD':
      return respond(501, 'Method not implemented');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return respond(408, 'Request timeout: the request did not arrive in time');
    default:
      return respond(400, 'Bad request: not a valid HTTP/1.1 request');
  }
}

/**
 * Turns any failure into the status, envelope and headers to send. Never puts a stack, a cause or
 * an internal message of an unexpected error into the body.
 */
export function toErrorResponse(err: unknown, req?: { method?: string; path?: string }): ErrorResponse {
  if (err instanceof AppError) {
    if (err instanceof InvalidRequestError) return respond(422, err.message, { violations: err.violations });
    if (err instanceof BusinessRuleError) return respond(400, err.message);
    if (err instanceof TooManyRequestsError || err instanceof RateLimitedError) {
      return respond(429, err.message, { headers: { 'Retry-After': String(err.retryAfterSeconds) } });
    }
    if (err instanceof ServiceBusyError) {
      return respond(503, err.message, { headers: { 'Retry-After': String(err.retryAfterSeconds) } });
    }
    if (err instanceof DataSourceError) {
      return respond(503, MESSAGES.dataSource, { headers: { 'Retry-After': String(err.retryAfterSeconds) } });
    }
    const status = STATUS_BY_CODE[err.code];
    if (status !== undefined) return respond(status, err.message);
    return respond(500, MESSAGES.internal, { unexpected: true });
  }

  if (isHttpLike(err)) {
    const status = err.status ?? err.statusCode ?? 500;
    const method = req?.method ?? 'request';
    const path = req?.path ?? '';
    if (err.type === 'entity.parse.failed') {
      // body-parser takes only an object or an array; `null`, `"x"` or `1` are JSON all the same.
      const message = isJson(err.body) ? 'must be a JSON object' : 'is not valid JSON';
      return respond(422, `Invalid request parameters: body ${message}`, { violations: [{ path: 'body', message }] });
    }
    if (err.type === 'entity.too.large' || status === 413) {
      return respond(413, 'Request body is too large');
    }
    if (err.type === 'encoding.unsupported' || err.type === 'charset.unsupported') {
      return respond(415, 'Unsupported content encoding or charset');
    }
    if (err.type === 'request.size.invalid') return respond(400, 'Bad request: the body is not as long as its Content-Length says');
    // body-parser hands on zlib's own error when a gzip/deflate/br body does not decompress.
    if (status === 400 && err.type === undefined && err.errors === undefined && typeof err.code === 'string') {
      const message = 'could not be decompressed with its Content-Encoding';
      return respond(422, `Invalid request parameters: body ${message}`, { violations: [{ path: 'body', message }] });
    }
    switch (status) {
      case 400: {
        const violations = violationsOf(err);
        return respond(422, `Invalid request parameters: ${violations.map((v) => `${v.path} ${v.message}`).join('; ')}`, { violations });
      }
      case 401:
        return respond(401, new NotAuthenticatedError().message);
      case 403:
        return respond(403, new ForbiddenError().message);
      case 404:
        return respond(404, `Not found: ${method} ${path}`);
      case 405:
        return respond(405, `Method not allowed: ${method} ${path}`, { headers: err.headers?.Allow ? { Allow: withHead(err.headers.Allow) } : {} });
      case 415:
        return respond(415, 'Unsupported media type: send Content-Type: application/json');
      default:
        break;
    }
    if (status >= 400 && status < 500) return respond(status, err.message ?? 'Bad request');
  }
  return respond(500, MESSAGES.internal, { unexpected: true });
}
