/**
 * The metrics listener: its own `node:http` server (METRICS_HOST:METRICS_PORT, loopback by default),
 * so metrics are never served on the API port by accident. It answers `GET /metrics` and nothing else.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toErrorResponse, writeEnvelope } from './envelope.js';
import type { Logger } from '../domain/ports/logger.js';
import type { MetricsSource } from '../domain/ports/metrics.js';

/** A listening metrics server. */
export interface MetricsServer {
  /** `http://host:port/metrics`. */
  url: string;
  server: Server;
  close(): Promise<void>;
}

/**
 * Listens on `host:port` and answers `GET /metrics` (and HEAD) from `source`; other paths are the
 * 404 envelope, other methods 405. Rejects when the address cannot be bound.
 */
export async function startMetricsServer(options: { host: string; port: number; source: MetricsSource; logger: Logger }): Promise<MetricsServer> {
  const { source, logger } = options;
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const method = req.method ?? 'GET';
    const fail = (err: unknown) => {
      const r = toErrorResponse(err, { method, path });
      if (r.unexpected) logger.error({ err, req: { method, url: path } }, 'metrics scrape failed');
      writeEnvelope(res, r);
    };
    if (path !== '/metrics') return fail(Object.assign(new Error('not found'), { status: 404 }));
    if (method !== 'GET' && method !== 'HEAD') return fail(Object.assign(new Error('method not allowed'), { status: 405, headers: { Allow: 'GET, HEAD' } }));
    source.render().then((text) => {
      res.writeHead(200, { 'Content-Type': source.contentType, 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store' });
      res.end(text);
    }, fail);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}/metrics`;
  return {
    url,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
