/**
 * The error envelope: the one function that turns any failure (ours, the validator's, the body
 * parser's, Node's HTTP parser's, anything unknown) into a status, the envelope and its headers,
 * and the one place that writes it (on a response, or as raw bytes on a socket no response owns).
 */
import { STATUS_CODES, type ServerResponse } from 'node:http';
import {
  AppError,
  BusinessRuleError,
  DATABASE_UNAVAILABLE_MESSAGE,
  DatabaseUnavailableError,
  DataSourceError,
  describeAttempts,
  ForbiddenError,
  InvalidRequestError,
  NotAuthenticatedError,
  ProvidersUnavailableError,
  RateLimitedError,
  ServiceBusyError,
  TooManyRequestsError,
  type Violation,
} from '../domain/errors.js';
import { MAX_SYMBOL_LENGTH, MAX_SYMBOLS, SYMBOL_CHARS, SYMBOL_CHARS_IN_WORDS } from '../domain/symbols.js';

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
  UNKNOWN_MARKET: 404,
  DOCS_NOT_BUILT: 404,
  ASYNCAPI_MISSING: 404,
  CONSOLE_NOT_BUILT: 404,
  USERNAME_TAKEN: 409,
  API_KEY_NOT_FOUND: 404,
  HISTORY_JOB_NOT_FOUND: 404,
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
function inPlainWords(message: string): string {
  if (!message.startsWith('must match pattern') || !message.includes(SYMBOL_CHARS)) return message;
  return message.includes(`(,${SYMBOL_CHARS})`)
    ? `must be 1 to ${MAX_SYMBOLS} symbols separated by commas (no empty one, no space), each 1 to ${MAX_SYMBOL_LENGTH} of ${SYMBOL_CHARS_IN_WORDS}`
    : `must be a symbol of 1 to ${MAX_SYMBOL_LENGTH} of ${SYMBOL_CHARS_IN_WORDS}`;
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
 * What a request refused on the wire is answered with, by Node's parser error code (headers too
 * large 431, chunk extensions too large 413, an unknown method 501, an HTTP version other than 1.x
 * 505, too slow 408, anything else 400) or by the wire's own refusals: `MISSING_HOST` (400),
 * `EXPECTATION_FAILED` (417, an `Expect:` other than 100-continue) and `CONNECT` (501).
 */
export function toParserErrorResponse(code: string | undefined): ErrorResponse {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return respond(431, 'Request header fields too large (at most 16 KiB in all)');
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return respond(413, 'Request chunk extensions too large');
    case 'HPE_INVALID_METHOD':
      return respond(501, 'Method not implemented');
    case 'HPE_INVALID_VERSION':
      return respond(505, 'HTTP version not supported: send HTTP/1.1');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return respond(408, 'Request timeout: the request did not arrive in time');
    case 'TRANSFER_ENCODING_NOT_CHUNKED':
    case 'HPE_INVALID_TRANSFER_ENCODING':
      return respond(400, 'Bad request: a request with Transfer-Encoding must end it in chunked');
    case 'MISSING_HOST':
      return respond(400, 'Bad request: an HTTP/1.1 request needs a Host header');
    case 'EXPECTATION_FAILED':
      return respond(417, 'Expectation failed: the only Expect this service meets is 100-continue');
    case 'CONNECT':
      // Not 405: CONNECT names no resource of ours that some other method could serve; no path implements it.
      return respond(501, 'Method not implemented: CONNECT (this service is not a proxy)');
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
    if (err instanceof DatabaseUnavailableError) {
      // The store's own reason (an address, a driver code) is for the log, never the caller.
      return respond(503, DATABASE_UNAVAILABLE_MESSAGE, { headers: { 'Retry-After': String(err.retryAfterSeconds) } });
    }
    if (err instanceof DataSourceError) {
      // With several providers the message names each one and why it could not answer (never a key).
      const message = err instanceof ProvidersUnavailableError ? `${MESSAGES.dataSource} (${describeAttempts(err.attempts)})` : MESSAGES.dataSource;
      return respond(503, message, { headers: { 'Retry-After': String(err.retryAfterSeconds) } });
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

/** The headers and body every written envelope carries; `extraHeaders` win over the response's own. */
function rendered(response: ErrorResponse, extraHeaders: Record<string, string>): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify(response.body);
  return {
    headers: { ...response.headers, ...extraHeaders, 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(body)) },
    body,
  };
}

/**
 * Writes `response` as the answer on `res`, with `extraHeaders` (a request id, `Connection: close`).
 * An answer already complete is left alone (false); one already begun cannot be replaced, so the
 * connection is dropped and the client learns of the failure from its closing (false).
 */
export function writeEnvelope(res: ServerResponse, response: ErrorResponse, extraHeaders: Record<string, string> = {}): boolean {
  if (res.writableEnded) return false;
  if (res.headersSent) {
    res.destroy();
    return false;
  }
  const { headers, body } = rendered(response, extraHeaders);
  res.writeHead(response.status, headers);
  res.end(body);
  return true;
}

/**
 * `response` as the raw HTTP/1.1 bytes of a complete answer, for a socket no response object owns
 * (Node's parser refused the request, or a CONNECT): it always closes the connection.
 */
export function envelopeBytes(response: ErrorResponse, extraHeaders: Record<string, string> = {}): string {
  const { headers, body } = rendered(response, { ...extraHeaders, Connection: 'close' });
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  return `HTTP/1.1 ${response.status} ${STATUS_CODES[response.status] ?? ''}\r\n${lines.join('')}\r\n${body}`;
}
