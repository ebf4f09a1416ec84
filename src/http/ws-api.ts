/**
 * `GET /api/ws`: the WebSocket API beside the SSE stream (DESIGN 23; described in asyncapi.yaml). A
 * door (DESIGN 24): it reads what arrived, hands each action to the core (`Admission`) with its
 * operation and price, and writes what came back as events. Who calls, from where and what they may
 * spend is the core's to decide, never this file's.
 *
 * The upgrade is taken on the HTTP server's `upgrade` event (`ws` in noServer mode); any other path
 * asking to upgrade is answered as the plain request it also is. The upgrade meets the caller step of
 * every /api request (app.ts `identifyUpgrade`: the address, every credential sent, the quota, which
 * counts the handshake; then the Origin rule: a browser page of another site is refused; a refusal
 * is the envelope, 401, 403 or 429). Credentials come as the API's own headers or, for browsers that cannot set
 * headers, as one `{"action":"auth",...}` message, checked by the core as a header would be.
 *
 * Each connection is a session of the stream hub, so it counts against the same limits as SSE
 * streams (per caller, per address, per instance). Its actions are handled one at a time, in the
 * order sent, each charged before any work; a bounded number may wait. Everything a connection can
 * cost is bounded: actions waiting, refusals in a row, unsent bytes (quotes past the high-water mark
 * wait as the latest per symbol; anything else past the cap closes it, 1013), and it stays only while
 * it answers the server's own pings.
 */
