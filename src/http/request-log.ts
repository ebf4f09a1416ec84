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
import type { Express } from 'express';
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

/** When and how a request arrived, as received (later steps rewrite the method and the URL). */
interface Arrival {
  startedAt: number;
  method: string;
  url: string | undefined;
}

const arrival = Symbol('mds.requestLog.arrival');

/** What the front door calls for every request; see `requestLog`. */
export interface RequestLog {
  /** Gives the request its id and notes its arrival; call first. */
  begin(req: IncomingMessage, res: ServerResponse): void;
  /** Logs and records the answer once it ends ('close': complete, or cut short). */
  watch(req: IncomingMessage, res: ServerResponse): void;
  /** The same, now, for an answer already written whole (a preflight, the cached-answer shortcut). */
  ended(req: IncomingMessage, res: ServerResponse): void;
}

/**
 * Installs `req.log` on the app's request prototype and returns what the front door calls for every
 * request, the cached-answer shortcut's included: `begin`, then `watch` or, for an answer written
 * whole at once, `ended` (no listener to add and call for it).
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
  onFinished?: (req: IncomingMessage, method: string, statusCode: number, seconds: number) => void,
  /** Called once per request when it ends, answered or not (the usage meter). */
  onClosed?: (req: IncomingMessage) => void,
): RequestLog {
  Object.defineProperty(app.request, 'log', {
    configurable: true,
    get(this: IncomingMessage & { [childLog]?: Logger }): Logger {
      return (this[childLog] ??= logger.child({ reqId: this.id }));
    },
  });

  // The line has a fixed shape (id, method, URL, status, time) holding none of the fields the logger
  // redacts, so it skips the redaction pass: a third of what writing a line cost.
  const lines = logger.child({}, { redact: [] });
  const record = (req: IncomingMessage & { [arrival]?: Arrival }, res: ServerResponse, whole: boolean) => {
    const { startedAt, method, url } = req[arrival]!;
    const ms = performance.now() - startedAt;
    if (onClosed !== undefined) onClosed(req);
    if (onFinished !== undefined && res.headersSent) onFinished(req, method, res.statusCode, ms / 1000);
    // An answer of the cached-answer shortcut is counted in the admin status and the metrics; a line
    // per hit would cost more than the hit itself.
    const level = req.caller?.shortcut === true ? 'debug' : levelOf(res.statusCode);
    if (!lines.isLevelEnabled(level)) return;
    const line = {
      reqId: req.id,
      req: { method, url },
      res: { statusCode: res.statusCode },
      responseTime: Math.round(ms),
    };
    lines[level](line, whole ? (level === 'error' ? 'request errored' : 'request completed') : 'request aborted');
  };
  return {
    begin(req: IncomingMessage & { [arrival]?: Arrival }, res) {
      req[arrival] = { startedAt: performance.now(), method: req.method ?? 'GET', url: req.url };
      req.id = genReqId(req, res);
    },
    watch(req, res) {
      // 'close' follows every answer, complete or cut short, exactly once.
      res.once('close', () => record(req, res, res.writableFinished));
    },
    ended(req, res) {
      record(req, res, true);
    },
  };
}
