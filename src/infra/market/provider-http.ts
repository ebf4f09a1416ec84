/**
 * What the provider adapters share: one HTTP GET with a timeout that turns every way a call can fail
 * into an `UpstreamFailureError` with its reason, the parsing helpers that never let a bad body
 * through as data, and the rules that make every provider's bars and quotes look alike (bar times,
 * rounding, market state).
 */
import { rangeStartMs } from '../../domain/history-ranges.js';
import { MARKETS, marketStatus, tradingSessions, type MarketCode } from '../../domain/market-calendar.js';
import type { HistoryQuery, HistoryRange, MarketState } from '../../domain/ports/market-data.js';
import type { ProviderKey, ProviderKeyPool } from '../../domain/ports/providers.js';
import { UpstreamFailureError, type UpstreamFailureReason } from '../../domain/upstream-failure.js';
import { UpstreamRateLimitedError, UpstreamRequestRefusedError } from './upstream-guard-errors.js';
import { DAY_MS } from '../../domain/durations.js';

/** Options every HTTP adapter takes. */
export interface ProviderHttpOptions {
  /** Scheme and host (and path prefix, if any) of the API; a trailing slash is ignored. */
  baseUrl: string;
  /** Limit of each request, body included, in milliseconds. */
  timeoutMs: number;
  /** The fetch implementation; the global `fetch` by default. */
  fetch?: typeof fetch;
  /** Clock in epoch milliseconds (default `Date.now`). */
  now?: () => number;
}

/** What one GET answered. */
export interface ProviderResponse {
  status: number;
  text: string;
  headers: Headers;
}

/** Identity of the adapter, for messages and errors. */
interface Identity {
  /** Short name (`polygon`): `source`, errors' `provider`. */
  provider: string;
  /** Name in messages (`Polygon`). */
  label: string;
}

