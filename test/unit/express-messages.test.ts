/**
 * The Express adapter (src/http/express-messages.ts) relies on Express's layout: `app.request` and
 * `app.response` chains ending at Node's message prototypes, holding the helpers as own properties.
 * Pinned to the version it was written against, so an upgrade that changes the layout fails here first,
 * and exercised over a real socket both ways (messages built by its classes, and lent afterwards).
 */
import { createServer, IncomingMessage, ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import express, { type Request, type Response } from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { lendHelpers, LENT_EXPRESS_VERSION, messageClasses } from '../../src/http/express-messages.js';

const installed = (JSON.parse(readFileSync(createRequire(import.meta.url).resolve('express/package.json'), 'utf8')) as { version: string }).version;

/** The links from `helpers` down to (not including) `base`, or undefined when the chain never reaches it. */
function chain(helpers: object, base: object): object[] | undefined {
  const links: object[] = [];
  for (let at: object | null = helpers; at !== null; at = Object.getPrototypeOf(at) as object | null) {
    if (at === base) return links;
    links.push(at);
  }
  return undefined;
}

let server: Server | undefined;
afterEach(() => {
  server?.close();
  server = undefined;
});

async function serve(make: (handler: (req: IncomingMessage, res: ServerResponse) => void) => Server, handler: (req: Request, res: Response) => void): Promise<string> {
  server = make((req, res) => handler(req as Request, res as Response));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('the Express adapter', () => {
  it('when the installed Express is inspected, then it is the version the adapter was written against and has the layout it copies', () => {
    expect(installed).toBe(LENT_EXPRESS_VERSION);
    const app = express();
    const request = chain(app.request, IncomingMessage.prototype);
    const response = chain(app.response, ServerResponse.prototype);
    expect(request).toBeDefined();
    expect(response).toBeDefined();
    const own = (links: object[]) => new Set(links.flatMap((link) => Object.getOwnPropertyNames(link)));
    for (const helper of ['get', 'header', 'accepts', 'query', 'path']) expect(own(request!)).toContain(helper);
    for (const helper of ['status', 'json', 'send', 'set', 'type']) expect(own(response!)).toContain(helper);
  });

  it('when a server builds its messages with the classes, then they are one link from Node\'s own prototype and Express\'s helpers answer', async () => {
    const app = express();
    app.set('json spaces', 0);
    const classes = messageClasses(app);
    let links: number[] = [];
    const url = await serve(
      (listener) => createServer({ IncomingMessage: classes.IncomingMessage, ServerResponse: classes.ServerResponse as never }, listener),
      (req, res) => {
        links = [Object.getPrototypeOf(Object.getPrototypeOf(req)) === IncomingMessage.prototype ? 1 : 0, Object.getPrototypeOf(Object.getPrototypeOf(res)) === ServerResponse.prototype ? 1 : 0];
        lendHelpers(app, classes, req, res);
        res.status(201).json({ q: req.query.q, path: req.path, accept: req.get('x-probe') });
      },
    );
    const answer = await fetch(`${url}/a/b?q=1`, { headers: { 'x-probe': 'yes' } });
    expect(answer.status).toBe(201);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await answer.json()).toEqual({ q: '1', path: '/a/b', accept: 'yes' });
    expect(links).toEqual([1, 1]);
  });

  it('when messages some other server built are lent the helpers, then Express\'s helpers answer there too', async () => {
    const app = express();
    const classes = messageClasses(app);
    const url = await serve(
      (listener) => createServer(listener),
      (req, res) => {
        lendHelpers(app, classes, req, res);
        res.status(202).json({ original: req.originalUrl, same: res.req === req });
      },
    );
    const answer = await fetch(`${url}/x?y=2`);
    expect(answer.status).toBe(202);
    expect(await answer.json()).toEqual({ original: '/x?y=2', same: true });
  });
});
