import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createApp } from '../../src/http/app.js';
import { loadContract } from '../../src/http/contract.js';
import { StartupError } from '../../src/domain/errors.js';
import type { Handlers } from '../../src/http/handlers/types.js';
import { handlersOf, startBareApp } from '../helpers/bare-app.js';
import { schemaViolations } from '../helpers/contract-schema.js';
import { captureLogger, startTestService, type TestService } from '../helpers/service.js';

const json = { 'content-type': 'application/json' };

function expectEnvelope(body: unknown, status: number): asserts body is { success: false; error: string; code: number; detail: string } {
  expect(body).toMatchObject({ success: false, code: status });
  const b = body as Record<string, unknown>;
  expect(typeof b.error).toBe('string');
  expect(b.detail).toBe(b.error);
  const keys = Object.keys(b).sort();
  expect(keys).toEqual(status === 422 ? ['code', 'detail', 'error', 'success', 'violations'] : ['code', 'detail', 'error', 'success']);
}

/** Writes `raw` on a new connection and resolves to everything the server sent until it closed the connection (rejects after 5 s). */
function rawExchange(port: number, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(raw));
    let received = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within 5 s; received: ${received.slice(0, 200)}`));
    }, 5000);
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(received);
    });
  });
}

describe('the contract and the error envelope, over a real socket', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
  });
  afterAll(async () => {
    await svc.close();
  });

  it('health: answers 200 with the four booleans', async () => {
    const res = await svc.fetch('/api/health');
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['auth', 'cache', 'datasource', 'ok']);
    for (const v of Object.values(body)) expect(typeof v).toBe('boolean');
    expect(body.ok).toBe(true);
  });

  it('every response carries a request id, and a sane incoming X-Request-Id is echoed', async () => {
    const res = await svc.fetch('/api/health', { headers: { 'x-request-id': 'trace-123' } });
    expect(res.headers.get('x-request-id')).toBe('trace-123');
    const other = await svc.fetch('/api/health', { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(other.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('unknown path: answers 404 in the envelope naming the method and path', async () => {
    const res = await svc.fetch('/api/does-not-exist');
    expect(res.status).toBe(404);
    const body = await res.json();
    expectEnvelope(body, 404);
    expect(body.error).toContain('GET /api/does-not-exist');
  });

  it('path outside /api: answers 404 in the envelope too', async () => {
    const res = await svc.fetch('/nothing-here');
    expect(res.status).toBe(404);
    expectEnvelope(await res.json(), 404);
  });

  it('wrong method: answers 405 in the envelope, and Allow lists HEAD beside GET', async () => {
    const res = await svc.fetch('/api/health', { method: 'DELETE' });
    expect(res.status).toBe(405);
    const body = await res.json();
    expectEnvelope(body, 405);
    expect(body.error).toContain('DELETE /api/health');
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    expect((await svc.fetch('/api/health', { method: 'HEAD' })).status).toBe(200);
  });

  it('requests the HTTP parser refuses (bad request line, oversized headers, unknown method) get the envelope, a request id, and a closed connection', async () => {
    const { port } = new URL(svc.url);
    const cases: Array<[string, number]> = [
      ['GET /api/health XTTP/1.1\r\n\r\n', 400],
      ['NOT HTTP AT ALL\r\n\r\n', 501],
      [`GET /api/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
      ['BREW /api/health HTTP/1.1\r\nHost: x\r\n\r\n', 501],
      ['POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', 400],
    ];
    for (const [raw, status] of cases) {
      const answer = await rawExchange(Number(port), raw);
      const [head, body] = answer.split('\r\n\r\n');
      expect(head, raw.slice(0, 30)).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      expect(head).toMatch(/\r\nX-Request-Id: [0-9a-f-]{36}\r\n/i);
      expect(head).toMatch(/\r\nConnection: close/i);
      expectEnvelope(JSON.parse(body ?? ''), status);
    }
    // The service is still answering.
    expect((await svc.fetch('/api/health')).status).toBe(200);
  });

  it('a body declared over the limit is refused with 413 at once, without waiting for the body', async () => {
    const { port } = new URL(svc.url);
    const answer = await rawExchange(Number(port), 'POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{"username":');
    const [head, body] = answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1.1 413 /);
    expect(head).toMatch(/\r\nConnection: close/i);
    expectEnvelope(JSON.parse(body ?? ''), 413);
  });

  it('a body that does not decompress, or a path that does not percent-decode: 422 saying so in plain words', async () => {
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const res = await svc.fetch('/api/auth/login', { method: 'POST', headers: { ...json, 'content-encoding': encoding }, body: '{"username":"a","password":"b"}' });
      expect(res.status, encoding).toBe(422);
      const body = await res.json();
      expectEnvelope(body, 422);
      expect(body.error).toBe('Invalid request parameters: body could not be decompressed with its Content-Encoding');
    }
    const res = await svc.fetch('/api/quotes/%E0%A4%A');
    expect(res.status).toBe(422);
    const body = await res.json();
    expectEnvelope(body, 422);
    expect((body as unknown as { violations: unknown }).violations).toEqual([{ path: 'path', message: 'is not valid percent-encoding' }]);
  });

  it('a JSON body that is not an object: 422 saying so, not "not valid JSON"', async () => {
    for (const text of ['null', '"x"', '1']) {
      const res = await svc.fetch('/api/auth/login', { method: 'POST', headers: json, body: text });
      expect(res.status).toBe(422);
      const body = await res.json();
      expectEnvelope(body, 422);
      expect(body.error).toBe('Invalid request parameters: body must be a JSON object');
    }
    const broken = await svc.fetch('/api/auth/login', { method: 'POST', headers: json, body: '{"username":' });
    expect(((await broken.json()) as { error: string }).error).toBe('Invalid request parameters: body is not valid JSON');
  });

  it('a required body that is not sent at all: 422 saying the body is required', async () => {
    const { port } = new URL(svc.url);
    // No Content-Length and no Transfer-Encoding: a request without a body (fetch would send Content-Length: 0).
    const answer = await rawExchange(Number(port), 'POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n');
    const [head, text] = answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1.1 422 /);
    const body = JSON.parse(text ?? '');
    expectEnvelope(body, 422);
    expect(body.error).toBe('Invalid request parameters: body is required: send a JSON object');
    expect((body as unknown as { violations: unknown }).violations).toEqual([{ path: 'body', message: 'is required: send a JSON object' }]);
  });

  it('oversized body: answers 413 in the envelope', async () => {
    const res = await svc.fetch('/api/auth/login', {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ username: 'admin', password: 'x'.repeat(20_000) }),
    });
    expect(res.status).toBe(413);
    expectEnvelope(await res.json(), 413);
  });

  it('body that is not JSON: answers 415 in the envelope', async () => {
    const res = await svc.fetch('/api/auth/login', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'username=admin' });
    expect(res.status).toBe(415);
    expectEnvelope(await res.json(), 415);
  });

  it('login without a body: answers 415 in the envelope', async () => {
    const res = await svc.fetch('/api/auth/login', { method: 'POST' });
    expect(res.status).toBe(415);
    expectEnvelope(await res.json(), 415);
  });

  it('login with a missing field: answers 422 with a violation naming it', async () => {
    const res = await svc.fetch('/api/auth/login', { method: 'POST', headers: json, body: JSON.stringify({ username: 'admin' }) });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { error: string; violations: Array<{ path: string; message: string }> };
    expectEnvelope(body, 422);
    expect(body.error).toMatch(/^Invalid request parameters: /);
    expect(body.violations).toContainEqual({ path: 'body.password', message: expect.stringContaining('password') });
  });

  it('login with a wrong type: answers 422 with a violation naming the field', async () => {
    const res = await svc.fetch('/api/auth/login', { method: 'POST', headers: json, body: JSON.stringify({ username: 42, password: 'whatever-pass' }) });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { violations: Array<{ path: string; message: string }> };
    expectEnvelope(body, 422);
    expect(body.violations).toContainEqual({ path: 'body.username', message: 'must be string' });
  });

  it('login with several problems: answers 422 listing every violation', async () => {
    const res = await svc.fetch('/api/auth/login', { method: 'POST', headers: json, body: JSON.stringify({ username: '', extra: 1 }) });
    const body = (await res.json()) as { violations: Array<{ path: string }> };
    expect(res.status).toBe(422);
    expect(body.violations.length).toBeGreaterThanOrEqual(3);
  });

  it('login with malformed JSON: answers 422 with a body violation', async () => {
    const res = await svc.fetch('/api/auth/login', { method: 'POST', headers: json, body: '{"username": "admin", ' });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { violations: unknown };
    expectEnvelope(body, 422);
    expect(body.violations).toEqual([{ path: 'body', message: 'is not valid JSON' }]);
  });

  it('unknown query parameter: answers 422 naming it', async () => {
    const res = await svc.fetch('/api/health?verbose=1');
    expect(res.status).toBe(422);
    const body = (await res.json()) as { violations: Array<{ path: string }> };
    expectEnvelope(body, 422);
    expect(JSON.stringify(body.violations)).toContain('verbose');
  });

  it('indices: the fast path and the Express path send the same bytes and headers, and the body conforms to IndicesResponse', async () => {
    const fast = await svc.fetch('/api/indices');
    const viaExpress = await svc.fetch('/api/indices?');
    expect(fast.status).toBe(200);
    expect(viaExpress.status).toBe(200);
    const fastBytes = Buffer.from(await fast.arrayBuffer());
    expect(Buffer.from(await viaExpress.arrayBuffer()).equals(fastBytes)).toBe(true);
    for (const header of ['content-type', 'etag']) expect(viaExpress.headers.get(header)).toBe(fast.headers.get(header));
    expect(viaExpress.headers.get('x-cache')).toBe('HIT');
    expect(viaExpress.headers.get('cache-control')).toMatch(/^public, max-age=\d+$/);
    expect(fast.headers.get('x-request-id')).toBeTruthy();
    const body = JSON.parse(fastBytes.toString('utf8')) as { data: unknown[] };
    expect(schemaViolations('IndicesResponse', body)).toEqual([]);
    expect(body.data.length).toBeGreaterThan(0);
  });

  it('indices: a body that breaks IndicesResponse is caught by the same check', () => {
    expect(schemaViolations('IndicesResponse', { success: true, data: [{ symbol: 'X' }], source: 'simulated', updated_at: 'yesterday' })).not.toEqual([]);
  });

  it('HEAD answers as GET without a body: the same status and headers', async () => {
    for (const path of ['/api/health', '/api/indices', '/api/indices?']) {
      const get = await svc.fetch(path);
      const head = await svc.fetch(path, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-type')).toBe(get.headers.get('content-type'));
      expect(await head.text()).toBe('');
    }
    const docs = await svc.fetch('/api/indices', { method: 'HEAD' });
    expect(docs.headers.get('etag')).toMatch(/^"/);
  });

  it('serves the contract as YAML and as JSON, the same document', async () => {
    const yamlRes = await svc.fetch('/openapi.yaml');
    expect(yamlRes.status).toBe(200);
    expect(yamlRes.headers.get('content-type')).toMatch(/yaml/);
    const fromYaml = parse(await yamlRes.text()) as Record<string, unknown>;
    const jsonRes = await svc.fetch('/openapi.json');
    expect(jsonRes.status).toBe(200);
    expect(await jsonRes.json()).toEqual(fromYaml);
    expect(fromYaml.openapi).toMatch(/^3\./);
  });

  it('serves the WebSocket API contract (asyncapi.yaml) as written, and the documentation links to it', async () => {
    const res = await svc.fetch('/asyncapi.yaml');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/yaml/);
    const text = await res.text();
    expect(text).toBe(readFileSync(resolve(import.meta.dirname, '../../asyncapi.yaml'), 'utf8'));
    const doc = parse(text) as { asyncapi?: string; channels?: Record<string, unknown> };
    expect(doc.asyncapi).toMatch(/^3\./);
    expect(Object.keys(doc.channels ?? {}).length).toBeGreaterThan(0);
    const contract = parse(await (await svc.fetch('/openapi.yaml')).text()) as { info: { description: string } };
    expect(contract.info.description).toContain('](/asyncapi.yaml)');
  });
});

