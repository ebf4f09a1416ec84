/**
 * A stand-in for Yahoo Finance's chart and search APIs on 127.0.0.1: it replays recorded responses
 * from a fixtures directory and can be switched to fail in the ways a real upstream fails.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

/**
 * - `replay`: `/v8/finance/chart/<symbol>` answers the recording for that symbol that best matches the
 *   request's `interval`, `range`, `period1` and `period2` (200), or the recorded 404 body for a symbol
 *   without one (or one listed by `setNotFound`); `/v1/finance/search` answers the recording for that
 *   `q` (case-insensitive), or an empty result.
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
  /** Arrival time, epoch milliseconds (`Date.now()` when the request's head was parsed). */
  at: number;
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
  /** Symbols answered with the 404 body in `replay` mode even when a recording exists (replaces the previous set). */
  setNotFound(symbols: Iterable<string>): void;
  /** Delay before every answer, in milliseconds (0 by default). */
  setLatencyMs(ms: number): void;
  /** The `Retry-After` seconds of `rate-limited` mode from now on. */
  setRetryAfterSeconds(seconds: number): void;
  /** Most requests that were being answered at the same time since the start (or the last reset). */
  readonly peakInFlight: number;
  /** Starts counting `peakInFlight` afresh. */
  resetPeakInFlight(): void;
  /** Listens again on the same port after `refuse`, in `replay` mode. */
  restart(): Promise<void>;
  /** Stops listening and destroys every connection, hanging ones included. */
  close(): Promise<void>;
}

export interface FakeUpstreamOptions {
  /**
   * Directory of recorded bodies: `chart-<encodeURIComponent(symbol)>.json` serves that symbol,
   * `yahoo-chart-<symbol>-200.json` too, and `yahoo-chart-404.json` is the body for unknown symbols.
   * Its `recorded/` subdirectory, when present, holds whole exchanges
   * (`{request: {method, path}, response: {status, headers, body}}`) replayed by request path.
   */
  fixturesDir: string;
  /** The `Retry-After` seconds of `rate-limited` mode (default 7). */
  retryAfterSeconds?: number;
}

const CHART_PATH = /^\/v8\/finance\/chart\/([^/?]+)$/;
const SEARCH_PATH = '/v1/finance/search';
const DEFAULT_404 = '{"chart":{"result":null,"error":{"code":"Not Found","description":"No data found, symbol may be delisted"}}}';
const EMPTY_SEARCH = '{"explains":[],"count":0,"quotes":[],"news":[],"nav":[],"lists":[],"researchReports":[],"totalTime":1}';
const JSON_TYPE = 'application/json;charset=utf-8';
/** The query parameters that tell two chart requests of one symbol apart. */
const CHART_SELECTORS = ['interval', 'range', 'period1', 'period2'] as const;

/** One response the fake upstream can give, and the request it was recorded for. */
interface Recording {
  query: URLSearchParams;
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Loads the fixtures and starts listening on an ephemeral port of 127.0.0.1. */
export async function startFakeUpstream(options: FakeUpstreamOptions): Promise<FakeUpstream> {
  const fixtures = loadFixtures(options.fixturesDir);
  const notFoundBody = fixtures.notFound ?? DEFAULT_404;
  let retryAfter = String(options.retryAfterSeconds ?? 7);
  let mode: FakeUpstreamMode = 'replay';
  let notFound = new Set<string>();
  let latencyMs = 0;
  let inFlight = 0;
  let peakInFlight = 0;
  const requestLog: RecordedRequest[] = [];

  const answer = (req: IncomingMessage, res: ServerResponse) => {
    const json = (status: number, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': JSON_TYPE, ...headers });
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
        const url = new URL(req.url ?? '/', 'http://fake.invalid');
        if (url.pathname === SEARCH_PATH) {
          const recording = fixtures.searches.get((url.searchParams.get('q') ?? '').toLowerCase());
          if (recording) json(recording.status, recording.body, recording.headers);
          else json(200, EMPTY_SEARCH);
          return;
        }
        const match = CHART_PATH.exec((req.url ?? '').split('?')[0] ?? '');
        const symbol = match?.[1] !== undefined ? safeDecode(match[1]) : undefined;
        const recording = symbol !== undefined && !notFound.has(symbol) ? bestChart(fixtures.charts.get(symbol) ?? [], url.searchParams) : undefined;
        if (recording) json(recording.status, recording.body, recording.headers);
        else json(404, notFoundBody);
      }
    }
  };

  const server: Server = createServer((req, res) => {
    requestLog.push({ method: req.method ?? 'GET', url: req.url ?? '', headers: req.headers, at: Date.now() });
    // No keep-alive: a client must not hold a pooled socket that `refuse` would cut under it, so
    // that a refused upstream is always seen as a refused connection.
    res.setHeader('connection', 'close');
    inFlight++;
    peakInFlight = Math.max(peakInFlight, inFlight);
    res.once('close', () => inFlight--);
    if (latencyMs > 0) setTimeout(() => answer(req, res), latencyMs);
    else answer(req, res);
  });
  const listener = await switchableListener(server);
  const port = listener.port;