/** The HTTP side of an adapter. Never puts a key or a URL in a message. */
export class ProviderHttp {
  readonly provider: string;
  readonly label: string;
  readonly now: () => number;
  readonly #baseUrl: string;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(identity: Identity, options: ProviderHttpOptions) {
    this.provider = identity.provider;
    this.label = identity.label;
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#timeoutMs = options.timeoutMs;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.now = options.now ?? Date.now;
  }

  /**
   * GETs `path` (with its query) and reads the whole body. Fails with `timeout` or `refused`; any
   * status is returned for the adapter to judge. fetch asks for gzip and inflates it by itself.
   */
  async get(path: string, what: string, headers: Record<string, string> = {}, keyIndex?: number): Promise<ProviderResponse> {
    return this.#request(path, what, headers, keyIndex, async (response) => response.text());
  }

  /** `get` for a binary body (an archive): its bytes; a status other than 200 leaves them empty. */
  async getBytes(path: string, what: string): Promise<ProviderResponse & { bytes: Uint8Array }> {
    let bytes = new Uint8Array(0);
    const response = await this.#request(path, what, {}, undefined, async (r) => {
      if (r.status !== 200) return r.text();
      bytes = new Uint8Array(await r.arrayBuffer());
      return '';
    });
    return { ...response, bytes };
  }

  async #request(path: string, what: string, headers: Record<string, string>, keyIndex: number | undefined, read: (response: Response) => Promise<string>): Promise<ProviderResponse> {
    try {
      const response = await this.#fetch(`${this.#baseUrl}${path}`, {
        headers: { Accept: 'application/json, text/csv, text/xml;q=0.9, */*;q=0.8', ...headers },
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      // Read the body even for error statuses: it frees the connection and may explain the failure.
      const text = await read(response);
      return { status: response.status, text, headers: response.headers };
    } catch (err) {
      const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
      const code = errorCode(err);
      const detail = timedOut ? `timed out after ${this.#timeoutMs} ms` : code === 'ECONNREFUSED' ? 'connection refused' : `network error (${code ?? 'unknown'})`;
      throw this.failure(timedOut ? 'timeout' : 'refused', what, detail, { cause: err, ...(keyIndex !== undefined ? { keyIndex } : {}) });
    }
  }

  /** An `UpstreamFailureError` of this provider. */
  failure(
    reason: UpstreamFailureReason,
    what: string,
    detail: string,
    options: { keyIndex?: number; retryAfterSeconds?: number; cause?: unknown } = {},
  ): UpstreamFailureError {
    const message = `${this.label} ${what}: ${detail}`;
    if (reason === 'throttled') return new UpstreamRateLimitedError(message, options.retryAfterSeconds, { provider: this.provider, ...pick(options) });
    return new UpstreamFailureError(reason, message, { provider: this.provider, ...options });
  }

  /**
   * The failure a status other than the expected one stands for: 429 `throttled` (with the
   * `Retry-After`), 401/403 `unauthorized` (naming the key), 5xx `server_error`, anything else `garbage`
   * (another 4xx as `UpstreamRequestRefusedError`, which the breaker does not count).
   * `limitMessage` is the provider's "daily limit" wording, found in the body when the adapter knows it.
   */
  statusFailure(what: string, response: ProviderResponse, key: ProviderKey | undefined, limitMessage?: string): UpstreamFailureError {
    const detail = `HTTP ${response.status}${limitMessage ? ` (${limitMessage})` : ''}`;
    const keyIndex = key ? { keyIndex: key.index } : {};
    if (limitMessage !== undefined) return this.failure('limit_reached', what, detail, keyIndex);
    if (response.status === 429) {
      const retryAfterSeconds = parseRetryAfter(response.headers.get('retry-after'), this.now());
      return this.failure('throttled', what, detail, { ...keyIndex, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) });
    }
    if (response.status === 401 || response.status === 403) return this.failure('unauthorized', what, `${detail}: key #${key?.index ?? '-'} refused`, keyIndex);
    if (response.status >= 500) return this.failure('server_error', what, detail, keyIndex);
    // Another 4xx refuses this one request, not the service: a `garbage` failure the breaker does not count.
    if (response.status >= 400) return new UpstreamRequestRefusedError(`${this.label} ${what}: unexpected ${detail}`, { provider: this.provider, ...keyIndex });
    return this.failure('garbage', what, `unexpected ${detail}`, keyIndex);
  }

  /** The body as JSON, or a `garbage` failure. */
  json(response: ProviderResponse, what: string): unknown {
    try {
      return JSON.parse(response.text);
    } catch (err) {
      throw this.failure('garbage', what, 'unparsable response body (not JSON)', { cause: err });
    }
  }

  /** A `garbage` failure for a body of the wrong shape. */
  shape(what: string, detail: string): UpstreamFailureError {
    return this.failure('garbage', what, `unexpected response shape: ${detail}`);
  }

  /**
   * A key from `pool` for the next call, or the failure that says why there is none, with the time the
   * first key comes back (a daily limit: the next UTC midnight) as its Retry-After.
   */
  async key(pool: ProviderKeyPool, what: string): Promise<ProviderKey> {
    const key = await pool.take();
    if (key) return key;
    const reason = pool.exhaustedReason() ?? 'unauthorized';
    const now = this.now();
    const backAtMs = Math.min(...pool.status().map((status) => (status.untilMs !== undefined && status.untilMs > now ? status.untilMs : Infinity)));
    const retryAfter = Number.isFinite(backAtMs) ? { retryAfterSeconds: Math.ceil((backAtMs - now) / 1000) } : {};
    throw this.failure(reason, what, pool.size === 0 ? 'no API key configured' : `every API key is set aside (${reason})`, retryAfter);
  }
}

function pick(options: { keyIndex?: number; cause?: unknown }): { keyIndex?: number; cause?: unknown } {
  return { ...(options.keyIndex !== undefined ? { keyIndex: options.keyIndex } : {}), ...(options.cause !== undefined ? { cause: options.cause } : {}) };
}

/** The system error code behind a failed fetch (undici wraps it in `cause`, sometimes twice). */
export function errorCode(err: unknown): string | undefined {
  for (let current: unknown = err, depth = 0; isRecord(current) && depth < 4; current = current.cause, depth++) {
    if (typeof current.code === 'string') return current.code;
    if (Array.isArray(current.errors)) {
      const nested = current.errors.map(errorCode).find((c) => c !== undefined);
      if (nested) return nested;
    }
  }
  return undefined;
}

/** `Retry-After` as seconds: either delay-seconds or an HTTP date. */
export function parseRetryAfter(header: string | null, nowMs: number): number | undefined {
  if (header === null) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, (date - nowMs) / 1000);
}

/**
 * `value` as exactly one path segment of an upstream URL, or undefined when no encoding can make it one:
 * `.` and `..` are dot segments URL parsers resolve away (their `%2e` spellings too, so encoding the
 * dots would not help), and an empty one merges with its neighbour. Everything else is percent-encoded whole (`/`, `?`, `#`, `%` included).
 * The symbol rule refuses all of these already; this keeps every adapter honest on its own.
 */
