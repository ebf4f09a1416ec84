/**
 * A real HTTP server around a `PassportAuth`, so tests authenticate real requests (real headers parsed
 * by node:http and express) and read back the principal or the error it produced.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { AppError } from '../../src/domain/errors.js';
import type { PassportAuth } from '../../src/infra/auth/passport-auth.js';
import type { AuthCallback, Principal } from '../../src/domain/ports/accounts.js';

export type ProbeResult = { ok: true; principal: Principal } | { ok: false; error: string; code: string; message: string };

export interface AuthProbe {
  /** Sends GET /bearer (or /api-key) with `headers` and returns what the authenticator decided. */
  bearer(headers?: Record<string, string>): Promise<ProbeResult>;
  apiKey(headers?: Record<string, string>): Promise<ProbeResult>;
  close(): Promise<void>;
}

export async function startAuthProbe(auth: PassportAuth): Promise<AuthProbe> {
  const app = express();
  const route = (authenticate: (req: express.Request) => Promise<Principal>): express.RequestHandler => async (req, res) => {
    try {
      res.json({ ok: true, principal: await authenticate(req) } satisfies ProbeResult);
    } catch (err) {
      const body: ProbeResult =
        err instanceof AppError
          ? { ok: false, error: err.name, code: err.code, message: err.message }
          : { ok: false, error: 'unexpected', code: 'UNEXPECTED', message: String(err) };
      res.status(401).json(body);
    }
  };
  const settled = (check: (req: express.Request, done: AuthCallback) => void) => (req: express.Request) =>
    new Promise<Principal>((resolve, reject) => check(req, (err, principal) => (err ? reject(err) : principal ? resolve(principal) : reject(new Error('neither principal nor error')))));
  app.get('/bearer', route(settled((req, done) => auth.authenticateBearer(req, done))));
  app.get('/api-key', route(settled((req, done) => auth.authenticateApiKey(req, done))));

  const server: Server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const call = async (path: string, headers: Record<string, string> = {}) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers });
    return (await response.json()) as ProbeResult;
  };
  return {
    bearer: (headers) => call('/bearer', headers),
    apiKey: (headers) => call('/api-key', headers),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
