/**
 * `GET /api/ws`: the WebSocket API beside the SSE stream (DESIGN 23; described in asyncapi.yaml).
 *
 * The upgrade is taken on the HTTP server's `upgrade` event (`ws` in noServer mode); any other path
 * asking to upgrade is answered as the plain request it also is. The upgrade meets the caller step
 * of every /api request (app.ts `identifyUpgrade`: the address, every credential sent, the quota,
 * which counts the handshake; a refusal is the envelope, 401 or 429). Credentials come as the API's
 * own headers or, for browsers that cannot set headers, as a first `{"action":"auth",...}` message. Each connection is a session of the stream hub, so it counts against the same limits as
 * SSE streams (per caller, per address, per instance): over a limit, an `error` event and close code
 * 1008. Messages from the client are bounded in size and in rate; a client that reads slowly is sent
 * the latest quote of each of its symbols once it catches up, never a growing queue.
 */
import { ServerResponse, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Request } from 'express';
import { WebSocketServer, type WebSocket } from 'ws';
import { addressGroup } from '../domain/address-group.js';
import { AppError, InvalidRequestError, NotAuthenticatedError, RateLimitedError } from '../domain/errors.js';
import type { AuthCallback, Principal } from '../domain/ports/accounts.js';
import type { Logger } from '../domain/ports/logger.js';
import { canonicalSymbol, MAX_SYMBOLS } from '../domain/symbols.js';
import type { LiveSession, QuoteStreamHub } from '../services/quote-stream.js';
import type { IdentifyUpgrade } from './app.js';
import { envelopeBytes, toErrorResponse } from './envelope.js';
import type { Authenticator } from './security.js';

export const WS_PATH = '/api/ws';
/** Close code of a policy refusal (RFC 6455 7.4.1): over a limit, no credentials, bad credentials. */
export const CLOSE_POLICY = 1008;
/** Unsent bytes past which quotes wait (latest per symbol) instead of being queued. */
const HIGH_WATER_BYTES = 64 * 1024;
/** How often waiting quotes are tried again. */
const FLUSH_MS = 50;
/** A client without credentials where they are required has this long to send `auth`. */
const AUTH_WAIT_MS = 10_000;
/** Actions a connection may send: a bucket of this many, refilled at this rate per second. */
const ACTION_BURST = 20;
const ACTIONS_PER_SECOND = 10;

export interface WebSocketApiOptions {
  hub: QuoteStreamHub;
  authenticator: Authenticator;
  /** The app's caller step for an upgrade (app.ts `identifyUpgrade`). */
  identify: IdentifyUpgrade;
  /** The header of the contract's API-key scheme (lower case). */
  apiKeyHeader: string | undefined;
  /** DATA_REQUIRES_AUTH: a session opens only for an identified caller. */
  dataRequiresAuth: boolean;
  /** Largest message a client may send (WS_MAX_MESSAGE_BYTES). */
  maxMessageBytes: number;
  /** Interval of the ping that finds dead connections (STREAM_HEARTBEAT_SECONDS in ms). */
  heartbeatMs: number;
  logger: Logger;
}

interface Connection {
  ws: WebSocket;
  address: string;
  principal: Principal | undefined;
  session: LiveSession | undefined;
  /** Quotes waiting for the socket to drain: the latest per symbol. */
  waiting: Map<string, string>;
  flush: NodeJS.Timeout | undefined;
  alive: boolean;
  tokens: number;
  refilledAt: number;
  authWait: NodeJS.Timeout | undefined;
}

/** Checks credentials with the API's authenticator; resolves to the principal or rejects with its error. */
function authenticate(authenticator: Authenticator, kind: 'bearer' | 'apiKey', req: Pick<Request, 'headers'>): Promise<Principal> {
  return new Promise((resolve, reject) => {
    const done: AuthCallback = (err, principal) => (err || principal === undefined ? reject(err ?? new NotAuthenticatedError()) : resolve(principal));
    if (kind === 'bearer') authenticator.authenticateBearer(req as Request, done);
    else authenticator.authenticateApiKey(req as Request, done);
  });
}

function errorEvent(err: unknown): string {
  const { body } = toErrorResponse(err);
  return JSON.stringify({ event: 'error', code: body.code, error: body.error, detail: body.detail, ...(body.violations ? { violations: body.violations } : {}) });
}

/** The canonical symbols of a `symbols` member: 1 to 50 valid symbols. Throws `InvalidRequestError`. */
function symbolsOf(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_SYMBOLS) {
    throw new InvalidRequestError([{ path: 'symbols', message: `must be an array of 1 to ${MAX_SYMBOLS} symbols` }]);
  }
  return [...new Set(value.map((s, i) => canonicalSymbol(typeof s === 'string' ? s : '', `symbols[${i}]`)))];
}

