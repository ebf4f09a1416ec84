/**
 * The precompiled route matching must stay a drop-in for express-openapi-validator's own. These tests
 * fail when the installed validator is not the version it was written against, when the internal it
 * replaces is gone, or when it answers any request of the contract differently from upstream.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadContract } from '../../src/http/contract.js';
import {
  openApiValidatorMiddleware,
  precompiledMetadataMiddleware,
  upstreamMetadataMiddleware,
  validatorInternalsPresent,
  WRAPPED_VALIDATOR_VERSION,
  type ValidatorContext,
} from '../../src/http/openapi-validator.js';

const requireHere = createRequire(import.meta.url);
const installedVersion = (JSON.parse(readFileSync(requireHere.resolve('express-openapi-validator/package.json'), 'utf8')) as { version: string }).version;

interface Outcome {
  status: number;
  body: unknown;
  allow: string | null;
}

/** An app whose only job is to run one metadata step and report what it decided. */
function metadataProbe(step: RequestHandler): express.Express {
  const app = express();
  app.use((req, res, next) => {
    step(req, res, () => {
      const openapi = (req as unknown as { openapi?: { expressRoute: string; openApiRoute: string; pathParams: unknown; schema: { operationId?: string }; serial: number } }).openapi;
      res.json({
        matched: openapi ? { expressRoute: openapi.expressRoute, openApiRoute: openapi.openApiRoute, pathParams: openapi.pathParams, operationId: openapi.schema.operationId, serial: openapi.serial } : null,
        params: req.params,
      });
    });
    void next;
  });
  const errors: ErrorRequestHandler = (err: { status?: number; message?: string; headers?: Record<string, string> }, _req, res, _next) => {
    if (err.headers) res.set(err.headers);
    res.status(err.status ?? 500).json({ error: err.message });
  };
  app.use(errors);
  return app;
}

