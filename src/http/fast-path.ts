/**
 * The cached-answer shortcut: a branch of the one request path (app.ts), taken after the caller step.
 *
 * A request target (path and query exactly as received) qualifies once a full request validated it
 * against the contract, found its operation open to anonymous callers, and answered it from the cache;
 * for the next second, the same target is answered from the cache engine's in-process copy of that key
 * by the same reply builder as the handler (`writeRepresentation`). What it skips is per-request work
 * that cannot change the answer: routing, the body parser and the validation of a target already found
 * valid. Everything else (address, credentials, quota, request id, CORS, log, metrics) the request has
 * been through already, as every request has. Anything else goes the full way: another method, an
 * `If-None-Match` beyond the contract's limit, an `Accept` that the full way would answer with
 * another format than the copy's JSON (history's CSV or Arrow, negotiated by the handler's own rule,
 * so `text/*` is one), a target not seen in the last second, or a copy the store has not confirmed
 * within the last second (so a flush on any instance is seen at once: it clears every instance's copies).
 */
import type { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import QuickLRU from 'quick-lru';
import { LocalMemory } from '../services/local-memory.js';
import { UNMATCHED_ROUTE } from '../domain/ports/metrics.js';
import type { CachedRepresentation } from '../services/cache/cache-types.js';
import type { RepresentationCache } from '../services/cache/representation-cache.js';
import { acceptedFormat, formatsByAccept, type Format } from './handlers/representation.js';

/** The contract's `maxLength` of the `If-None-Match` parameter of every cached read. */
const IF_NONE_MATCH_MAX_LENGTH = 512;

/** How many `Accept` values the shortcut remembers the negotiated format of, and the longest it remembers. */
const REMEMBERED_ACCEPTS = 64;
const REMEMBERED_ACCEPT_LENGTH = 256;

export interface FastPathOptions {
  engine: Pick<RepresentationCache, 'serveFresh'>;
  /** How long a target stays answerable after a full request validated it (ms). Default 1000. */
  validForMs?: number;
  /** How many distinct targets are remembered (least recently used go first). Default 10000. */
  maxTargets?: number;
  now?: () => number;
}

/** A cached answer the shortcut may give: the representation, and the operation's route template and id. */
export interface CachedAnswer {
  rep: CachedRepresentation;
  route: string;
  operation: string;
}

interface Target {
  key: string;
  /** The operation's route template (the metrics label). */
  route: string;
  /** The operation's id (the usage report's). */
  operation: string;
  /** Its URL answers other formats than JSON by `Accept` (history): the copy answers only a request that negotiates JSON. */
  byAccept: boolean;
  /** One request was let through the full way to validate this target again. */
  revalidating?: boolean;
}

export class FastPath {
  readonly #engine: FastPathOptions['engine'];
  readonly #validForMs: number;
  readonly #now: () => number;
  /** Targets validated by a full request, each kept `validForMs` from its validation. */
  readonly #targets: LocalMemory<string, Target>;
  /**
   * What recent `Accept` values negotiate on a URL of several formats. Clients send a handful of
   * them, and negotiating one (a browser's, say) costs the shortcut many times what it costs to answer
   * (docs/performance.md, "Formats").
   */
  readonly #formats = new QuickLRU<string, Format>({ maxSize: REMEMBERED_ACCEPTS });

  constructor(options: FastPathOptions) {
    this.#engine = options.engine;
    this.#validForMs = options.validForMs ?? 1000;
    this.#now = options.now ?? Date.now;
    this.#targets = new LocalMemory({ maxEntries: options.maxTargets ?? 10_000, maxAgeMs: this.#validForMs, now: this.#now });
  }

  /**
   * Called by a handler after it answered `req` with the JSON of the cache entry `rep`: a request that
   * went through validation, to an operation anonymous callers may call, so its exact target may be
   * answered from the copy for a second (to any caller the caller step let through).
   */
  readonly remember = (req: Request, rep: Pick<CachedRepresentation, 'key' | 'kind'>): void => {
    // Only a target the caller step's one point pays for: a dearer one goes the full way, which prices it.
    if (req.caller.anonymousAllowed !== true || req.caller.points > 1) return;
    this.#targets.set(req.originalUrl, {
      key: rep.key,
      route: req.openapi?.openApiRoute ?? UNMATCHED_ROUTE,
      operation: req.caller.operation ?? UNMATCHED_ROUTE,
      byAccept: formatsByAccept(rep.kind),
    });
  };

  /** The cached answer to `req` and its route template, when the shortcut may give it; else undefined. */
  answerFor(req: IncomingMessage): CachedAnswer | undefined {
    if (req.method !== 'GET' || req.url === undefined) return undefined;
    const inm = req.headers['if-none-match'];
    if (inm !== undefined && inm.length > IF_NONE_MATCH_MAX_LENGTH) return undefined;
    return this.#answer(req.url, req);
  }

  /**
   * The cached JSON answer to a GET of `target` (path and query, as a request would send them) and
   * its route template, when a full request validated that exact target within the last second;
   * else undefined. The MCP tool-call shortcut (mcp/shortcut.ts) asks it for the operation a tool maps to.
   */
  answerForTarget(target: string): CachedAnswer | undefined {
    return this.#answer(target);
  }

  /** The copy's answer to a GET of `target`; with `req`, only when its `Accept` asks for what the copy is. */
  #answer(target: string, req?: IncomingMessage): CachedAnswer | undefined {
    const now = this.#now();
    const entry = this.#targets.entry(target, now);
    if (entry === undefined) return undefined;
    const remembered = entry.value;
    // Checked before the half-way revalidation below: a request for CSV never revalidates the JSON's target.
    if (remembered.byAccept && req?.headers.accept !== undefined && this.#formatAsked(req, req.headers.accept) !== 'json') return undefined;
    const age = now - entry.storedAt;
    // Half-way through, one request goes the full way to validate the target again while the
    // others are still answered here, so under steady traffic it never lapses into a burst.
    if (age >= this.#validForMs / 2 && !remembered.revalidating) {
      remembered.revalidating = true;
      return undefined;
    }
    const rep = this.#engine.serveFresh(remembered.key);
    return rep === undefined ? undefined : { rep, route: remembered.route, operation: remembered.operation };
  }

  /** The format `accept` (`req`'s) negotiates on a URL of several formats (`acceptedFormat`, the handler's rule), remembered per value. */
  #formatAsked(req: IncomingMessage, accept: string): Format {
    // What JSON clients send most, told apart without hashing the header.
    if (accept === 'application/json' || accept === '*/*') return 'json';
    const known = this.#formats.get(accept);
    if (known !== undefined) return known;
    const format = acceptedFormat(req);
    if (accept.length <= REMEMBERED_ACCEPT_LENGTH) this.#formats.set(accept, format);
    return format;
  }
}