describe('unexpected failures', () => {
  it('a crashing handler: answers 500 "Internal server error" without the cause, and logs the cause with the request id', async () => {
    const contract = loadContract();
    const secret = 'db password is hunter2 at /srv/app/secret.ts:42';
    const crash = () => {
      throw new Error(secret);
    };
    const { logger, logs } = captureLogger();
    const { server, url } = await startBareApp(contract, handlersOf(contract, crash), logger);
    try {
      const res = await fetch(`${url}/api/health`);
      expect(res.status).toBe(500);
      const text = await res.text();
      expect(JSON.parse(text)).toEqual({ success: false, error: 'Internal server error', code: 500, detail: 'Internal server error' });
      expect(text).not.toContain('hunter2');
      expect(text).not.toContain('.ts');
      const reqId = res.headers.get('x-request-id');
      const logged = logs.find((l) => l.msg === 'unexpected failure');
      expect(logged?.reqId).toBe(reqId);
      expect(JSON.stringify(logged)).toContain('hunter2');
      // What failed, not where in the source: no stack in the line.
      expect(logged?.err).toEqual({ type: 'Error', message: secret });
      expect(JSON.stringify(logs)).not.toMatch(/\bat .*contract\.test\.ts/);
    } finally {
      server.close();
    }
  });
});

