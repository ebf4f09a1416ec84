/**
 * `GET /api/ws`: the WebSocket API beside the SSE stream (DESIGN 23; described in asyncapi.yaml). A
 * door (DESIGN 24): it reads what arrived, hands each action to the core (`Admission`) with its
 * operation and price, and writes what came back as events. Who calls, from where and what they may
 * spend is the core's to decide, never this door's.
 *
 * This file takes the upgrade and keeps the connections alive: the upgrade is taken on the HTTP
 * server's `upgrade` event (`ws` in noServer mode); any other path asking to upgrade is answered as the
 * plain request it also is. The upgrade meets the caller step of every /api request (app.ts
 * `identifyUpgrade`: the address, every credential sent, the quota, which counts the handshake; then
 * the Origin rule: a browser page of another site is refused; a refusal is the envelope, 401, 403 or
 * 429). Credentials come as the API's own headers or, for browsers that cannot set headers, as one
 * `{"action":"auth",...}` message, checked by the core as a header would be. Each connection
 * (connection.ts) is a session of the stream hub, so it counts against the same limits as SSE streams.
 */
import { ServerResponse, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type { IdentifyUpgrade } from '../app.js';
import { envelopeBytes, toErrorResponse } from '../envelope.js';
import { Connection, type ConnectionContext } from './connection.js';

export const WS_PATH = '/api/ws';

export interface WebSocketApiOptions extends ConnectionContext {
  /** The app's caller step for an upgrade (app.ts `identifyUpgrade`). */
  identify: IdentifyUpgrade;
  /** Largest message a client may send (WS_MAX_MESSAGE_BYTES). */
  maxMessageBytes: number;
  /** Interval of the ping that finds dead connections (STREAM_HEARTBEAT_SECONDS in ms). */
  heartbeatMs: number;
}

export class WebSocketApi {
  readonly #o: WebSocketApiOptions;
  readonly #wss: WebSocketServer;
  readonly #connections = new Set<Connection>();
  readonly #heartbeat: NodeJS.Timeout;

  constructor(options: WebSocketApiOptions) {
    this.#o = options;
    this.#wss = new WebSocketServer({ noServer: true, maxPayload: options.maxMessageBytes, perMessageDeflate: false, clientTracking: false });
    // Each beat: a connection that did not answer the last ping is dropped; the others get a new one.
    this.#heartbeat = setInterval(() => {
      for (const conn of this.#connections) conn.beat();
    }, options.heartbeatMs);
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
    for (const conn of [...this.#connections]) conn.close(1001, 'server shutting down');
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
      this.#wss.handleUpgrade(req, socket, head, (ws) => {
        this.#connections.add(new Connection(ws, req.caller, this.#o, (conn) => this.#connections.delete(conn)));
      });
    });
  }
}