import { randomBytes } from 'node:crypto';
import { ServerResponse, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { addressGroup } from '../domain/address-group.js';
import { AppError, InvalidRequestError, NotAuthenticatedError, TooManyRequestsError } from '../domain/errors.js';
import type { Principal } from '../domain/ports/accounts.js';
import type { Logger } from '../domain/ports/logger.js';
import { priceOf } from '../domain/prices.js';
import { canonicalSymbol, MAX_SYMBOLS } from '../domain/symbols.js';
import type { LiveSession } from '../services/stream/contracts.js';
import type { QuoteStreamHub } from '../services/stream/hub.js';
import type { IdentifyUpgrade } from './app.js';
import type { Admission, MessageCredential, RequestContext } from './caller.js';
import { envelopeBytes, toErrorResponse } from './envelope.js';

export const WS_PATH = '/api/ws';
/** Close code of a policy refusal (RFC 6455 7.4.1): over a limit, bad credentials, too many refusals. */
export const CLOSE_POLICY = 1008;
/** Close code of a connection that does not read what it is sent ("try again later", RFC 6455 registry). */
export const CLOSE_TOO_SLOW = 1013;
/** Actions waiting behind the one being handled at which the connection's socket stops being read until they are done. */
const PAUSE_READING_AT = 8;
/**
 * Actions that may wait at most; one more closes the connection. Reading stops well before (what one
 * read of the socket already held still arrives): only a client that packs this many into one read
 * gets here.
 */
export const MAX_WAITING_ACTIONS = 64;
/** Refused actions in a row after which the connection is closed. */
export const MAX_REFUSALS_IN_A_ROW = 5;
/** Unsent bytes past which quotes wait (latest per symbol) instead of being queued. */
const HIGH_WATER_BYTES = 64 * 1024;
/** How often waiting quotes are tried again. */
const FLUSH_MS = 50;
/** A client without credentials where they are required has this long to send `auth`. */
const AUTH_WAIT_MS = 10_000;
/** How long a closed connection may take to answer the close before its socket is dropped. */
const CLOSE_GRACE_MS = 1000;
const AUTH_FIRST = 'send {"action":"auth","token"|"key":...} first';

export interface WebSocketApiOptions {
  hub: QuoteStreamHub;
  /** The app's caller step for an upgrade (app.ts `identifyUpgrade`). */
  identify: IdentifyUpgrade;
  /** The core's admission of the actions (app.ts `app.admission`): credentials in messages, prices. */
  admission: Admission;
  /** DATA_REQUIRES_AUTH: a session opens only for an identified caller. */
  dataRequiresAuth: boolean;
  /** Largest message a client may send (WS_MAX_MESSAGE_BYTES). */
  maxMessageBytes: number;
  /** Unsent bytes past which a connection is closed with 1013 (STREAM_MAX_BUFFER_BYTES). */
  maxBufferedBytes: number;
  /** Interval of the ping that finds dead connections (STREAM_HEARTBEAT_SECONDS in ms). */
  heartbeatMs: number;
  logger: Logger;
}

/** An action as read from a message, before anything is done. */
type Action = { name: 'auth'; credential: MessageCredential } | { name: 'subscribe'; symbols: string[]; bars: boolean } | { name: 'unsubscribe'; symbols: string[] } | { name: 'ping' };

/** What a message asks for: its operation and price, and the action, or why it is refused. */
interface ReadMessage {
  /** The usage report's operation: `ws:<action>`, or `unmatched` for what is no action. */
  operation: string;
  /** The action's name when the message names one, even if its input is refused. */
  name: Action['name'] | undefined;
  points: number;
  action?: Action;
  refusal?: AppError;
}

interface Connection {
  ws: WebSocket;
  /** Whom its actions are charged to: the caller step's address, and the principal once known. */
  payer: Pick<RequestContext, 'address' | 'principal'>;
  /** The hub's place of its address group. */
  addressGroup: string;
  session: LiveSession | undefined;
  /** Messages waiting for the action before them to end, oldest first. */
  waiting: string[];
  /** An action is being handled. */
  busy: boolean;
  /** Refused actions since the last one that went through. */
  refusals: number;
  /** Closing: nothing more is read or sent. */
  closing: boolean;
  /** Quotes waiting for the socket to drain: the latest per symbol. */
  unsent: Map<string, string>;
  flush: NodeJS.Timeout | undefined;
  /** The symbols of the `subscribe` being handled: their quotes wait until `subscribed` is sent. */
  subscribing: ReadonlySet<string> | undefined;
  held: Map<string, string>;
  /** The payload of the last heartbeat ping, and whether its pong came back. */
  ping: Buffer | undefined;
  alive: boolean;
  authWait: NodeJS.Timeout | undefined;
  dropAfterClose: NodeJS.Timeout | undefined;
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

/** Whether a `subscribe` asks for live bars too: `"bars":"1m"` (the one interval built), or absent. Throws `InvalidRequestError`. */
function barsOf(value: unknown): boolean {
  if (value === undefined) return false;
  if (value !== '1m') throw new InvalidRequestError([{ path: 'bars', message: 'must be "1m" (the live bars interval) when given' }]);
  return true;
}

/** The credential of an `auth` message: exactly one of a token and a key. Throws `InvalidRequestError`. */
function credentialOf(message: { key?: unknown; token?: unknown }): MessageCredential {
  const token = typeof message.token === 'string' && message.token.length <= 4096 ? message.token : undefined;
  const key = typeof message.key === 'string' && message.key.length <= 512 ? message.key : undefined;
  if ((token === undefined) === (key === undefined)) {
    throw new InvalidRequestError([{ path: 'auth', message: 'must carry exactly one of token (a bearer token) and key (an API key)' }]);
  }
  return token !== undefined ? { scheme: 'bearer', value: token } : { scheme: 'apiKey', value: key! };
}

/** Reads one message into an action and its price; never throws (what is refused says so). */
function readMessage(text: string): ReadMessage {
  let message: { action?: unknown; symbols?: unknown; key?: unknown; token?: unknown; bars?: unknown };
  try {
    message = JSON.parse(text) as typeof message;
  } catch {
    message = null as unknown as typeof message;
  }
  if (message === null || typeof message !== 'object' || Array.isArray(message)) {
    return { operation: 'unmatched', name: undefined, points: 1, refusal: new InvalidRequestError([{ path: 'message', message: 'must be a JSON object' }]) };
  }
  const name = message.action;
  if (name !== 'auth' && name !== 'subscribe' && name !== 'unsubscribe' && name !== 'ping') {
    return { operation: 'unmatched', name: undefined, points: 1, refusal: new InvalidRequestError([{ path: 'action', message: 'must be one of auth, subscribe, unsubscribe, ping' }]) };
  }
  const operation = `ws:${name}`;
  try {
    switch (name) {
      case 'auth':
        return { operation, name, points: 1, action: { name, credential: credentialOf(message) } };
      case 'subscribe': {
        const symbols = symbolsOf(message.symbols);
        // The price of getQuotes for the same symbols: what the look-ups will cost.
        return { operation, name, points: priceOf('symbols', { symbols }), action: { name, symbols, bars: barsOf(message.bars) } };
      }
      case 'unsubscribe':
        return { operation, name, points: 1, action: { name, symbols: symbolsOf(message.symbols) } };
      case 'ping':
        return { operation, name, points: 1, action: { name } };
    }
  } catch (err) {
    // Input refused before any work: the price of a refusal.
    return { operation, name, points: 1, refusal: err as AppError };
  }
}

export class WebSocketApi {
  readonly #o: WebSocketApiOptions;
  readonly #wss: WebSocketServer;
  readonly #connections = new Set<Connection>();
  readonly #heartbeat: NodeJS.Timeout;

  constructor(options: WebSocketApiOptions) {
    this.#o = options;
    this.#wss = new WebSocketServer({ noServer: true, maxPayload: options.maxMessageBytes, perMessageDeflate: false, clientTracking: false });
    this.#heartbeat = setInterval(() => this.#beat(), options.heartbeatMs);
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
      this.#upgrade(req, socket, head);
    });
  }

  /** Closes every connection (1001: going away) and stops the heartbeat. */
  close(): void {
    clearInterval(this.#heartbeat);
    for (const conn of [...this.#connections]) this.#close(conn, 1001, 'server shutting down');
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
    // refused even beside a good one, DESIGN 18) and the quota, which counts the handshake; then the
    // Origin rule (a page of another site: 403).
    this.#o.identify(req, (refusal, headers) => {
      if (refusal !== undefined && refusal !== null) {
        socket.end(envelopeBytes(toErrorResponse(refusal, { method: 'GET', path: WS_PATH }), headers));
        return;
      }
      this.#wss.handleUpgrade(req, socket, head, (ws) => this.#open(ws, req.caller));
    });
  }

  #open(ws: WebSocket, caller: RequestContext): void {
    const conn: Connection = {
      ws,
      payer: { address: caller.address, principal: caller.principal },
      addressGroup: addressGroup(caller.address),
      session: undefined,
      waiting: [],
      busy: false,
      refusals: 0,
      closing: false,
      unsent: new Map(),
      flush: undefined,
      subscribing: undefined,
      held: new Map(),
      ping: undefined,
      alive: true,
      authWait: undefined,
      dropAfterClose: undefined,
    };
    this.#connections.add(conn);
    // Only the answer to this server's own latest ping proves the client alive, not any pong it sends.
    ws.on('pong', (payload) => {
      if (conn.ping !== undefined && payload.equals(conn.ping)) conn.alive = true;
    });
    // ws answers pings itself (and drops a client that leaves too many unanswered); the answers count too.
    ws.on('ping', () => this.#checkUnsent(conn));
    ws.on('error', () => ws.terminate());
    ws.on('close', () => this.#closed(conn));
    ws.on('message', (data, isBinary) => this.#received(conn, isBinary ? '' : data.toString()));
    if (caller.principal !== undefined || !this.#o.dataRequiresAuth) this.#startSession(conn);
    else {
      conn.authWait = setTimeout(() => this.#refuse(conn, new NotAuthenticatedError(AUTH_FIRST), true), AUTH_WAIT_MS);
      conn.authWait.unref();
    }
  }

  /** Opens the hub session of the connection; over a limit, an error event and close 1008. */
  #startSession(conn: Connection): boolean {
    const who = { address: conn.addressGroup, principal: conn.payer.principal };
    try {
      conn.session = this.#o.hub.openSession(
        who,
        // A bar (at most one a second per symbol, finals once) is sent as it comes: quotes are the ones that wait as the latest.
        (symbol, json, _version, event) => (event === 'bar' ? this.#send(conn, `{"event":"bar","data":${json}}`) : this.#deliver(conn, symbol, `{"event":"quote","data":${json}}`)),
        // The hub ends a session for shutdown (1001), or for its caller's revoked or expired credentials (an error event, 1008).
        (refusal) => (refusal === undefined ? this.#close(conn, 1001, 'server shutting down') : this.#refuse(conn, refusal, true)),
      );
      return true;
    } catch (err) {
      this.#refuse(conn, err, true);
      return false;
    }
  }

  /** A message arrived: it waits its turn behind the action being handled, within a bound. */
  #received(conn: Connection, text: string): void {
    if (conn.closing) return;
    if (conn.waiting.length >= MAX_WAITING_ACTIONS) {
      this.#send(conn, errorEvent(new TooManyRequestsError(`More than ${MAX_WAITING_ACTIONS} actions waiting on this connection: wait for the answers before sending more`, 1)));
      this.#close(conn, CLOSE_POLICY, 'too many actions waiting', true);
      return;
    }
    conn.waiting.push(text);
    // TCP's own back-pressure slows a client that sends faster than its actions are handled.
    if (conn.waiting.length === PAUSE_READING_AT) conn.ws.pause();
    if (!conn.busy) void this.#work(conn);
  }

  /** Handles the waiting actions one at a time, in the order they were sent. */
  async #work(conn: Connection): Promise<void> {
    conn.busy = true;
    try {
      for (let text = conn.waiting.shift(); text !== undefined && !conn.closing; text = conn.waiting.shift()) await this.#act(conn, text);
    } finally {
      conn.busy = false;
      if (!conn.closing && conn.ws.isPaused) conn.ws.resume();
    }
  }

  /** One action: identity, price and admission by the core, then the work, then its answer. */
  async #act(conn: Connection, text: string): Promise<void> {
    const read = readMessage(text);
    let refusal = read.refusal;
    // 401 before 422: a caller who may not act learns nothing about the input rules.
    if ((read.name === 'subscribe' || read.name === 'unsubscribe') && conn.session === undefined) refusal = new NotAuthenticatedError(AUTH_FIRST);
    const secondAuth = read.name === 'auth' && conn.payer.principal !== undefined;
    if (secondAuth) refusal = new InvalidRequestError([{ path: 'action', message: 'a connection authenticates once: open another connection for other credentials' }]);
    try {
      await this.#o.admission.charge(conn.payer, 'ws', read.operation, read.points);
      if (conn.closing) return;
      if (refusal !== undefined) throw refusal;
      const answer = await this.#run(conn, read.action!);
      if (answer === undefined) return;
      conn.refusals = 0;
      this.#send(conn, answer);
    } catch (err) {
      if (!(err instanceof AppError)) this.#o.logger.error({ err }, 'websocket action failed unexpectedly');
      this.#refuse(conn, err, secondAuth);
    } finally {
      this.#release(conn);
    }
  }

  /** Does an admitted action; resolves to the event that answers it, or undefined when the connection closed. */
  async #run(conn: Connection, action: Action): Promise<string | undefined> {
    switch (action.name) {
      case 'auth':
        return this.#auth(conn, action.credential);
      case 'subscribe': {
        const session = conn.session!;
        conn.subscribing = new Set(action.symbols);
        const { symbols, missing } = await session.subscribe(action.symbols, { bars: action.bars });
        return JSON.stringify({ event: 'subscribed', symbols, missing });
      }
      case 'unsubscribe': {
        const session = conn.session!;
        session.unsubscribe(action.symbols);
        for (const symbol of action.symbols) conn.unsent.delete(symbol);
        return JSON.stringify({ event: 'unsubscribed', symbols: action.symbols, following: [...session.symbols] });
      }
      case 'ping':
        return '{"event":"pong"}';
    }
  }

  /** The quotes held while a `subscribe` was handled go out after its answer. */
  #release(conn: Connection): void {
    if (conn.subscribing === undefined) return;
    conn.subscribing = undefined;
    const held = conn.held;
    conn.held = new Map();
    for (const [symbol, frame] of held) if (conn.session?.symbols.has(symbol)) this.#deliver(conn, symbol, frame);
  }

  /**
   * The `auth` action: the core checks the credential (a wrong one is charged to the address and
   * closes the connection); the caller's session replaces the anonymous one, which followed nothing yet.
   */
  async #auth(conn: Connection, credential: MessageCredential): Promise<string | undefined> {
    if (conn.session !== undefined && conn.session.symbols.size > 0) {
      throw new InvalidRequestError([{ path: 'action', message: 'auth must come before any subscribe' }]);
    }
    let principal: Principal;
    try {
      principal = await this.#o.admission.authenticate(conn.payer, credential, 'ws');
    } catch (err) {
      this.#refuse(conn, err, true);
      return undefined;
    }
    if (conn.closing) return undefined;
    if (conn.authWait !== undefined) clearTimeout(conn.authWait);
    conn.authWait = undefined;
    conn.session?.close();
    conn.session = undefined;
    conn.payer.principal = principal;
    if (!this.#startSession(conn)) return undefined;
    return JSON.stringify({ event: 'authenticated', kind: principal.kind, username: principal.username });
  }

  /** An `error` event; closes the connection (1008) when `close` says so or after too many refusals in a row. */
  #refuse(conn: Connection, err: unknown, close: boolean): void {
    this.#send(conn, errorEvent(err));
    // An upstream failure is not the client's doing: only refusals of what it sent count.
    if (toErrorResponse(err).status < 500) conn.refusals += 1;
    if (close) this.#close(conn, CLOSE_POLICY, err instanceof AppError ? err.code : 'refused');
    else if (conn.refusals >= MAX_REFUSALS_IN_A_ROW) this.#close(conn, CLOSE_POLICY, `${MAX_REFUSALS_IN_A_ROW} actions refused in a row`, true);
  }

  #send(conn: Connection, text: string): void {
    if (conn.closing || conn.ws.readyState !== conn.ws.OPEN) return;
    conn.ws.send(text);
    this.#checkUnsent(conn);
  }

  /** A connection that lets its unsent bytes pass the cap is closed: it is not reading. */
  #checkUnsent(conn: Connection): void {
    if (!conn.closing && conn.ws.bufferedAmount > this.#o.maxBufferedBytes) this.#close(conn, CLOSE_TOO_SLOW, 'too slow: unsent data past its bound', true);
  }

  /** Sends a quote now, or keeps it as the symbol's latest until `subscribed` is out or the socket drains. */
  #deliver(conn: Connection, symbol: string, frame: string): void {
    if (conn.closing) return;
    if (conn.subscribing?.has(symbol)) {
      conn.held.delete(symbol);
      conn.held.set(symbol, frame);
      return;
    }
    if (conn.unsent.size === 0 && conn.ws.bufferedAmount < HIGH_WATER_BYTES) {
      this.#send(conn, frame);
      return;
    }
    conn.unsent.delete(symbol);
    conn.unsent.set(symbol, frame);
    if (conn.flush === undefined) {
      conn.flush = setInterval(() => this.#flush(conn), FLUSH_MS);
      conn.flush.unref();
    }
  }

  #flush(conn: Connection): void {
    if (conn.closing || conn.ws.readyState !== conn.ws.OPEN) return;
    for (const [symbol, frame] of conn.unsent) {
      if (conn.ws.bufferedAmount >= HIGH_WATER_BYTES) return;
      conn.unsent.delete(symbol);
      this.#send(conn, frame);
    }
    clearInterval(conn.flush);
    conn.flush = undefined;
  }

  /**
   * Closes a connection: nothing more of it is read, handled or sent; what waited is dropped at once,
   * and its socket too if the client does not answer the close in time.
   */
  #close(conn: Connection, code: number, reason: string, stopReading = false): void {
    if (conn.closing) return;
    conn.closing = true;
    conn.waiting.length = 0;
    this.#release(conn);
    this.#forget(conn);
    conn.ws.close(code, reason.slice(0, 120));
    if (code !== 1001) this.#o.logger.info({ code, reason }, 'websocket closed by the server');
    // A client that floods or does not read gets no more of the server's time: its frames stay unread.
    if (stopReading) conn.ws.pause();
    conn.dropAfterClose = setTimeout(() => conn.ws.terminate(), CLOSE_GRACE_MS);
    conn.dropAfterClose.unref();
  }

  /** Each beat: a connection that did not answer the last ping is dropped; the others get a new one. */
  #beat(): void {
    for (const conn of this.#connections) {
      if (!conn.alive) {
        conn.ws.terminate();
        continue;
      }
      conn.alive = false;
      conn.ping = randomBytes(8);
      if (conn.ws.readyState === conn.ws.OPEN) conn.ws.ping(conn.ping);
    }
  }

  /** Gives back what the connection held: its hub place, its timers, its waiting quotes. */
  #forget(conn: Connection): void {
    if (conn.flush !== undefined) clearInterval(conn.flush);
    conn.flush = undefined;
    if (conn.authWait !== undefined) clearTimeout(conn.authWait);
    conn.authWait = undefined;
    conn.unsent.clear();
    conn.held.clear();
    conn.session?.close();
    conn.session = undefined;
  }

  #closed(conn: Connection): void {
    if (!this.#connections.delete(conn)) return;
    conn.closing = true;
    conn.waiting.length = 0;
    if (conn.dropAfterClose !== undefined) clearTimeout(conn.dropAfterClose);
    this.#forget(conn);
  }
}
