/**
 * A stand-in for Yahoo Finance's chart API on 127.0.0.1: it replays recorded response bodies from a
 * fixtures directory and can be switched to fail in the ways a real upstream fails.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

/**
 * - `replay`: `/v8/finance/chart/<symbol>` answers the recorded body for that symbol (200), or the
 *   recorded 404 body for a symbol without a fixture.
 * - `error500`: 500 with a short text body.
 * - `rate-limited`: 429 with `Retry-After: <retryAfterSeconds>`.
 * - `garbage`: 200 `application/json` whose body is not JSON.
 * - `unexpected`: 200 JSON of another shape (Yahoo's `finance.error` envelope).
 * - `hang`: reads the request and never answers (until `close()`).
 * - `refuse`: the listening socket is closed, so connections are refused.
 */
export type FakeUpstreamMode = 'replay' | 'error500' | 'rate-limited' | 'garbage' | 'unexpected' | 'hang' | 'refuse';

/** One request the fake upstream received. */
export interface RecordedRequest {
  method: string;
  /** The raw request target, percent-encoding untouched (`/v8/finance/chart/%5EGSPC?interval=1d&range=1d`). */
  url: string;
  headers: IncomingHttpHeaders;
}

export interface FakeUpstream {
  /** `http://127.0.0.1:<port>`; stays the same across `refuse` and `restart()`. */
  readonly baseUrl: string;
  readonly mode: FakeUpstreamMode;
  /**
   * Switches the behaviour for the next requests. `refuse` stops listening (and drops open
   * connections, so kept-alive sockets cannot sneak requests in); any other mode listens again.
   */
  setMode(mode: FakeUpstreamMode): Promise<void>;
  /** How many requests arrived so far. */
  readonly requests: number;
  /** Every request that arrived, oldest first. */
  readonly requestLog: readonly RecordedRequest[];
  /** Listens again on the same port after `refuse`, in `replay` mode. */
  restart(): Promise<void>;
  /** Stops listening and destroys every connection, hanging ones included. */
  close(): Promise<void>;
}

export interface FakeUpstreamOptions {
  /**
   * Directory of recorded bodies: `chart-<encodeURIComponent(symbol)>.json` serves that symbol,
   * `yahoo-chart-<symbol>-200.json` too, and `yahoo-chart-404.json` is the body for unknown symbols.
   */
  fixturesDir: string;
  /** The `Retry-After` seconds of `rate-limited` mode (default 7). */
  retryAfterSeconds?: number;
}

const CHART_PATH = /^\/v8\/finance\/chart\/([^/?]+)$/;
const DEFAULT_404 = '{"chart":{"result":null,"error":{"code":"Not Found","description":"No data found, symbol may be delisted"}}}';

/** Loads the fixtures and starts listening on an ephemeral port of 127.0.0.1. */
export async function startFakeUpstream(options: FakeUpstreamOptions): Promise<FakeUpstream> {
  const bodies = loadFixtures(options.fixturesDir);
  const notFoundBody = bodies.notFound ?? DEFAULT_404;
  const retryAfter = String(options.retryAfterSeconds ?? 7);
  let mode: FakeUpstreamMode = 'replay';
  let listening = false;
  const requestLog: RecordedRequest[] = [];

  const server: Server = createServer((req, res) => {
    requestLog.push({ method: req.method ?? 'GET', url: req.url ?? '', headers: req.headers });
    // No keep-alive: a client must not hold a pooled socket that `refuse` would cut under it, so
    // that a refused upstream is always seen as a refused connection.
    res.setHeader('connection', 'close');
    const json = (status: number, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json;charset=utf-8', ...headers });
      res.end(body);
    };
    switch (mode) {
      case 'hang':
        return;
      case 'error500':
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('Internal Server Error');
        return;
      case 'rate-limited':
        res.writeHead(429, { 'content-type': 'text/html;charset=utf-8', 'retry-after': retryAfter });
        res.end('Too Many Requests\r\n');
        return;
      case 'garbage':
        json(200, '<!doctype html><html><body>Will be right back...</body></html>');
        return;
      case 'unexpected':
        json(200, '{"finance":{"result":null,"error":{"code":"Unauthorized","description":"Invalid Crumb"}}}');
        return;
      default: {
        const path = (req.url ?? '').split('?')[0] ?? '';
        const match = CHART_PATH.exec(path);
        const symbol = match?.[1] !== undefined ? safeDecode(match[1]) : undefined;
        const body = symbol !== undefined ? bodies.bySymbol.get(symbol) : undefined;
        if (body !== undefined) json(200, body, { 'cache-control': 'public, max-age=10, stale-while-revalidate=20' });
        else json(404, notFoundBody);
      }
    }
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        listening = true;
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      if (!listening) return resolve();
      listening = false;
      server.close(() => resolve());
      server.closeAllConnections();
    });

  await listen(0);
  const port = (server.address() as AddressInfo).port;

  return {
    baseUrl: `http://127.0.0.1:${port}`,
    get mode() {
      return mode;
    },
    async setMode(next) {
      mode = next;
      if (next === 'refuse') await stop();
      else if (!listening) await listen(port);
    },
    get requests() {
      return requestLog.length;
    },
    get requestLog() {
      return requestLog;
    },
    async restart() {
      if (mode === 'refuse') mode = 'replay';
      if (!listening) await listen(port);
    },
    close: stop,
  };
}

function loadFixtures(dir: string): { bySymbol: Map<string, string>; notFound: string | undefined } {
  const bySymbol = new Map<string, string>();
  let notFound: string | undefined;
  for (const file of readdirSync(dir)) {
    const body = () => readFileSync(join(dir, file), 'utf8');
    if (file === 'yahoo-chart-404.json') notFound = body();
    const chart = /^chart-(.+)\.json$/.exec(file) ?? /^yahoo-chart-(.+)-200\.json$/.exec(file);
    if (chart?.[1] !== undefined) bySymbol.set(safeDecode(chart[1]), body());
  }
  return { bySymbol, notFound };
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