async function listen(app: express.Express): Promise<{ server: Server; url: string }> {
  const server = createServer(app).listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function call(url: string, method: string, path: string): Promise<Outcome> {
  const res = await fetch(`${url}${path}`, { method });
  return { status: res.status, body: await res.json(), allow: res.headers.get('allow') };
}

describe('express-openapi-validator with precompiled route matching', () => {
  const contract = loadContract();
  let upstream: { server: Server; url: string };
  let ours: { server: Server; url: string };

  beforeAll(async () => {
    const OpenApiSpecLoader = (requireHere('express-openapi-validator/dist/framework/openapi.spec.loader.js') as { OpenApiSpecLoader: new (o: { apiDoc: unknown }) => { load(): Promise<unknown> } }).OpenApiSpecLoader;
    const OpenApiContext = (requireHere('express-openapi-validator/dist/framework/openapi.context.js') as { OpenApiContext: new (spec: unknown, ignore: unknown, undocumented: boolean, useUrl: boolean) => ValidatorContext }).OpenApiContext;
    const spec = await new OpenApiSpecLoader({ apiDoc: structuredClone(contract.document) }).load();
    const context = new OpenApiContext(spec, undefined, false, false);
    upstream = await listen(metadataProbe(upstreamMetadataMiddleware(context, undefined)));
    ours = await listen(metadataProbe(precompiledMetadataMiddleware(context, undefined)));
  });
  afterAll(() => {
    upstream?.server.close();
    ours?.server.close();
  });

  it('when the installed validator is inspected, then it is the version whose internals we replace and still has them', () => {
    expect(installedVersion).toBe(WRAPPED_VALIDATOR_VERSION);
    expect(validatorInternalsPresent()).toBe(true);
  });

  it('when a known path and method are requested, then it resolves to that operation with decoded path parameters', async () => {
    const outcome = await call(ours.url, 'DELETE', '/api/admin/users/al%20ice');

    expect(outcome.status).toBe(200);
    expect(outcome.body).toEqual({
      matched: { expressRoute: '/api/admin/users/:username', openApiRoute: '/api/admin/users/{username}', pathParams: { username: 'al ice' }, operationId: 'deleteUser', serial: expect.any(Number) },
      params: { username: 'al ice' },
    });
  });

  it('when any request of the contract (and around it) is matched, first or again, then the answer equals upstream matching', async () => {
    const requests: Array<[string, string]> = [];
    for (const op of contract.operations) {
      const path = op.path.replace(/\{[^}]+\}/g, 'x.y_z-1');
      requests.push([op.method.toUpperCase(), path], ['PATCH', path], [op.method.toUpperCase(), `${path}/`], [op.method.toUpperCase(), path.toUpperCase()]);
    }
    requests.push(['GET', '/api/unknown'], ['GET', '/'], ['GET', '/api/admin/users/%E0%A4%A'], ['GET', '/api/health?x=1'], ['GET', '/api/admin/users/a/b']);

    expect(requests.length).toBeGreaterThan(40);
    // Twice: the second time, our matcher answers each path from what it remembers.
    for (const pass of [1, 2]) {
      for (const [method, path] of requests) {
        const [expected, actual] = await Promise.all([call(upstream.url, method, path), call(ours.url, method, path)]);
        expect({ pass, method, path, ...actual }).toEqual({ pass, method, path, ...expected });
      }
    }
  });

  it('when the whole validator is installed, then a bad request is still refused and a good one reaches the route', async () => {
    const app = express();
    app.use(express.json());
    app.use(openApiValidatorMiddleware({ apiSpec: structuredClone(contract.document) as never, validateRequests: { allErrors: true }, validateSecurity: false, fileUploader: false }));
    app.get('/api/health', (_req, res) => void res.json({ ok: true }));
    app.use(((err: { status?: number }, _req, res, _next) => void res.status(err.status ?? 500).json({ status: err.status })) as ErrorRequestHandler);
    const { server, url } = await listen(app);
    try {
      const good = await fetch(`${url}/api/health`);
      const unknownQuery = await fetch(`${url}/api/health?surprise=1`);
      const wrongMethod = await fetch(`${url}/api/health`, { method: 'DELETE' });

      expect([good.status, await good.json()]).toEqual([200, { ok: true }]);
      expect(unknownQuery.status).toBe(400);
      expect(wrongMethod.status).toBe(405);
    } finally {
      server.close();
    }
  });

  it('when an operation takes no parameters and no body, then a request with neither skips the request step, and every request is judged as upstream judges it', async () => {
    const { middleware } = requireHere('express-openapi-validator') as { middleware: (options: unknown) => RequestHandler[] };
    const options = { validateRequests: { allErrors: true }, validateSecurity: false, fileUploader: false } as const;
    const probe = (steps: RequestHandler | RequestHandler[]) => {
      const app = express();
      app.use(express.json());
      app.use(steps);
      // Upstream's request step leaves req.query as an own property; skipped, it is still Express's getter.
      app.use((req, res) => void res.json({ operation: (req as { openapi?: { schema: { operationId: string } } }).openapi?.schema.operationId, validated: Object.getOwnPropertyDescriptor(req, 'query') !== undefined }));
      app.use(((err: { status?: number }, _req, res, _next) => void res.status(err.status ?? 500).json({ status: err.status })) as ErrorRequestHandler);
      return listen(app);
    };
    const upstreamApp = await probe(middleware({ apiSpec: structuredClone(contract.document), ...options }));
    const oursApp = await probe(openApiValidatorMiddleware({ apiSpec: structuredClone(contract.document) as never, ...options }));
    const ask = async (url: string, method: string, path: string, body?: string) => {
      const res = await fetch(`${url}${path}`, { method, ...(body === undefined ? {} : { body, headers: { 'content-type': 'application/json' } }) });
      const answer = (await res.json()) as { operation?: string; validated?: boolean };
      return { status: res.status, operation: answer.operation, validated: answer.validated };
    };
    try {
      const skipped: string[] = [];
      for (const op of contract.operations) {
        const path = op.path.replace(/\{[^}]+\}/g, 'AAPL');
        const method = op.method.toUpperCase();
        for (const [variant, body] of [[path, undefined], [`${path}?surprise=1`, undefined], [path, '{"surprise":1}']] as const) {
          if (body !== undefined && (method === 'GET' || method === 'HEAD')) continue;
          const [theirs, ours] = await Promise.all([ask(upstreamApp.url, method, variant, body), ask(oursApp.url, method, variant, body)]);
          expect({ method, variant, body, status: ours.status, operation: ours.operation }).toEqual({ method, variant, body, status: theirs.status, operation: theirs.operation });
          if (ours.status === 200 && !ours.validated) skipped.push(`${method} ${variant}${body === undefined ? '' : ' with a body'}`);
        }
      }

      expect(skipped).toContain('GET /api/health');
      expect(skipped).toContain('GET /api/admin/status');
      expect(skipped.every((request) => !request.includes('?') && !request.includes('with a body'))).toBe(true);
    } finally {
      upstreamApp.server.close();
      oursApp.server.close();
    }
  });

  it('when a step it does not run is asked for, then building it fails at once instead of skipping that step', () => {
    const apiSpec = () => structuredClone(contract.document) as never;

    expect(() => openApiValidatorMiddleware({ apiSpec: apiSpec(), validateSecurity: false })).toThrow(/fileUploader/);
    expect(() => openApiValidatorMiddleware({ apiSpec: apiSpec(), fileUploader: false })).toThrow(/validateSecurity/);
    expect(() => openApiValidatorMiddleware({ apiSpec: apiSpec(), validateSecurity: false, fileUploader: false, operationHandlers: 'handlers' })).toThrow(/operationHandlers/);
  });
});
