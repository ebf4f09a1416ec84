/**
 * The hot path: a cached GET /api/indices answered by `node:http` before Express sees it. It is the
 * same operation with the same bytes and headers (one reply builder, one error mapper); what it
 * skips is per-request work that cannot change the answer: routing, the body parser and schema
 * validation of a request that has no body, no query and no parameters but an `If-None-Match`
 * within the contract's limit. Anything else (a query string, another method, an oversized header)
 * goes to Express, which validates it as usual.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { requestId } from './app.js';
import { createCors } from './cors.js';
import { toErrorResponse } from './errors.js';
import { indicesReply } from './handlers/indices.js';
import type { Logger } from './logger.js';
import { hasCredentials, type RateLimit } from './rate-limit.js';
import type { MarketDataService } from './services/market-data.js';

/** The contract's `maxLength` of the `If-None-Match` parameter of getIndices. */
const IF_NONE_MATCH_MAX_LENGTH = 512;

function takesFastPath(req: IncomingMessage): boolean {
  if ((req.method !== 'GET' && req.method !== 'HEAD') || req.url !== '/api/indices') return false;
  const inm = req.headers['if-none-match'];
  return inm === undefined || inm.length <= IF_NONE_MATCH_MAX_LENGTH;
}

export function withFastPath(
  app: RequestListener,
  deps: {
    market: MarketDataService;
    logger: Logger;
    corsOrigins?: readonly string[];
    /** Quotas; anonymous callers are counted here, exactly as Express would count them. */
    rateLimit?: RateLimit;
    /** False when the contract closes the operation to anonymous callers (DATA_REQUIRES_AUTH). */
    anonymousAllowed?: boolean;
  },
): RequestListener {
  const { market, logger, rateLimit } = deps;
  const anonymousAllowed = deps.anonymousAllowed ?? true;
  const cors = createCors(deps.corsOrigins ?? []);

  const fail = (req: IncomingMessage, res: ServerResponse, reqId: string, err: unknown) => {
    const r = toErrorResponse(err, { method: 'GET', path: '/api/indices' });
    const level = r.status >= 500 ? 'error' : 'warn';
    logger[level]({ reqId, req: { method: req.method, url: req.url }, res: { statusCode: r.status }, err: r.unexpected ? err : undefined }, r.unexpected ? 'unexpected failure' : 'request failed');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const body = JSON.stringify(r.body);
    res.writeHead(r.status, { ...r.headers, 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  };

  return (req, res) => {
    // Credentials are checked by Express (security handlers); only anonymous callers are served here.
    if (!takesFastPath(req) || !anonymousAllowed || hasCredentials(req)) {
      app(req, res);
      return;
    }
    const reqId = requestId(req, res);
    cors.handle(req, res);
    (rateLimit ? rateLimit.apply(req, res).then(() => market.getIndices()) : market.getIndices()).then(
      (rep) => {
        const reply = indicesReply(rep, req.headers['if-none-match']);
        res.writeHead(reply.status, reply.headers);
        res.end(reply.body);
        // Hits are counted in the admin status; a line per hit would cost more than the hit itself.
        if (rep.cacheStatus !== 'HIT') logger.info({ reqId, req: { method: req.method, url: '/api/indices' }, res: { statusCode: reply.status }, cache: rep.cacheStatus }, 'request completed');
        else if (logger.isLevelEnabled('debug')) logger.debug({ reqId, res: { statusCode: reply.status }, cache: 'HIT' }, 'request completed');
      },
      (err: unknown) => fail(req, res, reqId, err),
    );
  };
}
