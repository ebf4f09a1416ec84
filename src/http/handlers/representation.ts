/**
 * How a cached representation is sent: status, cache headers and the exact cached bytes. Shared by
 * the Express handlers and the fast path in front of Express, so both send the same bytes and headers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type Request } from 'express';
import vary from 'vary';
import type { CachedRepresentation, CacheKind } from '../../services/cache/cache-types.js';
import { cacheControl, CREDENTIAL_HEADERS, type CacheScope } from '../cache-policy.js';
import { ARROW_CONTENT_TYPE } from '../history-export.js';

/** Kinds whose one URL answers several formats, chosen by `Accept`: history (JSON, CSV, Arrow). */
const FORMATS_BY_ACCEPT: ReadonlySet<CacheKind> = new Set(['history']);

/** True when a URL answering `kind` gives other formats than its cached JSON by `Accept`. */
export function formatsByAccept(kind: CacheKind): boolean {
  return FORMATS_BY_ACCEPT.has(kind);
}

/** The formats such a URL answers, by media type; JSON first, so it wins a tie. */
const FORMAT_TYPES = ['application/json', 'text/csv', ARROW_CONTENT_TYPE];

export type Format = 'json' | 'csv' | 'arrow';

/**
 * The format a request's `Accept` chooses on a URL that answers several (JSON when it has none, names
 * none of them, or ties). The handler and the cached-answer shortcut both ask here, so they cannot
 * disagree; the headers a JSON client usually sends are answered without parsing.
 */
export function acceptedFormat(req: IncomingMessage): Format {
  const accept = req.headers.accept;
  if (accept === undefined || accept === 'application/json' || accept === '*/*') return 'json';
  // Express's own negotiation (`req.accepts`), which reads only the headers: callable on any request.
  const chosen = express.request.accepts.call(req as Request, ...FORMAT_TYPES);
  return chosen === 'text/csv' ? 'csv' : chosen === ARROW_CONTENT_TYPE ? 'arrow' : 'json';
}

/**
 * Adds `Accept` to the answer's `Vary`, after what is there (CORS's `Origin`), when its URL gives
 * other formats by `Accept`: every answer of such a URL says so, JSON included, or an HTTP cache could
 * hand a JSON answer to a client that asked for CSV. Without `kind` (an export), always.
 */
export function varyByAccept(res: ServerResponse, kind?: CacheKind): void {
  if (kind === undefined || FORMATS_BY_ACCEPT.has(kind)) vary(res, 'Accept');
}

/** What a cached answer of `kind` kept by `scope` varies on: `Accept` for history, the credential headers when private. */
function varyOf(kind: CacheKind, scope: CacheScope): string | undefined {
  const byAccept = FORMATS_BY_ACCEPT.has(kind);
  if (scope === 'private') return byAccept ? `Accept, ${CREDENTIAL_HEADERS}` : CREDENTIAL_HEADERS;
  return byAccept ? 'Accept' : undefined;
}

/** True when an `If-None-Match` header names `etag` (or `*`); weak comparison, as RFC 9110 asks for GET. */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  // What a client sends back is most often the very ETag it was given.
  if (header === etag) return true;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((candidate) => {
    const c = candidate.trim();
    return c === '*' || c.replace(/^W\//, '') === bare;
  });
}

export interface RepresentationReply {
  status: 200 | 304;
  headers: Record<string, string>;
  /** The exact cached bytes; absent on 304. */
  body?: Buffer;
}

/**
 * The status, headers and body of an answer from the cache, honouring `If-None-Match`; `scope` is
 * who may keep it (`cacheScopeOf`; the fast path answers only public operations).
 */
export function representationReply(rep: CachedRepresentation, ifNoneMatch: string | undefined, scope: CacheScope = 'public'): RepresentationReply {
  const headers: Record<string, string> = {
    'X-Cache': rep.cacheStatus,
    ETag: rep.etag,
    'Cache-Control': cacheControl(scope, rep.maxAgeSeconds),
  };
  if (etagMatches(ifNoneMatch, rep.etag)) return { status: 304, headers };
  headers['Content-Type'] = 'application/json; charset=utf-8';
  headers['Content-Length'] = String(rep.body.length);
  return { status: 200, headers, body: rep.body };
}

/**
 * Sends a cached representation on `res` in one `writeHead`: the handlers and the cached-answer
 * shortcut both answer through here, so both send the same status, headers and bytes. `extra` are
 * headers decided before (the request id, quota state) that were not set on `res` one by one.
 *
 * `Vary` goes into that one header object when nothing set a `Vary` on `res` before (CORS's `Origin`
 * did, when it did): a header set on `res` beforehand turns Node's `writeHead` into its slow case,
 * which stores and validates every other header once more (measured: a few microseconds per answer).
 */
export function writeRepresentation(res: ServerResponse, rep: CachedRepresentation, ifNoneMatch: string | undefined, extra?: Record<string, string>, scope: CacheScope = 'public'): void {
  const reply = representationReply(rep, ifNoneMatch, scope);
  const headers = extra === undefined ? reply.headers : Object.assign(reply.headers, extra);
  const varies = varyOf(rep.kind, scope);
  if (varies !== undefined) {
    if (res.hasHeader('vary')) vary(res, varies);
    else headers.Vary = varies;
  }
  res.writeHead(reply.status, headers);
  res.end(reply.body);
}