describe('failures after the answer began', () => {
  it('a handler that fails once its headers are out: the connection is closed (no whole answer reaches the client), the cause is logged, and the next request is answered', async () => {
    const contract = loadContract();
    const halfway = (_req: unknown, res: { writeHead: (s: number, h: Record<string, string>) => void; write: (s: string) => void }) => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '100' });
      res.write('{"partial":');
      throw new Error('failed halfway');
    };
    const { logger, logs } = captureLogger();
    const { server, url } = await startBareApp(contract, handlersOf(contract, halfway, { getHealth: (_req: unknown, res: { json: (b: unknown) => void }) => res.json({ ok: true }) }), logger);
    try {
      // Whether the head reached the client before the close or not, the client cannot take the answer as whole.
      await expect(fetch(`${url}/api/indices`).then((res) => res.text())).rejects.toThrow();
      expect(logs.some((l) => l.msg === 'unexpected failure')).toBe(true);
      const next = await fetch(`${url}/api/health`);
      expect(next.status).toBe(200);
      expect(await next.json()).toEqual({ ok: true });
    } finally {
      server.close();
    }
  });
});

describe('startup', () => {
  it('refuses a contract operation without a handler, naming it', () => {
    const contract = loadContract();
    const handlers = Object.fromEntries(contract.operations.filter((op) => op.operationId !== 'getIndices').map((op) => [op.operationId, () => undefined]));
    const { logger } = captureLogger();
    const build = () =>
      createApp({
        contract,
        handlers: handlers as unknown as Handlers,
        logger,
        bodyLimitBytes: 16384,
        authenticator: { authenticateBearer: (_req, done) => done(new Error()), authenticateApiKey: (_req, done) => done(new Error()) },
      });
    expect(build).toThrow(StartupError);
    expect(build).toThrow(/getIndices \(GET \/api\/indices\)/);
  });
});

