/**
 * The request log: one pino line per request when its answer is complete, with the request id,
 * method, URL, status and response time, at info (2xx/3xx), warn (4xx) or error (5xx).
 *
 * Written here rather than with pino-http because of what a request cost under load: pino-http
 * makes two child loggers per request and serializes the whole request object into one of them,
 * before knowing whether the line will be written at all. Here a request costs its id and one
 * listener; the line is built only when its level is enabled, and `req.log` (a child logger carrying
 * `reqId`) is made only when something logs through it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Express, Request } from 'express';
import type { Logger } from '../domain/ports/logger.js';

declare module 'http' {
  interface IncomingMessage {
    /** The request id (`X-Request-Id`), set when the request enters the app. */
    id: string;
    /** A logger whose lines carry `reqId`; made on first use. */
    log: Logger;
  }
}

const childLog = Symbol('mds.requestLog');

function levelOf(statusCode: number): 'info' | 'warn' | 'error' {
  return statusCode >= 500 ? 'error' : statusCode >= 400 ? 'warn' : 'info';
}

/**
 * Installs `req.log` on the app's request prototype and returns what to call first for each request:
 * it gives the request its id and logs its completion (the app's first middleware calls it, with the
 * other steps every request takes, so they cost one Express layer).
 */
export function requestLog(
  app: Express,
  logger: Logger,
  genReqId: (req: IncomingMessage, res: ServerResponse) => string,
  /**
   * Called once per answer whose headers were sent, when it ends (a stream when it closes, an answer
   * the client left halfway when it left), with the method as received; not for a request that got
   * no answer at all.
   */
  onFinished?: (req: Request, method: string, statusCode: number, seconds: number) => void,
): (req: Request, res: ServerResponse) => void {
  Object.defineProperty(app.request, 'log', {
    configurable: true,
    get(this: IncomingMessage & { [childLog]?: Logger }): Logger {
      return (this[childLog] ??= logger.child({ reqId: this.id }));
    },
  });

  // The line has a fixed shape (id, method, URL, status, time) holding none of the fields the logger
  // redacts, so it skips the redaction pass: a third of what writing a line cost.
  const lines = logger.child({}, { redact: [] });
  return (req, res) => {
    const startedAt = performance.now();
    // As received: later steps rewrite both (HEAD is routed as GET, routers strip prefixes).
    const { method, url } = req;
    req.id = genReqId(req, res);
    // 'close' follows every answer, complete or cut short, exactly once.
    res.once('close', () => {
      const ms = performance.now() - startedAt;
      if (onFinished !== undefined && res.headersSent) onFinished(req, method, res.statusCode, ms / 1000);
      const level = levelOf(res.statusCode);
      if (!lines.isLevelEnabled(level)) return;
      const line = {
        reqId: req.id,
        req: { method, url },
        res: { statusCode: res.statusCode },
        responseTime: Math.round(ms),
      };
      lines[level](line, res.writableFinished ? (level === 'error' ? 'request errored' : 'request completed') : 'request aborted');
    });
  };
}
