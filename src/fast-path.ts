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
import { NO_METRICS, type Metrics } from './ports.js';
import type { MarketDataService } from './services/market-data.js';

/** The contract's `maxLength` of the `If-None-Match` parameter of getIndices. */
const IF_NONE_MATCH_MAX_LENGTH = 512;

function takesFastPath(req: IncomingMessage): boolean {
  if ((req.method !== 'GET' && req.method !== 'HEAD') || req.url !== '/api/indices') return false;
  const inm = req.headers['if-none-match'];
  return inm === undefined || inm.length <= IF_NONE_MATCH_MAX_LENGTH;
}

/** The route label of every fast-path response: the operation's template, as Express would report it. */
const ROUTE = '/api/indices';

export function withFastPath(
  app: RequestListener,
  deps: { market: MarketDataService; logger: Logger; corsOrigins?: readonly string[]; metrics?: Metrics },
): RequestListener {
  const { market, logger } = deps;
  const metrics = deps.metrics ?? NO_METRICS;
  const cors = createCors(deps.corsOrigins ?? []);

  const fail = (req: IncomingMessage, res: ServerResponse, reqId: string, err: unknown, startedAt: number) => {
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
    metrics.httpRequest(req.method ?? 'GET', ROUTE, r.status, (performance.now() - startedAt) / 1000);
  };

  return (req, res) => {
    if (!takesFastPath(req)) {
      app(req, res);
      return;
    }
    const startedAt = performance.now();
    const reqId = requestId(req, res);
    cors.handle(req, res);
    market.getIndices().then(
      (rep) => {
        const reply = indicesReply(rep, req.headers['if-none-match']);
        res.writeHead(reply.status, reply.headers);
        res.end(reply.body);
        metrics.httpRequest(req.method ?? 'GET', ROUTE, reply.status, (performance.now() - startedAt) / 1000);
        // Hits are counted in the admin status; a line per hit would cost more than the hit itself.
        if (rep.cacheStatus !== 'HIT') logger.info({ reqId, req: { method: req.method, url: '/api/indices' }, res: { statusCode: reply.status }, cache: rep.cacheStatus }, 'request completed');
        else if (logger.isLevelEnabled('debug')) logger.debug({ reqId, res: { statusCode: reply.status }, cache: 'HIT' }, 'request completed');
      },
      (err: unknown) => fail(req, res, reqId, err, startedAt),
    );
  };
}
