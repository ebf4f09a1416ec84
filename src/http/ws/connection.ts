/**
 * One WebSocket connection of the API: a session of the stream hub, its actions handled one at a time
 * in the order sent (each charged by the core before any work, a bounded number waiting), the quotes
 * and bars it is sent (quotes past the high-water mark wait as the latest per symbol), its refusals and
 * its close. Everything a connection can cost is bounded: actions waiting, refusals in a row, unsent
 * bytes (past the cap it is closed, 1013), and it stays only while it answers the server's pings.
 */
import { randomBytes } from 'node:crypto';
import type { WebSocket } from 'ws';
import { addressGroup } from '../../domain/address-group.js';
import { AppError, InvalidRequestError, NotAuthenticatedError, TooManyRequestsError } from '../../domain/errors.js';
import type { Principal } from '../../domain/ports/accounts.js';
import type { Logger } from '../../domain/ports/logger.js';
import type { LiveSession } from '../../services/stream/contracts.js';
import type { QuoteStreamHub } from '../../services/stream/hub.js';
import type { Admission, MessageCredential, RequestContext } from '../caller.js';
import { toErrorResponse } from '../envelope.js';
import { AUTH_FIRST, errorEvent, readMessage, type Action } from './messages.js';

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

/** What every connection of one API shares. */
export interface ConnectionContext {
  hub: QuoteStreamHub;
  /** The core's admission of the actions (app.ts `app.admission`): credentials in messages, prices. */
  admission: Admission;
  /** DATA_REQUIRES_AUTH: a session opens only for an identified caller. */
  dataRequiresAuth: boolean;
  /** Unsent bytes past which a connection is closed with 1013 (STREAM_MAX_BUFFER_BYTES). */
  maxBufferedBytes: number;
  logger: Logger;
}

export class Connection {
  readonly #ws: WebSocket;
  readonly #o: ConnectionContext;
  /** Whom its actions are charged to: the caller step's address, and the principal once known. */
  readonly #payer: Pick<RequestContext, 'address' | 'principal'>;
  /** The hub's place of its address group. */
  readonly #addressGroup: string;
  #session: LiveSession | undefined;
  /** Messages waiting for the action before them to end, oldest first. */
  readonly #waiting: string[] = [];
  /** An action is being handled. */
  #busy = false;
  /** Refused actions since the last one that went through. */
  #refusals = 0;
  /** Closing: nothing more is read or sent. */
  #closing = false;
  /** Quotes waiting for the socket to drain: the latest per symbol. */
  readonly #unsent = new Map<string, string>();
  #flush: NodeJS.Timeout | undefined;
  /** The symbols of the `subscribe` being handled: their quotes wait until `subscribed` is sent. */
  #subscribing: ReadonlySet<string> | undefined;
  #held = new Map<string, string>();
  /** The payload of the last heartbeat ping, and whether its pong came back. */
  #ping: Buffer | undefined;
  #alive = true;
  #authWait: NodeJS.Timeout | undefined;
  #dropAfterClose: NodeJS.Timeout | undefined;

