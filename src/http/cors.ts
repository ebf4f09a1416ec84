/**
 * CORS for browser front ends on other origins, off unless CORS_ORIGINS lists them. One function
 * decides the headers, used by the Express app and the fast path alike. Credentials travel in
 * headers (Authorization, X-API-Key), never cookies, so no Allow-Credentials is needed.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

const ALLOW_METHODS = 'GET, HEAD, POST, DELETE';
const ALLOW_HEADERS = 'Authorization, Content-Type, X-API-Key, If-None-Match, X-Request-Id';
const EXPOSE_HEADERS = 'X-Cache, ETag, Cache-Control, Retry-After, X-Request-Id, RateLimit, RateLimit-Policy';
const PREFLIGHT_MAX_AGE_S = '600';

/** Answers CORS for one set of allowed origins (`*` for any). */
export function createCors(origins: readonly string[]): {
  /** Adds the CORS headers a response to `req` needs; true when `req` was a preflight that it answered (204). */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
} {
  const any = origins.includes('*');
  const allowed = new Set(origins);
  return {
    handle(req, res) {
      if (origins.length === 0) return false;
      const origin = req.headers.origin;
      if (origin === undefined || (!any && !allowed.has(origin))) return false;
      res.setHeader('Access-Control-Allow-Origin', any ? '*' : origin);
      if (!any) res.setHeader('Vary', 'Origin');
      if (req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
        res.setHeader('Access-Control-Allow-Methods', ALLOW_METHODS);
        res.setHeader('Access-Control-Allow-Headers', ALLOW_HEADERS);
        res.setHeader('Access-Control-Max-Age', PREFLIGHT_MAX_AGE_S);
        res.statusCode = 204;
        res.end();
        return true;
      }
      res.setHeader('Access-Control-Expose-Headers', EXPOSE_HEADERS);
      return false;
    },
  };
}

/**
 * True when a browser page of `origin` may open a socket on a server reached as `host` (the request's
 * Host header): the service's own origin (the same host, over http or https), one CORS_ORIGINS lists,
 * or any with `*`. `null` (a sandboxed page, a file) and anything unreadable are refused.
 */
export function isAllowedOrigin(origin: string, host: string | undefined, origins: readonly string[]): boolean {
  if (origins.includes('*') || origins.includes(origin)) return true;
  if (host === undefined) return false;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.host === host.toLowerCase() && url.origin === origin.toLowerCase();
}
