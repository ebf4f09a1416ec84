/**
 * The wire: every request on a connection gets exactly one answer, in order, in the envelope, even
 * those Node's HTTP parser refuses before the app sees them (a malformed request line or body framing,
 * headers over 16 KiB, an unknown method or version, a request too slow to arrive), those without
 * `Host`, with an `Expect:` other than `100-continue`, and `CONNECT`.
 *
 * Node answers those on its own with a bare status line, and it answers a parser error whenever the
 * socket is writable: before the answers of earlier pipelined requests, or after the answer of the
 * very request whose body framing broke (one request, two answers). So each connection's requests and
 * responses are tracked here: a refusal waits until every earlier response is complete, is written
 * only when the refused bytes start a request of their own (bytes of a request already being answered
 * end the connection without a second answer), and then the connection closes, since the parser
 * cannot tell where the next request would start.
 */
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { requestIdOf } from './app.js';
import { envelopeBytes, toParserErrorResponse, writeEnvelope } from './envelope.js';
import type { Logger } from '../domain/ports/logger.js';

/** How long a refused connection may stay half-open, waiting for the client to close its side. */
const LINGER_MS = 5000;

/** A refused connection whose client never closes its side is dropped after LINGER_MS of silence. */
function linger(socket: Duplex): void {
  (socket as Socket).setTimeout(LINGER_MS, () => socket.destroy());
}

/**
 * The API's HTTP server: `listener` answers every well-formed request; the wire's own refusals are
 * answered here (see the module comment). Node's own Host check is off, so its refusal is the envelope.
 */
export function createWireServer(
  listener: RequestListener,
  logger: Logger,
  options: {
    /** How often Node checks for requests too slow to arrive (ms; Node's default 30000). */
    connectionsCheckingInterval?: number;
    /** The classes Node builds each request and response with (the app's `messages`); Node's own when absent. */
    IncomingMessage?: typeof IncomingMessage;
    ServerResponse?: typeof ServerResponse;
  } = {},
): Server {
  // Node sends a connection's answers in the order of its requests, each only once the one before is
  // complete, so its latest response is the last to close: one map entry per connection is all the
  // tracking a request costs.
  const latest = new WeakMap<Duplex, ServerResponse>();
  // Connections refused already: nothing more is answered on them.
  const refused = new WeakSet<Duplex>();
  const track = (req: IncomingMessage, res: ServerResponse) => latest.set(req.socket, res);
  /** Runs `run` once every answer begun on the connection is complete (at once when none is under way). */
  const afterOpenResponses = (socket: Duplex, run: () => void) => {
    const res = latest.get(socket);
    if (res === undefined || res.closed) run();
    else res.once('close', run);
  };

  /** Answers `req` with a refusal on its own response, and closes the connection after it. */
  const refuse = (req: IncomingMessage, res: ServerResponse, refusal: string | undefined) => {
    // The app may have named the request already (its request log line carries that id).
    const named = res.getHeader('x-request-id');
    const reqId = typeof named === 'string' ? named : requestIdOf(req);
    const response = toParserErrorResponse(refusal);
    writeEnvelope(res, response, { 'X-Request-Id': reqId, Connection: 'close' });
    logger.warn({ reqId, code: refusal, req: { method: req.method, url: req.url }, res: { statusCode: response.status } }, 'request refused on the wire');
  };

  /**
   * RFC 9112 6.3: a request whose Transfer-Encoding does not end in `chunked` has no length the
   * server can find (Node would read the next request as its body): 400, then the connection closes.
   */
  const unframed = (req: IncomingMessage) => {
    const te = req.headers['transfer-encoding'];
    if (te === undefined) return false;
    const last = te.slice(te.lastIndexOf(',') + 1).trim().toLowerCase();
    return last !== 'chunked';
  };

  /** RFC 9112 3.2: an HTTP/1.1 request without Host is a 400. */
  const lacksHost = (req: IncomingMessage) => req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1;

  const server = createServer({ ...options, requireHostHeader: false }, (req, res) => {
    track(req, res);
    // Node's parser reads nothing after a request asking to upgrade the protocol (none is offered
    // here) and the connection ends with its answer: that answer says so.
    if (req.headers.upgrade !== undefined) res.setHeader('Connection', 'close');
    if (lacksHost(req)) refuse(req, res, 'MISSING_HOST');
    else if (unframed(req)) refuse(req, res, 'TRANSFER_ENCODING_NOT_CHUNKED');
    else listener(req, res);
  });

  // Node asks here about an `Expect:` it cannot meet (anything but 100-continue) instead of answering a bare 417.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    track(req, res);
    refuse(req, res, lacksHost(req) ? 'MISSING_HOST' : 'EXPECTATION_FAILED');
  });

  // mds is no proxy: a CONNECT is refused after the answers owed before it, and its connection closes.
  server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => socket.destroy());
    refused.add(socket);
    const reqId = requestIdOf(req);
    const response = toParserErrorResponse('CONNECT');
    afterOpenResponses(socket, () => socket.end(envelopeBytes(response, { 'X-Request-Id': reqId })));
    linger(socket);
    logger.warn({ reqId, code: 'CONNECT', req: { method: req.method, url: req.url }, res: { statusCode: response.status } }, 'request refused on the wire');
  });

  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // One refusal per connection: it has had its answer, and the parser reads nothing more of it.
    if (refused.has(socket)) return;
    refused.add(socket);
    // A connection the client reset has no one left to tell.
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    linger(socket);
    const res = latest.get(socket);
    const response = toParserErrorResponse(err.code);
    if (res !== undefined && !res.req.complete) {
      // The refused bytes belong to a request already handed to the app (its body's framing broke).
      // Its one answer is the refusal if nothing of another has begun (the app may be waiting for a
      // body that will never arrive); else the answer under way stays the only one.
      if (!res.headersSent) refuse(res.req, res, err.code);
      afterOpenResponses(socket, () => socket.end());
      return;
    }
    const reqId = randomUUID();
    afterOpenResponses(socket, () => socket.end(envelopeBytes(response, { 'X-Request-Id': reqId })));
    logger.warn({ reqId, code: err.code, res: { statusCode: response.status } }, 'request refused by the HTTP parser');
  });
  return server;
}
