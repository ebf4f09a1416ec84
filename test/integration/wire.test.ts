/**
 * The wire, byte by byte: raw requests written on real sockets (no HTTP client in between), and every
 * answer read back as the bytes the server sent, so a second answer or one out of order shows.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import { createWireServer } from '../../src/http/client-errors.js';
import { captureLogger, startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits what a server sent into its answers (every answer here carries a Content-Length). */
function answersIn(raw: string): { answers: Answer[]; rest: string } {
  const answers: Answer[] = [];
  let rest = raw;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const [statusLine = '', ...lines] = rest.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    const bodyStart = end + 4;
    if (Buffer.byteLength(rest.slice(bodyStart)) < length) break;
    answers.push({ status: Number(statusLine.split(' ')[1]), headers, body: rest.slice(bodyStart, bodyStart + length) });
    rest = rest.slice(bodyStart + length);
  }
  return { answers, rest };
}

/** One raw connection: what it received so far, and whether the server closed it. */
class RawConnection {
  readonly socket: Socket;
  received = '';
  closed = false;
  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('data', (chunk: Buffer) => (this.received += chunk.toString('latin1')));
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => (this.closed = true));
  }
  write(raw: string): void {
    this.socket.write(raw, 'latin1');
  }
  get answers(): Answer[] {
    return answersIn(this.received).answers;
  }
  /** Resolves once the server closed the connection (fails after 5 s). */
  async untilClosed(): Promise<Answer[]> {
    await waitFor(() => this.closed, { message: `the server closing the connection; received: ${this.received.slice(0, 300)}` });
    const { answers, rest } = answersIn(this.received);
    expect(rest, 'bytes after the last complete answer').toBe('');
    return answers;
  }
}

function exchange(port: number, raw: string): Promise<Answer[]> {
  const conn = new RawConnection(port);
  conn.write(raw);
  return conn.untilClosed();
}

