/**
 * Who may keep an answer: `Cache-Control` follows the credentials the answered operation requires.
 * An operation open to anonymous callers is `public`; one the contract in force closes to them
 * (DATA_REQUIRES_AUTH, every credentialed operation) is `private` and varies on the credential
 * headers, so a shared cache in front never hands one caller's answer to another, nor to anyone
 * without credentials.
 */
import type { ServerResponse } from 'node:http';
import type { Request } from 'express';
import vary from 'vary';

/** Who may keep an answer: any cache, or only the caller's own. */
export type CacheScope = 'public' | 'private';

/** The request headers that carry the contract's credentials (its bearer and API key schemes). */
export const CREDENTIAL_HEADERS = 'Authorization, X-API-Key';

/**
 * `private` when the operation that answers `req` takes no anonymous caller (its security has no
 * `{}`), as the contract in force says; `public` otherwise.
 */
export function cacheScopeOf(req: Request): CacheScope {
  const security = (req.openapi?.schema as { security?: Array<Record<string, unknown>> } | undefined)?.security;
  if (security === undefined || security.length === 0) return 'public';
  return security.some((requirement) => Object.keys(requirement).length === 0) ? 'public' : 'private';
}

/** The `Cache-Control` value for an answer fresh for `maxAgeSeconds`, kept by whom `scope` says. */
export function cacheControl(scope: CacheScope, maxAgeSeconds: number): string {
  return `${scope}, max-age=${maxAgeSeconds}`;
}

/** Adds the credential headers to the answer's `Vary` (after what is there). */
export function varyByCredentials(res: ServerResponse): void {
  vary(res, CREDENTIAL_HEADERS);
}

/** Sets `Cache-Control` for `req`'s answer and, when private, `Vary` on the credential headers. */
export function setCacheControl(req: Request, res: ServerResponse, maxAgeSeconds: number): void {
  const scope = cacheScopeOf(req);
  res.setHeader('Cache-Control', cacheControl(scope, maxAgeSeconds));
  if (scope === 'private') varyByCredentials(res);
}
