/**
 * The one module that reaches into Express's request and response objects. mds uses Express's
 * helpers (`req.query`, `res.json`, `res.status`, its settings), not its router (app.ts), and lends
 * them to Node's own messages without Express's per-request prototype swap:
 *
 * - `messageClasses(app)`: Node's `IncomingMessage` and `ServerResponse` with the app's helpers copied
 *   onto one prototype each, for `http.createServer`'s `IncomingMessage`/`ServerResponse` options. A
 *   message is then one link from Node's own prototype, as fast in Node's write path as a bare one,
 *   and needs no change of prototype (which costs an object its shape). docs/decisions.md gives what
 *   this buys, measured.
 * - `lendHelpers`: what Express's own `app.handle` sets on each message before its router runs
 *   (`req.res`, `res.req`, `res.locals`, `originalUrl`, `baseUrl`), and the prototype swap itself
 *   for a message some other server built.
 *
 * It relies on Express's layout: `app.request`/`app.response` are objects whose prototype chain ends
 * at Node's message prototypes, holding the helpers as own properties. test/unit/express-messages.test.ts
 * pins the version and checks that layout, so an upgrade that changes it fails there first.
 */
import { IncomingMessage, ServerResponse } from 'node:http';
import type { Express, Request, Response } from 'express';

/** The version whose layout this module was written against (checked by the test, not at runtime). */
export const LENT_EXPRESS_VERSION = '5.3.0';

/** Node's request and response classes for `http.createServer`'s `IncomingMessage` and `ServerResponse` options. */
export interface MessageClasses {
  IncomingMessage: typeof IncomingMessage;
  ServerResponse: typeof ServerResponse;
}

/**
 * Node's request and response classes with `app`'s request and response helpers (Express's, with the
 * app's settings). The constructors are functions calling Node's, as Node's own subclasses are, not
 * `class extends`, which costs each message more than Node's own classes do.
 */
export function messageClasses(app: Express): MessageClasses {
  const AppRequest = derive(IncomingMessage);
  const AppResponse = derive(ServerResponse);
  for (const [target, helpers, base] of [
    [AppRequest.prototype, app.request, IncomingMessage.prototype],
    [AppResponse.prototype, app.response, ServerResponse.prototype],
  ] as const) {
    // Express's helpers and the app's own link (`app`), outermost first so the nearer ones win.
    const chain: object[] = [];
    for (let at: object | null = helpers; at !== null && at !== base; at = Object.getPrototypeOf(at) as object | null) chain.unshift(at);
    for (const link of chain) Object.defineProperties(target, Object.getOwnPropertyDescriptors(link));
  }
  return { IncomingMessage: AppRequest, ServerResponse: AppResponse };
}

/**
 * Readies a request and its response for Express's helpers, as Express's `app.handle` does: a message
 * built by `messages` has them already; any other gets the app's prototypes.
 */
export function lendHelpers(app: Express, messages: MessageClasses, request: Request, response: Response): void {
  if (!(request instanceof messages.IncomingMessage) && Object.getPrototypeOf(request) !== app.request) Object.setPrototypeOf(request, app.request);
  if (!(response instanceof messages.ServerResponse) && Object.getPrototypeOf(response) !== app.response) Object.setPrototypeOf(response, app.response);
  request.res = response;
  response.req = request;
  response.locals = Object.create(null) as Record<string, unknown>;
  request.originalUrl = request.url ?? '/';
  request.baseUrl = '';
}

/**
 * A constructor whose instances are `Base`'s, with a prototype of their own: a function calling `Base`
 * on the new object when `Base` is a function constructor (Node's message classes are), else a
 * derived class.
 */
function derive<T extends abstract new (...args: never[]) => object>(Base: T): T {
  if (Function.prototype.toString.call(Base).startsWith('class')) {
    // @ts-expect-error -- a mixin-style subclass of a constructor type; only reached if Node's classes become classes.
    return class extends Base {} as T;
  }
  const base = Base as unknown as (this: object, ...args: unknown[]) => void;
  function Derived(this: object, ...args: unknown[]): void {
    base.apply(this, args);
  }
  Derived.prototype = Object.create(Base.prototype as object, { constructor: { value: Derived, writable: true, configurable: true } }) as object;
  Object.setPrototypeOf(Derived, Base);
  return Derived as unknown as T;
}