function expectEnvelope(answer: Answer | undefined, status: number): void {
  expect(answer?.status).toBe(status);
  expect(answer?.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(answer?.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  expect(answer?.headers.connection).toBe('close');
  const body = JSON.parse(answer?.body ?? '') as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['code', 'detail', 'error', 'success']);
  expect(body).toMatchObject({ success: false, code: status });
  expect(body.detail).toBe(body.error);
}

describe('the wire: one answer per request, in order, in the envelope', () => {
  let svc: TestService;
  let port: number;
  beforeAll(async () => {
    svc = await startTestService();
    port = Number(new URL(svc.url).port);
  });
  afterAll(async () => {
    await svc.close();
  });

  /** A keep-alive client's next request, on a fresh connection, is answered as usual. */
  async function expectServiceAnswers(): Promise<void> {
    const conn = new RawConnection(port);
    conn.write('GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n');
    await waitFor(() => conn.answers.length === 1, { message: 'the health answer' });
    expect(conn.answers[0]?.status).toBe(200);
    expect(JSON.parse(conn.answers[0]?.body ?? '')).toMatchObject({ ok: true });
    conn.socket.destroy();
  }

  it('when Expect is not 100-continue, then one 417 envelope and the connection closes', async () => {
    const answers = await exchange(port, 'GET /api/health HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n\r\n');
    expect(answers).toHaveLength(1);
    expectEnvelope(answers[0], 417);
    await expectServiceAnswers();
  });

  it('when Expect is 100-continue, then the request is served as usual', async () => {
    const conn = new RawConnection(port);
    conn.write('GET /api/health HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n');
    await waitFor(() => conn.received.includes('"ok":'), { message: 'the health answer' });
    expect(conn.received).toMatch(/^HTTP\/1.1 100 Continue\r\n\r\nHTTP\/1.1 200 /);
    conn.socket.destroy();
  });

  it('when an HTTP/1.1 request has no Host, then one 400 envelope saying so, and the connection closes', async () => {
    const answers = await exchange(port, 'GET /api/health HTTP/1.1\r\n\r\n');
    expect(answers).toHaveLength(1);
    expectEnvelope(answers[0], 400);
    expect(answers[0]?.body).toContain('Host');
    // HTTP/1.0 has no such rule.
    const old = await exchange(port, 'GET /api/health HTTP/1.0\r\n\r\n');
    expect(old.map((a) => a.status)).toEqual([200]);
    await expectServiceAnswers();
  });

  it('when a request has no Host and an unmet Expect, then one 400 envelope', async () => {
    const answers = await exchange(port, 'GET /api/health HTTP/1.1\r\nExpect: foo\r\n\r\n');
    expect(answers).toHaveLength(1);
    expectEnvelope(answers[0], 400);
  });

  it('when CONNECT arrives, then one 501 envelope and the connection closes', async () => {
    const answers = await exchange(port, 'CONNECT /api/health HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(answers).toHaveLength(1);
    expectEnvelope(answers[0], 501);
    await expectServiceAnswers();
  });

  it('when CONNECT follows a pipelined request, then that request is answered first', async () => {
    const answers = await exchange(port, 'GET /api/health HTTP/1.1\r\nHost: x\r\n\r\nCONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    expect(answers.map((a) => a.status)).toEqual([200, 501]);
    expectEnvelope(answers[1], 501);
  });

  it('when Transfer-Encoding is identity, then exactly one answer in the envelope, and the connection closes', async () => {
    const answers = await exchange(port, 'GET /api/nosuch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n');
    expect(answers).toHaveLength(1);
    // The refusal when it came first; the app's own 404 when that was out before the parser found the
    // framing wrong. Never both.
    const status = answers[0]?.status;
    expect([400, 404]).toContain(status);
    expect(JSON.parse(answers[0]?.body ?? '')).toMatchObject({ success: false, code: status });
    await expectServiceAnswers();
  });

  it('when Transfer-Encoding does not end in chunked, then one 400 envelope, the connection closes, and the bytes after it are never read as a request', async () => {
    for (const coding of ['gzip', 'chunked, gzip', 'gzip, identity']) {
      const conn = new RawConnection(port);
      conn.write(`PUT /api/stream HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ${coding}\r\n\r\nGET /api/health HTTP/1.1\r\nHost: x\r\n\r\n`);
      const answers = await conn.untilClosed();
      expect(answers, coding).toHaveLength(1);
      expectEnvelope(answers[0], 400);
      expect(JSON.parse(answers[0]?.body ?? '')).toMatchObject({ error: 'Bad request: a request with Transfer-Encoding must end it in chunked' });
    }
    await expectServiceAnswers();
  });

  it('when a chunked body is malformed, then exactly one answer (the 400 envelope), and the connection closes', async () => {
    const answers = await exchange(
      port,
      'POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
    );
    expect(answers).toHaveLength(1);
    expectEnvelope(answers[0], 400);
    await expectServiceAnswers();
  });

  it('when a chunked body breaks after its headers were answered, then that answer is the only one', async () => {
    const conn = new RawConnection(port);
    conn.write('POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
    // The body's first chunk is still awaited: the login is under way and has answered nothing yet.
    conn.write('2\r\n{}\r\n');
    conn.write('zz\r\n');
    const answers = await conn.untilClosed();
    expect(answers).toHaveLength(1);
    expectEnvelope(answers[0], 400);
  });

  it('when chunk extensions are too long, then exactly one answer (the 413 envelope)', async () => {
    const answers = await exchange(port, `POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2;${'a'.repeat(20_000)}\r\n{}\r\n0\r\n\r\n`);
    expect(answers).toHaveLength(1);
    expectEnvelope(answers[0], 413);
  });

  it('when the HTTP version is not 1.x, then one 505 envelope', async () => {
    const answers = await exchange(port, 'GET /api/health HTTP/1.2\r\nHost: x\r\n\r\n');
    expect(answers).toHaveLength(1);
    expectEnvelope(answers[0], 505);
  });

  it('when an unparseable request follows a pipelined one, then the first is answered first, then the refusal, then the connection closes', async () => {
    const answers = await exchange(port, 'GET /api/search?q=apple HTTP/1.1\r\nHost: x\r\n\r\nBREW / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(answers.map((a) => a.status)).toEqual([200, 501]);
    expect(JSON.parse(answers[0]?.body ?? '')).toMatchObject({ success: true, data: [{ symbol: 'AAPL' }] });
    expectEnvelope(answers[1], 501);
    await expectServiceAnswers();
  });

  it('when three pipelined requests precede garbage, then all three are answered in order before the 400', async () => {
    const answers = await exchange(
      port,
      'GET /api/quotes/AAPL HTTP/1.1\r\nHost: x\r\n\r\nGET /api/nosuch HTTP/1.1\r\nHost: x\r\n\r\nGET /api/health HTTP/1.1\r\nHost: x\r\n\r\nGET / XTTP/1.1\r\n\r\n',
    );
    expect(answers.map((a) => a.status)).toEqual([200, 404, 200, 400]);
    expect(JSON.parse(answers[0]?.body ?? '')).toMatchObject({ success: true });
    expect(JSON.parse(answers[1]?.body ?? '')).toMatchObject({ success: false, code: 404 });
    expect(JSON.parse(answers[2]?.body ?? '')).toMatchObject({ ok: true });
    expectEnvelope(answers[3], 400);
  });

  it('when a request asks to upgrade the protocol, then it is answered as usual with Connection: close, and the connection closes', async () => {
    const answers = await exchange(port, 'GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nGET /api/health HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(answers.map((a) => a.status)).toEqual([200]);
    expect(answers[0]?.headers.connection).toBe('close');
    await expectServiceAnswers();
  });

  it('when garbage follows a completed answer on a keep-alive connection, then it gets its own one 400 envelope', async () => {
    const conn = new RawConnection(port);
    conn.write('GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n');
    await waitFor(() => conn.answers.length === 1, { message: 'the first answer' });
    expect(conn.answers[0]?.headers.connection).toBe('keep-alive');
    conn.write('NOT HTTP\r\n\r\n');
    const answers = await conn.untilClosed();
    expect(answers.map((a) => a.status)).toEqual([200, 501]);
    expectEnvelope(answers[1], 501);
    await expectServiceAnswers();
  });

  it('when more garbage follows a refusal, then nothing more is answered', async () => {
    const conn = new RawConnection(port);
    conn.write('GET / XTTP/1.1\r\n\r\n');
    await waitFor(() => conn.answers.length === 1, { message: 'the refusal' });
    conn.write('MORE GARBAGE\r\n\r\nGET /api/health HTTP/1.1\r\nHost: x\r\n\r\n');
    conn.socket.end();
    const answers = await conn.untilClosed();
    expect(answers).toHaveLength(1);
    expectEnvelope(answers[0], 400);
  });
});

describe('the wire: a request too slow to arrive', () => {
  it('when a request stops arriving, then one 408 envelope after the answers owed before it, and the connection closes', async () => {
    const { logger, logs } = captureLogger();
    // An answer that takes a while, so the slow request behind it is timed out while it is still owed.
    const server = createWireServer(
      (req, res) => {
        setTimeout(() => {
          res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '2' });
          res.end('ok');
        }, req.url === '/slow' ? 400 : 0);
      },
      logger,
      { connectionsCheckingInterval: 50 },
    );
    server.requestTimeout = 200;
    server.headersTimeout = 200;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const conn = new RawConnection(port);
      conn.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /never-finished HTTP/1.1\r\nHost: x\r\n');
      const answers = await conn.untilClosed();
      expect(answers.map((a) => a.status)).toEqual([200, 408]);
      expect(answers[0]?.body).toBe('ok');
      expectEnvelope(answers[1], 408);
      expect(logs.some((line) => line.code === 'ERR_HTTP_REQUEST_TIMEOUT' && (line.res as { statusCode?: number }).statusCode === 408)).toBe(true);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
