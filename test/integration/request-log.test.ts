/** The request log over a real socket: one line per request with its id, and no work at levels that are off. */
import type { Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { loadContract } from '../../src/http/contract.js';
import type { Logger } from '../../src/infra/logger.js';
import { handlersOf, startBareApp } from '../helpers/bare-app.js';
import { captureLogger } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const contract = loadContract();

/** The app with a health handler that answers 200, and every other operation unused. */
function start(logger: Logger): Promise<{ server: Server; url: string }> {
  const getHealth = (_req: unknown, res: { json(b: unknown): void }) => res.json({ ok: true, datasource: true, cache: true, auth: true });
  return startBareApp(contract, handlersOf(contract, () => undefined, { getHealth }), logger);
}

/** Counts the child loggers made from `logger` (each one serializes its bindings). */
function countChildren(logger: Logger): () => number {
  let made = 0;
  const child = logger.child.bind(logger);
  logger.child = ((...args: Parameters<Logger['child']>) => {
    made += 1;
    return child(...args);
  }) as Logger['child'];
  return () => made;
}

describe('request log', () => {
  let server: Server | undefined;
  afterEach(() => {
    server?.close();
  });

  it('when a request is answered, then one info line carries its request id, method, URL as received, status and time', async () => {
    const { logger, logs } = captureLogger('info');
    const started = await start(logger);
    server = started.server;

    const res = await fetch(`${started.url}/api/health`, { method: 'HEAD', headers: { 'X-Request-Id': 'trace-42' } });
    const missing = await fetch(`${started.url}/api/nowhere?x=1`);

    expect(res.status).toBe(200);
    expect(missing.status).toBe(404);
    await waitFor(() => logs.filter((l) => l.msg === 'request completed').length === 2, { message: 'two request lines' });
    const [head, notFound] = logs.filter((l) => l.msg === 'request completed');
    expect(head).toMatchObject({ level: 30, reqId: 'trace-42', req: { method: 'HEAD', url: '/api/health' }, res: { statusCode: 200 } });
    expect(typeof head!.responseTime).toBe('number');
    expect(notFound).toMatchObject({ level: 40, reqId: missing.headers.get('x-request-id'), req: { method: 'GET', url: '/api/nowhere?x=1' }, res: { statusCode: 404 } });
  });

  it('when the level is warn, then a 2xx request writes no line and makes no child logger, and a 4xx still writes its line', async () => {
    const { logger, logs } = captureLogger('info');
    logger.level = 'warn';
    const started = await start(logger);
    server = started.server;
    // Counted from here: what building the app made once is not a cost per request.
    const children = countChildren(logger);

    const ok = await fetch(`${started.url}/api/health`);
    const bad = await fetch(`${started.url}/api/health?unknown=1`);

    expect([ok.status, bad.status]).toEqual([200, 422]);
    await waitFor(() => logs.some((l) => l.res !== undefined), { message: 'the 4xx line' });
    expect(logs.filter((l) => l.res !== undefined).map((l) => [l.level, (l.res as { statusCode: number }).statusCode])).toEqual([[40, 422]]);
    expect(children()).toBe(0);
  });
});
