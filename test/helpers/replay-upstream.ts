/**
 * A stand-in for any HTTP market-data provider on 127.0.0.1: it replays recorded response bodies by
 * request path (gzipped on the wire when the provider did it and the client accepts it), and can be
 * switched to fail the ways providers fail: 500, hang, 429 with Retry-After, a refused key (401/403,
 * for every key or for chosen ones), garbage, a refused connection, or any answer a test spells out.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { switchableListener } from './fake-upstream.js';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

/** One answer the server can give. */
export interface ReplayAnswer {
  status: number;
  contentType: string;
  body: string | Buffer;
  headers?: Record<string, string>;
  /** Gzip the body when the client accepts it (as Polygon and FMP do). */
  gzip?: boolean;
}

/** A recorded answer served for one path (and, when given, only when these query parameters match). */
export interface ReplayRoute extends ReplayAnswer {
  /** The exact path, or a pattern for paths that carry dates (`/v2/aggs/ticker/AAPL/range/1/day/…`). */
  path: string | RegExp;
  query?: Record<string, string>;
}

/**
 * - `replay`: the first route whose path (and query, if any) matches, else `notFound`.
 * - `error500`: 500 text. `hang`: never answers. `garbage`: 200 JSON content type, HTML body.
 * - `throttle`: 429 with `Retry-After: <retryAfterSeconds>` and the `throttleBody`.
 * - `unauthorized`: the `refusal` answer (401 by default) for every request.
 * - `custom`: the answer given to `answerWith` for every request.
 * - `refuse`: not listening: connections are refused.
 */
export type ReplayMode = 'replay' | 'error500' | 'hang' | 'garbage' | 'throttle' | 'unauthorized' | 'custom' | 'refuse';

export interface ReplayRequest {
  url: string;
  /** Path without the query. */
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  /** The key the request carried (`apiKey`/`apikey`/`token` parameter or an `Authorization` header), if any. */
  key: string | undefined;
}

export interface ReplayUpstream {
  readonly baseUrl: string;
  readonly requests: readonly ReplayRequest[];
  setMode(mode: ReplayMode): Promise<void>;
  /** Switches to `custom` mode with this answer. */
  answerWith(answer: ReplayAnswer): Promise<void>;
  /** In `replay` mode, requests carrying one of these keys get the `refusal` answer. */
  refuseKeys(keys: Iterable<string>): void;
  setRetryAfterSeconds(seconds: number): void;
  /** Adds routes (tests spell out answers built from documentation). */
  addRoutes(routes: ReplayRoute[]): void;
  close(): Promise<void>;
}

export interface ReplayUpstreamOptions {
  routes: ReplayRoute[];
  /** The answer for a path without a route. */
  notFound?: ReplayAnswer;
  /** The answer of `unauthorized` mode and of refused keys (401 JSON by default). */
  refusal?: ReplayAnswer;
  /** The body of `throttle` mode. */
  throttleBody?: string;
  retryAfterSeconds?: number;
}

/** The directory of the recorded provider bodies used by the tests. */
export const PROVIDER_FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'providers');

/** A recorded body from `test/fixtures/providers`, bytes untouched. */
export function fixture(file: string): Buffer {
  return readFileSync(join(PROVIDER_FIXTURES, file));
}

export async function startReplayUpstream(options: ReplayUpstreamOptions): Promise<ReplayUpstream> {
  const routes = [...options.routes];
  const notFound: ReplayAnswer = options.notFound ?? { status: 404, contentType: 'application/json', body: '{"error":"not found"}' };
  const refusal: ReplayAnswer = options.refusal ?? { status: 401, contentType: 'application/json', body: '{"error":"invalid key"}' };
  let mode: ReplayMode = 'replay';
  let custom: ReplayAnswer | undefined;
  let refusedKeys = new Set<string>();
  let retryAfter = String(options.retryAfterSeconds ?? 7);
  const requests: ReplayRequest[] = [];

  const send = (res: ServerResponse, answer: ReplayAnswer, acceptsGzip: boolean) => {
    const raw = typeof answer.body === 'string' ? Buffer.from(answer.body) : answer.body;
    const zipped = answer.gzip === true && acceptsGzip;
    const body = zipped ? gzipSync(raw) : raw;
    res.writeHead(answer.status, {
      'content-type': answer.contentType,
      'content-length': String(body.length),
      ...(zipped ? { 'content-encoding': 'gzip' } : {}),
      ...answer.headers,
    });
    res.end(body);
  };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://replay.invalid');
    const auth = req.headers.authorization;
    const key = url.searchParams.get('apiKey') ?? url.searchParams.get('apikey') ?? url.searchParams.get('token') ?? (auth ? auth.replace(/^(Bearer|Token)\s+/i, '') : undefined);
    const request: ReplayRequest = { url: req.url ?? '', path: url.pathname, query: url.searchParams, headers: req.headers, key: key ?? undefined };
    requests.push(request);
    res.setHeader('connection', 'close');
    const gzipOk = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
    switch (mode) {
      case 'hang':
        return;
      case 'error500':
        return send(res, { status: 500, contentType: 'text/plain', body: 'Internal Server Error' }, gzipOk);
      case 'garbage':
        return send(res, { status: 200, contentType: 'application/json', body: '<!doctype html><html><body>Will be right back...</body></html>' }, gzipOk);
      case 'throttle':
        return send(res, { status: 429, contentType: 'application/json', body: options.throttleBody ?? '{"error":"Too Many Requests"}', headers: { 'retry-after': retryAfter } }, gzipOk);
      case 'unauthorized':
        return send(res, refusal, gzipOk);
      case 'custom':
        return send(res, custom ?? notFound, gzipOk);
      default: {
        if (key !== undefined && refusedKeys.has(key)) return send(res, refusal, gzipOk);
        const route = routes.find((r) => (typeof r.path === 'string' ? r.path === url.pathname : r.path.test(url.pathname)) && Object.entries(r.query ?? {}).every(([k, v]) => url.searchParams.get(k) === v));
        return send(res, route ?? notFound, gzipOk);
      }
    }
  });
  const listener = await switchableListener(server);
  const port = listener.port;

  return {
    baseUrl: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    async setMode(next) {
      mode = next;
      if (next === 'refuse') await listener.stop();
      else if (!listener.listening) await listener.listen();
    },
    async answerWith(answer) {
      custom = answer;
      mode = 'custom';
      if (!listener.listening) await listener.listen();
    },
    refuseKeys(keys) {
      refusedKeys = new Set(keys);
    },
    setRetryAfterSeconds(seconds) {
      retryAfter = String(seconds);
    },
    addRoutes(more) {
      routes.unshift(...more);
    },
    close: () => listener.stop(),
  };
}