  return {
    baseUrl: `http://127.0.0.1:${port}`,
    get mode() {
      return mode;
    },
    async setMode(next) {
      mode = next;
      if (next === 'refuse') await listener.stop();
      else if (!listener.listening) await listener.listen();
    },
    get requests() {
      return requestLog.length;
    },
    get requestLog() {
      return requestLog;
    },
    setNotFound(symbols) {
      notFound = new Set(symbols);
    },
    setLatencyMs(ms) {
      latencyMs = ms;
    },
    setRetryAfterSeconds(seconds) {
      retryAfter = String(seconds);
    },
    get peakInFlight() {
      return peakInFlight;
    },
    resetPeakInFlight() {
      peakInFlight = inFlight;
    },
    async restart() {
      if (mode === 'refuse') mode = 'replay';
      if (!listener.listening) await listener.listen();
    },
    close: () => listener.stop(),
  };
}

interface Fixtures {
  /** Chart recordings by symbol. */
  charts: Map<string, Recording[]>;
  /** Search recordings by lower-cased `q`. */
  searches: Map<string, Recording>;
  notFound: string | undefined;
}

function loadFixtures(dir: string): Fixtures {
  const charts = new Map<string, Recording[]>();
  const searches = new Map<string, Recording>();
  const addChart = (symbol: string, recording: Recording) => charts.set(symbol, [...(charts.get(symbol) ?? []), recording]);
  let notFound: string | undefined;
  for (const file of readdirSync(dir)) {
    const body = () => readFileSync(join(dir, file), 'utf8');
    if (file === 'yahoo-chart-404.json') notFound = body();
    const chart = /^chart-(.+)\.json$/.exec(file) ?? /^yahoo-chart-(.+)-200\.json$/.exec(file);
    // Body-only files were recorded for the quote request the provider makes.
    if (chart?.[1] !== undefined) {
      addChart(safeDecode(chart[1]), { query: new URLSearchParams('interval=1d&range=1d'), status: 200, headers: { 'cache-control': 'public, max-age=10, stale-while-revalidate=20' }, body: body() });
    }
  }

  const recordedDir = join(dir, 'recorded');
  if (existsSync(recordedDir)) {
    for (const file of readdirSync(recordedDir).filter((f) => f.endsWith('.json'))) {
      const exchange = JSON.parse(readFileSync(join(recordedDir, file), 'utf8')) as {
        request: { method: string; path: string };
        response: { status: number; headers: Record<string, string>; body: unknown };
      };
      const url = new URL(exchange.request.path, 'http://fake.invalid');
      const { 'content-length': _length, 'content-type': _type, ...headers } = exchange.response.headers;
      const recording: Recording = {
        query: url.searchParams,
        status: exchange.response.status,
        headers,
        body: typeof exchange.response.body === 'string' ? exchange.response.body : JSON.stringify(exchange.response.body),
      };
      if (url.pathname === SEARCH_PATH) searches.set((url.searchParams.get('q') ?? '').toLowerCase(), recording);
      const chart = CHART_PATH.exec(url.pathname);
      if (chart?.[1] !== undefined) addChart(safeDecode(chart[1]), recording);
    }
  }
  return { charts, searches, notFound };
}

/**
 * The recording whose selectors agree most with the request's: +1 for each selector both give the
 * same value, -1 for each one only one of them gives or they give differently.
 */
function bestChart(recordings: Recording[], query: URLSearchParams): Recording | undefined {
  let best: Recording | undefined;
  let bestScore = Number.NEGATIVE_INFINITY;
  for (const recording of recordings) {
    let score = 0;
    for (const key of CHART_SELECTORS) {
      const mine = recording.query.get(key);
      const theirs = query.get(key);
      if (mine === null && theirs === null) continue;
      score += mine === theirs ? 1 : -1;
    }
    if (score > bestScore) {
      best = recording;
      bestScore = score;
    }
  }
  return best;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * Listens on an ephemeral loopback port, and can stop listening (connections are refused, open ones
 * dropped) and listen again on the same port: how the stand-in upstreams play a host that is down.
 */
export async function switchableListener(server: Server): Promise<{ readonly port: number; readonly listening: boolean; listen(): Promise<void>; stop(): Promise<void> }> {
  let listening = false;
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        listening = true;
        resolve();
      });
    });
  await listen(0);
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    get listening() {
      return listening;
    },
    listen: () => listen(port),
    stop: () =>
      new Promise<void>((resolve) => {
        if (!listening) return resolve();
        listening = false;
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