export function pathSegment(value: string): string | undefined {
  if (value === '' || value === '.' || value === '..') return undefined;
  return encodeURIComponent(value);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** A number from a JSON number or a decimal string (Alpha Vantage, ECB), else `undefined`. */
export function numeric(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value !== 'string' || !/^\s*-?\d+(\.\d+)?([eE][-+]?\d+)?\s*$/.test(value)) return undefined;
  return Number(value);
}

export function nonEmptyString(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim().length > 0 ? value.trim() : undefined;
}

export function roundTo(value: number, decimals: number): number {
  const factor = 10 ** decimals;
  return Math.round(value * factor) / factor;
}

/** Decimals in the shortest spelling of `value` (`130.28` -> 2): the precision the provider sent it with. */
export function decimalsOf(value: number): number {
  const text = String(value);
  const exponent = /e([-+]\d+)$/.exec(text);
  const mantissa = text.replace(/e[-+]\d+$/, '');
  const dot = mantissa.indexOf('.');
  const digits = dot < 0 ? 0 : mantissa.length - dot - 1;
  return Math.max(0, digits - (exponent ? Number(exponent[1]) : 0));
}

/** `price - prevClose` and its percentage, rounded to the inputs' own precision (no float noise). */
export function changeOf(price: number, prevClose: number): { change: number; change_percent: number } {
  const decimals = Math.min(12, Math.max(decimalsOf(price), decimalsOf(prevClose)));
  const change = roundTo(price - prevClose, decimals);
  return { change, change_percent: prevClose === 0 ? 0 : roundTo(((price - prevClose) / prevClose) * 100, 2) };
}

/** The IANA zone of a market, as `/api/markets` names it. */
export function timezoneOfMarket(market: MarketCode): string {
  return MARKETS.find((m) => m.code === market)?.timezone ?? 'UTC';
}

/** The market state of `market` at `nowMs` (crypto: always open). */
export function marketStateOf(market: MarketCode, nowMs: number): MarketState {
  return marketStatus(market, nowMs).state;
}

/**
 * When a daily (or weekly, monthly) bar labelled with the calendar date `date` (`YYYY-MM-DD`) starts,
 * as Yahoo stamps it: the open of the market's first regular session on or after that date (a
 * weekly bar labelled Sunday starts Monday at the open); crypto and FX bars at 00:00 UTC of the date,
 * as every provider here cuts them. Every provider's bar of one session thus gets one time, so
 * answers from different providers line up.
 */
export function dailyBarStartMs(market: MarketCode, date: string): number {
  const midnight = Date.parse(`${date}T00:00:00Z`);
  if (market === 'CRYPTO' || market === 'FX') return midnight;
  const session = tradingSessions(market, midnight, midnight + 8 * DAY_MS).find((s) => s.date >= date);
  return session?.segments[0]?.startMs ?? midnight;
}

/** When the session of `date` ends: its regular close, or the end of the UTC day for crypto and FX. */
export function sessionEndMs(market: MarketCode, date: string): number {
  const midnight = Date.parse(`${date}T00:00:00Z`);
  if (market === 'CRYPTO' || market === 'FX') return midnight + DAY_MS;
  const session = tradingSessions(market, midnight, midnight + 8 * DAY_MS).find((s) => s.date >= date);
  return session?.segments[session.segments.length - 1]?.endMs ?? midnight + DAY_MS;
}

/** The window `[startMs, endMs)` a history query asks for, in epoch ms. */
export function windowOf(query: HistoryQuery, nowMs: number): { startMs: number; endMs: number } {
  if (query.range === undefined) return { startMs: query.startMs ?? 0, endMs: query.endMs ?? nowMs };
  return { startMs: rangeStartMs(query.range, nowMs), endMs: nowMs };
}

/** `YYYY-MM-DD` (UTC) of an instant. */
export function isoDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** The last date inside a window whose end is exclusive. */
export function lastDateBefore(endMs: number): string {
  return isoDate(endMs - 1);
}

/** True when the bar starting at `timeMs` lies in `[startMs, endMs)`. */
export function inWindow(timeMs: number, window: { startMs: number; endMs: number }): boolean {
  return timeMs >= window.startMs && timeMs < window.endMs;
}
