/**
 * Requests Node's HTTP parser refuses before the app sees them (a malformed request line, headers
 * over 16 KiB, an unknown method, a request too slow to arrive) get the error envelope too, with a
 * request id, instead of Node's bare status line. The connection is closed after the answer: the
 * parser cannot tell where the next request would start.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { toParserErrorResponse } from './envelope.js';
import type { Logger } from '../domain/ports.js';

export function answerClientErrors(server: Server, logger: Logger): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A connection the client reset, or one already answered, has no one left to tell.
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const response = toParserErrorResponse(err.code);
    const reqId = randomUUID();
    const body = JSON.stringify(response.body);
    socket.end(
      `HTTP/1.1 ${response.status} ${STATUS_CODES[response.status] ?? ''}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${reqId}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
    logger.warn({ reqId, code: err.code, res: { statusCode: response.status } }, 'request refused by the HTTP parser');
  });
}
