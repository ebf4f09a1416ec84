/**
 * `createApp` alone over a real socket, with handlers the test chooses and no credentials accepted:
 * for what the app itself does (envelopes, the request log) without the rest of the service.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestHandler } from 'express';
import { createApp } from '../../src/http/app.js';
import type { Contract } from '../../src/http/contract.js';
import type { Handlers } from '../../src/http/handlers/types.js';
import type { Logger } from '../../src/infra/logger.js';

/** Every operation of `contract` answered by `handler`, except those named in `overrides`. */
export function handlersOf(contract: Contract, handler: unknown, overrides: Record<string, unknown> = {}): Handlers {
  return { ...Object.fromEntries(contract.operations.map((op) => [op.operationId, handler])), ...overrides } as unknown as Handlers;
}

/** Listens on a free loopback port; close `server` when done. */
export async function startBareApp(contract: Contract, handlers: Handlers, logger: Logger, options: { console?: RequestHandler } = {}): Promise<{ server: Server; url: string }> {
  const app = createApp({
    ...options,
    contract,
    handlers,
    logger,
    bodyLimitBytes: 16384,
    authenticator: {
      authenticateBearer: (_req, done) => done(new Error('unused')),
      authenticateApiKey: (_req, done) => done(new Error('unused')),
    },
  });
  const server = createServer(app).listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