export class WebSocketApi {
  readonly #o: WebSocketApiOptions;
  readonly #wss: WebSocketServer;
  readonly #connections = new Set<Connection>();
  readonly #heartbeat: NodeJS.Timeout;

  constructor(options: WebSocketApiOptions) {
    this.#o = options;
    this.#wss = new WebSocketServer({ noServer: true, maxPayload: options.maxMessageBytes, perMessageDeflate: false, clientTracking: false });
    this.#heartbeat = setInterval(() => this.#ping(), options.heartbeatMs);
    this.#heartbeat.unref();
  }

  /** Open connections. */
  get size(): number {
    return this.#connections.size;
  }

  /** Takes the HTTP server's upgrades: `/api/ws` becomes a session, anything else is answered as a plain request. */
  attach(server: Server): void {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const path = (req.url ?? '').split('?', 1)[0];
      if (path !== WS_PATH || req.headers.upgrade?.toLowerCase() !== 'websocket') {
        this.#answerPlainly(server, req, socket);
        return;
      }
      socket.on('error', () => socket.destroy());
      void this.#upgrade(req, socket, head);
    });
  }

  /** Closes every connection (1001: going away) and stops the heartbeat. */
  close(): void {
    clearInterval(this.#heartbeat);
    for (const conn of [...this.#connections]) conn.ws.close(1001, 'server shutting down');
  }

  /** An upgrade of another path: the request listener answers it (it closes the connection after). */
  #answerPlainly(server: Server, req: IncomingMessage, socket: Duplex): void {
    const res = new ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket as Socket);
    res.on('finish', () => {
      res.detachSocket(socket as Socket);
      socket.end();
    });
    server.emit('request', req, res);
  }

  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // The caller step of every /api request: the address, every credential sent (a bad one is
    // refused even beside a good one, DESIGN 18) and the quota, which counts the handshake.
    this.#o.identify(req, (refusal, headers) => {
      if (refusal !== undefined && refusal !== null) {
        socket.end(envelopeBytes(toErrorResponse(refusal, { method: 'GET', path: WS_PATH }), headers));
        return;
      }
      this.#wss.handleUpgrade(req, socket, head, (ws) => this.#open(ws, req, req.caller.principal));
    });
  }

  /** The address group the caller step found (one quota and one stream cap per group). */
  #addressOf(req: IncomingMessage): string {
    return addressGroup(req.caller.address);
  }

  #open(ws: WebSocket, req: IncomingMessage, principal: Principal | undefined): void {
    const conn: Connection = { ws, address: this.#addressOf(req), principal, session: undefined, waiting: new Map(), flush: undefined, alive: true, tokens: ACTION_BURST, refilledAt: Date.now(), authWait: undefined };
    this.#connections.add(conn);
    ws.on('pong', () => {
      conn.alive = true;
    });
    ws.on('error', () => ws.terminate());
    ws.on('close', () => this.#closed(conn));
    ws.on('message', (data, isBinary) => void this.#onMessage(conn, isBinary ? '' : data.toString()));
    if (principal !== undefined || !this.#o.dataRequiresAuth) this.#startSession(conn);
    else {
      conn.authWait = setTimeout(() => this.#refuse(conn, new NotAuthenticatedError('send {"action":"auth","token"|"key":...} first')), AUTH_WAIT_MS);
      conn.authWait.unref();
    }
  }

  /** Opens the hub session of the connection; over a limit, an error event and close 1008. */
  #startSession(conn: Connection): boolean {
    const who = { address: conn.address, principal: conn.principal };
    try {
      conn.session = this.#o.hub.openSession(
        who,
        (_symbol, json) => this.#deliver(conn, _symbol, `{"event":"quote","data":${json}}`),
        (refusal) => (refusal === undefined ? conn.ws.close(1001, 'server shutting down') : this.#refuse(conn, refusal)),
      );
      return true;
    } catch (err) {
      this.#refuse(conn, err);
      return false;
    }
  }

  #refuse(conn: Connection, err: unknown): void {
    this.#send(conn, errorEvent(err));
    conn.ws.close(CLOSE_POLICY, err instanceof AppError ? err.code : 'refused');
  }

  #send(conn: Connection, text: string): void {
    if (conn.ws.readyState === conn.ws.OPEN) conn.ws.send(text);
  }

  /** Sends a quote now, or keeps it as the symbol's latest until the socket drains. */
  #deliver(conn: Connection, symbol: string, frame: string): void {
    if (conn.waiting.size === 0 && conn.ws.bufferedAmount < HIGH_WATER_BYTES) {
      this.#send(conn, frame);
      return;
    }
    conn.waiting.delete(symbol);
    conn.waiting.set(symbol, frame);
    if (conn.flush === undefined) {
      conn.flush = setInterval(() => this.#flush(conn), FLUSH_MS);
      conn.flush.unref();
    }
  }

  #flush(conn: Connection): void {
    if (conn.ws.readyState !== conn.ws.OPEN) return;
    for (const [symbol, frame] of conn.waiting) {
      if (conn.ws.bufferedAmount >= HIGH_WATER_BYTES) return;
      conn.waiting.delete(symbol);
      conn.ws.send(frame);
    }
    clearInterval(conn.flush);
    conn.flush = undefined;
  }

  /** Takes one action token; false when the connection sends faster than allowed. */
  #take(conn: Connection): boolean {
    const now = Date.now();
    conn.tokens = Math.min(ACTION_BURST, conn.tokens + ((now - conn.refilledAt) / 1000) * ACTIONS_PER_SECOND);
    conn.refilledAt = now;
    if (conn.tokens < 1) return false;
    conn.tokens -= 1;
    return true;
  }

  async #onMessage(conn: Connection, text: string): Promise<void> {
    try {
      if (!this.#take(conn)) throw new RateLimitedError(1);
      let message: { action?: unknown; symbols?: unknown; key?: unknown; token?: unknown };
      try {
        message = JSON.parse(text) as typeof message;
      } catch {
        throw new InvalidRequestError([{ path: 'message', message: 'must be a JSON object' }]);
      }
      if (message === null || typeof message !== 'object' || Array.isArray(message)) throw new InvalidRequestError([{ path: 'message', message: 'must be a JSON object' }]);
      switch (message.action) {
        case 'auth':
          await this.#auth(conn, message);
          return;
        case 'subscribe': {
          const symbols = symbolsOf(message.symbols);
          const session = this.#sessionOf(conn);
          const { symbols: following, missing } = await session.subscribe(symbols);
          this.#send(conn, JSON.stringify({ event: 'subscribed', symbols: following, missing }));
          return;
        }
        case 'unsubscribe': {
          const symbols = symbolsOf(message.symbols);
          const session = this.#sessionOf(conn);
          session.unsubscribe(symbols);
          for (const symbol of symbols) conn.waiting.delete(symbol);
          this.#send(conn, JSON.stringify({ event: 'unsubscribed', symbols, following: [...session.symbols] }));
          return;
        }
        case 'ping':
          this.#send(conn, '{"event":"pong"}');
          return;
        default:
          throw new InvalidRequestError([{ path: 'action', message: 'must be one of auth, subscribe, unsubscribe, ping' }]);
      }
    } catch (err) {
      if (!(err instanceof AppError)) this.#o.logger.error({ err }, 'websocket action failed unexpectedly');
      this.#send(conn, errorEvent(err));
    }
  }

  #sessionOf(conn: Connection): LiveSession {
    if (conn.session === undefined) throw new NotAuthenticatedError('send {"action":"auth","token"|"key":...} first');
    return conn.session;
  }

  /** A first `auth` message: the caller's session replaces the anonymous one (which followed nothing yet). */
  async #auth(conn: Connection, message: { key?: unknown; token?: unknown }): Promise<void> {
    if (conn.principal !== undefined || (conn.session !== undefined && conn.session.symbols.size > 0)) {
      throw new InvalidRequestError([{ path: 'action', message: 'auth must be the first message of a connection' }]);
    }
    const token = typeof message.token === 'string' && message.token.length <= 4096 ? message.token : undefined;
    const key = typeof message.key === 'string' && message.key.length <= 512 ? message.key : undefined;
    if ((token === undefined) === (key === undefined) || (key !== undefined && this.#o.apiKeyHeader === undefined)) {
      throw new InvalidRequestError([{ path: 'auth', message: 'must carry exactly one of token (a bearer token) and key (an API key)' }]);
    }
    let principal: Principal;
    try {
      principal =
        token !== undefined
          ? await authenticate(this.#o.authenticator, 'bearer', { headers: { authorization: `Bearer ${token}` } })
          : await authenticate(this.#o.authenticator, 'apiKey', { headers: { [this.#o.apiKeyHeader as string]: key } });
    } catch (err) {
      this.#refuse(conn, err);
      return;
    }
    if (conn.ws.readyState !== conn.ws.OPEN) return;
    if (conn.authWait !== undefined) clearTimeout(conn.authWait);
    conn.authWait = undefined;
    conn.session?.close();
    conn.session = undefined;
    conn.principal = principal;
    if (this.#startSession(conn)) this.#send(conn, JSON.stringify({ event: 'authenticated', kind: principal.kind, username: principal.username }));
  }

  #ping(): void {
    for (const conn of this.#connections) {
      if (!conn.alive) {
        conn.ws.terminate();
        continue;
      }
      conn.alive = false;
      conn.ws.ping();
    }
  }

  #closed(conn: Connection): void {
    if (!this.#connections.delete(conn)) return;
    if (conn.flush !== undefined) clearInterval(conn.flush);
    if (conn.authWait !== undefined) clearTimeout(conn.authWait);
    conn.waiting.clear();
    conn.session?.close();
    conn.session = undefined;
  }
}