  /** `gone` is told when the socket has closed; false when it already knew. */
  constructor(ws: WebSocket, caller: RequestContext, context: ConnectionContext, gone: (conn: Connection) => boolean) {
    this.#ws = ws;
    this.#o = context;
    this.#payer = { address: caller.address, principal: caller.principal };
    this.#addressGroup = addressGroup(caller.address);
    // Only the answer to this server's own latest ping proves the client alive, not any pong it sends.
    ws.on('pong', (payload) => {
      if (this.#ping !== undefined && payload.equals(this.#ping)) this.#alive = true;
    });
    // ws answers pings itself (and drops a client that leaves too many unanswered); the answers count too.
    ws.on('ping', () => this.#checkUnsent());
    ws.on('error', () => ws.terminate());
    ws.on('close', () => {
      if (gone(this)) this.#closed();
    });
    ws.on('message', (data, isBinary) => this.#received(isBinary ? '' : data.toString()));
    if (caller.principal !== undefined || !context.dataRequiresAuth) this.#startSession();
    else {
      this.#authWait = setTimeout(() => this.#refuse(new NotAuthenticatedError(AUTH_FIRST), true), AUTH_WAIT_MS);
      this.#authWait.unref();
    }
  }

  /** A heartbeat: a connection that did not answer the last ping is dropped; otherwise it gets a new one. */
  beat(): void {
    if (!this.#alive) {
      this.#ws.terminate();
      return;
    }
    this.#alive = false;
    this.#ping = randomBytes(8);
    if (this.#ws.readyState === this.#ws.OPEN) this.#ws.ping(this.#ping);
  }

  /**
   * Closes the connection: nothing more of it is read, handled or sent; what waited is dropped at once,
   * and its socket too if the client does not answer the close in time.
   */
  close(code: number, reason: string, stopReading = false): void {
    if (this.#closing) return;
    this.#closing = true;
    this.#waiting.length = 0;
    this.#release();
    this.#forget();
    this.#ws.close(code, reason.slice(0, 120));
    if (code !== 1001) this.#o.logger.info({ code, reason }, 'websocket closed by the server');
    // A client that floods or does not read gets no more of the server's time: its frames stay unread.
    if (stopReading) this.#ws.pause();
    this.#dropAfterClose = setTimeout(() => this.#ws.terminate(), CLOSE_GRACE_MS);
    this.#dropAfterClose.unref();
  }

  /** Opens the hub session of the connection; over a limit, an error event and close 1008. */
  #startSession(): boolean {
    const who = { address: this.#addressGroup, principal: this.#payer.principal };
    try {
      this.#session = this.#o.hub.openSession(
        who,
        // A bar (at most one a second per symbol, finals once) is sent as it comes: quotes are the ones that wait as the latest.
        (symbol, json, _version, event) => (event === 'bar' ? this.#send(`{"event":"bar","data":${json}}`) : this.#deliver(symbol, `{"event":"quote","data":${json}}`)),
        // The hub ends a session for shutdown (1001), or for its caller's revoked or expired credentials (an error event, 1008).
        (refusal) => (refusal === undefined ? this.close(1001, 'server shutting down') : this.#refuse(refusal, true)),
      );
      return true;
    } catch (err) {
      this.#refuse(err, true);
      return false;
    }
  }

  /** A message arrived: it waits its turn behind the action being handled, within a bound. */
  #received(text: string): void {
    if (this.#closing) return;
    if (this.#waiting.length >= MAX_WAITING_ACTIONS) {
      this.#send(errorEvent(new TooManyRequestsError(`More than ${MAX_WAITING_ACTIONS} actions waiting on this connection: wait for the answers before sending more`, 1)));
      this.close(CLOSE_POLICY, 'too many actions waiting', true);
      return;
    }
    this.#waiting.push(text);
    // TCP's own back-pressure slows a client that sends faster than its actions are handled.
    if (this.#waiting.length === PAUSE_READING_AT) this.#ws.pause();
    if (!this.#busy) void this.#work();
  }

  /** Handles the waiting actions one at a time, in the order they were sent. */
  async #work(): Promise<void> {
    this.#busy = true;
    try {
      for (let text = this.#waiting.shift(); text !== undefined && !this.#closing; text = this.#waiting.shift()) await this.#act(text);
    } finally {
      this.#busy = false;
      if (!this.#closing && this.#ws.isPaused) this.#ws.resume();
    }
  }

  /** One action: identity, price and admission by the core, then the work, then its answer. */
  async #act(text: string): Promise<void> {
    const read = readMessage(text);
    let refusal = read.refusal;
    // 401 before 422: a caller who may not act learns nothing about the input rules.
    if ((read.name === 'subscribe' || read.name === 'unsubscribe') && this.#session === undefined) refusal = new NotAuthenticatedError(AUTH_FIRST);
    const secondAuth = read.name === 'auth' && this.#payer.principal !== undefined;
    if (secondAuth) refusal = new InvalidRequestError([{ path: 'action', message: 'a connection authenticates once: open another connection for other credentials' }]);
    try {
      await this.#o.admission.charge(this.#payer, 'ws', read.operation, read.points);
      if (this.#closing) return;
      if (refusal !== undefined) throw refusal;
      const answer = await this.#run(read.action!);
      if (answer === undefined) return;
      this.#refusals = 0;
      this.#send(answer);
    } catch (err) {
      if (!(err instanceof AppError)) this.#o.logger.error({ err }, 'websocket action failed unexpectedly');
      this.#refuse(err, secondAuth);
    } finally {
      this.#release();
    }
  }

  /** Does an admitted action; resolves to the event that answers it, or undefined when the connection closed. */
  async #run(action: Action): Promise<string | undefined> {
    switch (action.name) {
      case 'auth':
        return this.#auth(action.credential);
      case 'subscribe': {
        const session = this.#session!;
        this.#subscribing = new Set(action.symbols);
        const { symbols, missing } = await session.subscribe(action.symbols, { bars: action.bars });
        return JSON.stringify({ event: 'subscribed', symbols, missing });
      }
      case 'unsubscribe': {
        const session = this.#session!;
        session.unsubscribe(action.symbols);
        for (const symbol of action.symbols) this.#unsent.delete(symbol);
        return JSON.stringify({ event: 'unsubscribed', symbols: action.symbols, following: [...session.symbols] });
      }
      case 'ping':
        return '{"event":"pong"}';
    }
  }

  /** The quotes held while a `subscribe` was handled go out after its answer. */
  #release(): void {
    if (this.#subscribing === undefined) return;
    this.#subscribing = undefined;
    const held = this.#held;
    this.#held = new Map();
    for (const [symbol, frame] of held) if (this.#session?.symbols.has(symbol)) this.#deliver(symbol, frame);
  }

  /**
   * The `auth` action: the core checks the credential (a wrong one is charged to the address and
   * closes the connection); the caller's session replaces the anonymous one, which followed nothing yet.
   */
  async #auth(credential: MessageCredential): Promise<string | undefined> {
    if (this.#session !== undefined && this.#session.symbols.size > 0) {
      throw new InvalidRequestError([{ path: 'action', message: 'auth must come before any subscribe' }]);
    }
    let principal: Principal;
    try {
      principal = await this.#o.admission.authenticate(this.#payer, credential, 'ws');
    } catch (err) {
      this.#refuse(err, true);
      return undefined;
    }
    if (this.#closing) return undefined;
    if (this.#authWait !== undefined) clearTimeout(this.#authWait);
    this.#authWait = undefined;
    this.#session?.close();
    this.#session = undefined;
    this.#payer.principal = principal;
    if (!this.#startSession()) return undefined;
    return JSON.stringify({ event: 'authenticated', kind: principal.kind, username: principal.username });
  }

  /** An `error` event; closes the connection (1008) when `close` says so or after too many refusals in a row. */
  #refuse(err: unknown, close: boolean): void {
    this.#send(errorEvent(err));
    // An upstream failure is not the client's doing: only refusals of what it sent count.
    if (toErrorResponse(err).status < 500) this.#refusals += 1;
    if (close) this.close(CLOSE_POLICY, err instanceof AppError ? err.code : 'refused');
    else if (this.#refusals >= MAX_REFUSALS_IN_A_ROW) this.close(CLOSE_POLICY, `${MAX_REFUSALS_IN_A_ROW} actions refused in a row`, true);
  }

  #send(text: string): void {
    if (this.#closing || this.#ws.readyState !== this.#ws.OPEN) return;
    this.#ws.send(text);
    this.#checkUnsent();
  }

  /** A connection that lets its unsent bytes pass the cap is closed: it is not reading. */
  #checkUnsent(): void {
    if (!this.#closing && this.#ws.bufferedAmount > this.#o.maxBufferedBytes) this.close(CLOSE_TOO_SLOW, 'too slow: unsent data past its bound', true);
  }

  /** Sends a quote now, or keeps it as the symbol's latest until `subscribed` is out or the socket drains. */
  #deliver(symbol: string, frame: string): void {
    if (this.#closing) return;
    if (this.#subscribing?.has(symbol)) {
      this.#held.delete(symbol);
      this.#held.set(symbol, frame);
      return;
    }
    if (this.#unsent.size === 0 && this.#ws.bufferedAmount < HIGH_WATER_BYTES) {
      this.#send(frame);
      return;
    }
    this.#unsent.delete(symbol);
    this.#unsent.set(symbol, frame);
    if (this.#flush === undefined) {
      this.#flush = setInterval(() => this.#flushUnsent(), FLUSH_MS);
      this.#flush.unref();
    }
  }

  #flushUnsent(): void {
    if (this.#closing || this.#ws.readyState !== this.#ws.OPEN) return;
    for (const [symbol, frame] of this.#unsent) {
      if (this.#ws.bufferedAmount >= HIGH_WATER_BYTES) return;
      this.#unsent.delete(symbol);
      this.#send(frame);
    }
    clearInterval(this.#flush);
    this.#flush = undefined;
  }

  /** Gives back what the connection held: its hub place, its timers, its waiting quotes. */
  #forget(): void {
    if (this.#flush !== undefined) clearInterval(this.#flush);
    this.#flush = undefined;
    if (this.#authWait !== undefined) clearTimeout(this.#authWait);
    this.#authWait = undefined;
    this.#unsent.clear();
    this.#held.clear();
    this.#session?.close();
    this.#session = undefined;
  }

  /** The socket closed (whichever side closed it). */
  #closed(): void {
    this.#closing = true;
    this.#waiting.length = 0;
    if (this.#dropAfterClose !== undefined) clearTimeout(this.#dropAfterClose);
    this.#forget();
  }
}
