/**
 * The hot path: cached public GETs answered by `node:http` before Express sees them.
 *
 * A request target (path and query exactly as received) qualifies once a full request through
 * Express validated it against the contract and answered it from the cache; for the next second,
 * the same target is answered from the cache engine's in-process copy of that key, with the same
 * bytes and headers (one reply builder). What it skips is per-request work that cannot change the
 * answer: routing, the body parser and the validation of a target already found valid. Anything
 * else goes to Express: another method, credentials (the caller must be authenticated and counted
 * as themselves), an `If-None-Match` beyond the contract's limit, a target not seen in the last
 * second, or a copy the store has not confirmed within the last second (so a flush on any instance
 * is seen at once: it clears every instance's copies).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
// The module's own binding: the global `performance` is a getter looked up on every use.
import { performance } from 'node:perf_hooks';
import type { Request } from 'express';
import { requestIdOf, routeOf } from './app.js';
import { createCors } from './cors.js';
import { toErrorResponse, writeEnvelope } from './envelope.js';
import { representationReply, varyByAccept } from './handlers/representation.js';
import { LocalMemory } from '../services/local-memory.js';
import type { Logger } from '../domain/ports/logger.js';
import { NO_METRICS, type Metrics } from '../domain/ports/metrics.js';
import type { RepresentationCache } from '../services/representation-cache.js';
import type { RateLimit } from './rate-limit.js';

/** `Accept` values that ask for an export format rather than JSON (history as CSV or Arrow). */
const EXPORT_ACCEPT = /text\/csv|application\/vnd\.apache\.arrow/i;

/** The contract's `maxLength` of the `If-None-Match` parameter of every cached read. */
const IF_NONE_MATCH_MAX_LENGTH = 512;

export interface FastPathOptions {
  engine: Pick<RepresentationCache, 'serveFresh'>;
  logger: Logger;
  corsOrigins?: readonly string[];
  /** How long a target stays answerable after a full request validated it (ms). Default 1000. */
  validForMs?: number;
  /** How many distinct targets are remembered (least recently used go first). Default 10000. */
  maxTargets?: number;
  /** True when a request carries a credential of the contract's schemes (`credentialCheck`): such requests go to Express. */
  hasCredentials: (req: IncomingMessage) => boolean;
  /** Quotas: requests answered here are counted and limited as in Express. */
  rateLimit?: RateLimit | undefined;
  /** Request durations, labelled with the operation's route template as Express labels them. */
  metrics?: Metrics | undefined;
  now?: () => number;
}

interface Target {
  key: string;
  /** The operation's route template (the metrics label). */
  route: string;
  /** One request was let through to Express to validate this target again. */
  revalidating?: boolean;
}

export class FastPath {
  readonly #engine: FastPathOptions['engine'];
  readonly #logger: Logger;
  readonly #corsOrigins: readonly string[];
  readonly #validForMs: number;
  readonly #now: () => number;
  /** Targets validated by a full request, each kept `validForMs` from its validation. */
  readonly #targets: LocalMemory<string, Target>;
  readonly #rateLimit: RateLimit | undefined;
  readonly #metrics: Metrics;
  readonly #hasCredentials: (req: IncomingMessage) => boolean;

  constructor(options: FastPathOptions) {
    this.#engine = options.engine;
    this.#logger = options.logger;
    this.#corsOrigins = options.corsOrigins ?? [];
    this.#validForMs = options.validForMs ?? 1000;
    this.#now = options.now ?? Date.now;
    this.#targets = new LocalMemory({ maxEntries: options.maxTargets ?? 10_000, maxAgeMs: this.#validForMs, now: this.#now });
    this.#rateLimit = options.rateLimit;
    this.#metrics = options.metrics ?? NO_METRICS;
    this.#hasCredentials = options.hasCredentials;
  }

  /**
   * Called by a handler after it answered `req` from the cache entry `key`: an anonymous request
   * that went through validation, so its exact target may be answered from the copy for a second.
   */
  readonly remember = (req: Request, key: string): void => {
    if (req.principal !== undefined || this.#hasCredentials(req)) return;
    this.#targets.set(req.originalUrl, { key, route: routeOf(req) });
  };

  /** Wraps the Express app: qualifying requests are answered here, all others are handed to `app`. */
  handler(app: RequestListener): RequestListener {
    const cors = createCors(this.#corsOrigins);
    const logger = this.#logger;
    return (req, res) => {
      const answer = this.#answerable(req);
      if (answer === undefined) {
        app(req, res);
        return;
      }
      const { rep, route } = answer;
      const startedAt = this.#metrics === NO_METRICS ? 0 : performance.now();
      const reqId = requestIdOf(req);
      cors.handle(req, res);
      // One header object for writeHead: headers set one by one before it must be merged in.
      const extra: Record<string, string> = { 'X-Request-Id': reqId };
      const send = () => {
        const reply = representationReply(rep, req.headers['if-none-match']);
        varyByAccept(res, rep.kind);
        res.writeHead(reply.status, Object.assign(reply.headers, extra));
        res.end(reply.body);
        if (this.#metrics !== NO_METRICS) this.#metrics.httpRequest(req.method ?? 'GET', route, reply.status, (performance.now() - startedAt) / 1000);
        // Hits are counted in the admin status; a line per hit would cost more than the hit itself.
        if (logger.isLevelEnabled('debug')) logger.debug({ reqId, req: { method: req.method, url: req.url }, res: { statusCode: reply.status }, cache: 'HIT' }, 'request completed');
      };
      // Anonymous callers are counted here exactly as Express would count them.
      if (this.#rateLimit === undefined || this.#rateLimit.tryApply(req, res, undefined, extra)) send();
      else
        this.#rateLimit.apply(req, res).then(send, (err: unknown) => {
          const status = this.#fail(req, res, reqId, err);
          if (this.#metrics !== NO_METRICS) this.#metrics.httpRequest(req.method ?? 'GET', route, status, (performance.now() - startedAt) / 1000);
        });
    };
  }

  /** Sends the envelope of `err`; resolves to the status sent. */
  #fail(req: IncomingMessage, res: ServerResponse, reqId: string, err: unknown): number {
    const r = toErrorResponse(err, { method: req.method ?? 'GET', path: req.url ?? '' });
    const level = r.status >= 500 ? 'error' : 'warn';
    this.#logger[level]({ reqId, req: { method: req.method, url: req.url }, res: { statusCode: r.status }, err: r.unexpected ? err : undefined }, r.unexpected ? 'unexpected failure' : 'request failed');
    writeEnvelope(res, r, { 'X-Request-Id': reqId });
    return r.status;
  }

  #answerable(req: IncomingMessage) {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || req.url === undefined || this.#hasCredentials(req)) return undefined;
    const now = this.#now();
    const entry = this.#targets.entry(req.url, now);
    if (entry === undefined) return undefined;
    const target = entry.value;
    const age = now - entry.storedAt;
    // Half-way through, one request goes through Express to validate the target again while the
    // others are still answered here, so under steady traffic it never lapses into a burst.
    if (age >= this.#validForMs / 2 && !target.revalidating) {
      target.revalidating = true;
      return undefined;
    }
    const inm = req.headers['if-none-match'];
    if (inm !== undefined && inm.length > IF_NONE_MATCH_MAX_LENGTH) return undefined;
    // Every remembered target answers JSON; history may be asked for as CSV or Arrow by `Accept` alone.
    const accept = req.headers.accept;
    if (accept !== undefined && EXPORT_ACCEPT.test(accept)) return undefined;
    const rep = this.#engine.serveFresh(target.key);
    return rep === undefined ? undefined : { rep, route: target.route };
  }
}