describe('startup failure', () => {
  it('when the port is taken, startService rejects with the listen error', async () => {
    const first = await startTestService();
    try {
      const port = new URL(first.url).port;
      await expect(startTestService({ PORT: port })).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await first.close();
    }
  });
});

describe('one answer shape (issue 52)', () => {
  const document = parse(readFileSync(resolve(import.meta.dirname, '../../openapi.yaml'), 'utf8')) as {
    paths: Record<string, Record<string, { operationId?: string; responses?: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }> }>>;
    components: { schemas: Record<string, { required?: string[]; properties?: Record<string, { const?: unknown }> }> };
  };
  /** The shapes SPEC.md fixes (health, login), and the contract served as JSON: a document, not an answer. */
  const KEPT = ['getHealth', 'login', 'getOpenApiJson'];

  it('every 2xx JSON answer but health and login is {success: true, data}, and those two keep the SPEC.md shapes with ok', () => {
    const shapes: Record<string, string> = {};
    for (const item of Object.values(document.paths)) {
      for (const operation of Object.values(item)) {
        for (const [status, response] of Object.entries(operation.responses ?? {})) {
          const ref = response.content?.['application/json']?.schema?.$ref;
          if (!status.startsWith('2') || response.content?.['application/json'] === undefined) continue;
          const schema = ref === undefined ? undefined : document.components.schemas[ref.split('/').pop()!];
          const envelope = schema?.properties?.success?.const === true && schema.properties.data !== undefined && ['success', 'data'].every((k) => schema.required?.includes(k));
          shapes[`${operation.operationId!} ${status}`] = envelope ? 'envelope' : (ref ?? 'inline');
        }
      }
    }

    const others = Object.entries(shapes).filter(([key]) => !KEPT.includes(key.split(' ')[0]!));
    expect(others.length).toBeGreaterThan(20);
    expect(others.filter(([, shape]) => shape !== 'envelope')).toEqual([]);
    expect(shapes['getHealth 200']).toBe('#/components/schemas/Health');
    expect(shapes['login 200']).toBe('#/components/schemas/LoginResult');
  });
});
