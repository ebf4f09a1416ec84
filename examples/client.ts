/**
 * A typed client of the Market Data Service, built from the contract: `paths` and `components` are
 * generated from openapi.yaml (`npm run generate`), and openapi-fetch checks every path, parameter,
 * body and response field against them at compile time. Rename a field in the contract and this
 * file stops compiling.
 *
 * Run it against a service (the API key must be one of the service's API_KEYS):
 *
 *   MDS_USERNAME=admin MDS_PASSWORD=... MDS_API_KEY=... node --import tsx examples/client.ts http://127.0.0.1:8000
 */
import { pathToFileURL } from 'node:url';
import createClient from 'openapi-fetch';
import type { components, paths } from '../src/generated/api.js';

type ErrorEnvelope = components['schemas']['Error'];
type Quote = components['schemas']['Quote'];

export interface Credentials {
  username: string;
  password: string;
  /** A key from the service's API_KEYS. */
  apiKey: string;
}

/** What `main` did, step by step; the statuses are the HTTP statuses the service answered. */
export interface ClientSummary {
  login: { status: number; username: string; isAdmin: boolean; expiresInS: number; mustChangePassword: boolean };
  adminStatus: { status: number; version: string; cacheMode: components['schemas']['CacheStatus']['mode']; users: number };
  users: { status: number; usernames: string[] };
  indices: {
    status: number;
    xCache: string | null;
    etag: string;
    source: components['schemas']['IndicesResponse']['source'];
    quotes: Array<Pick<Quote, 'symbol' | 'price' | 'change_percent'>>;
  };
  revalidated: { status: number; xCache: string | null };
  quotes: { status: number; symbols: string[]; missing: string[] };
  quote: { status: number; symbol: string; marketState: Quote['market_state']; instrumentType: Quote['instrument_type'] };
  history: { status: number; interval: components['schemas']['HistoryInterval']; candles: number; timezone: string };
  search: { status: number; symbols: string[] };
  markets: { status: number; markets: Array<Pick<components['schemas']['Market'], 'market' | 'state'>> };
  unknownSymbol: { status: number; error: string };
  failedLogin: { status: number; code: number; error: string };
}

/** A failure answered by the service, carrying its error envelope. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly envelope: ErrorEnvelope,
  ) {
    super(`HTTP ${status}: ${envelope.error}`);
    this.name = 'ApiError';
  }
}

/** The success body, or an ApiError with the envelope of the failure. */
function unwrap<T>(what: string, result: { data?: T; error?: ErrorEnvelope; response: Response }): T {
  if (result.data !== undefined) return result.data;
  if (result.error !== undefined) throw new ApiError(result.response.status, result.error);
  throw new Error(`${what}: unexpected HTTP ${result.response.status} without a body`);
}

function percent(value: number | null): string {
  if (value === null) return '     -';
  return `${value >= 0 ? '+' : ''}${value.toFixed(2)}%`;
}

/**
 * Walks through the API: log in, call an admin endpoint with the token and another with the API
 * key, read the indices, revalidate them with their ETag, read quotes of any symbol, history,
 * search and the trading calendar, and show a failure's envelope.
 */
export async function main(baseUrl: string, credentials: Credentials, log: (line: string) => void = console.log): Promise<ClientSummary> {
  const client = createClient<paths>({ baseUrl });

  // 1. Log in: the answer carries the bearer token.
  const loginResult = await client.POST('/api/auth/login', {
    body: { username: credentials.username, password: credentials.password },
  });
  const login = unwrap('login', loginResult);
  log(`logged in as ${login.username} (admin: ${login.is_admin}); the token expires in ${login.expires_in} s`);
  if (login.must_change_password) log('this is the default administrator with DEFAULT_ADMIN_PASSWORD: change it with POST /api/auth/change-password');
  const bearer = { Authorization: `Bearer ${login.access_token}` };

  // 2. An administrator endpoint with the bearer token.
  const statusResult = await client.GET('/api/admin/status', { headers: bearer });
  const status = unwrap('admin status', statusResult).data;
  log(`service ${status.version}: cache in ${status.cache.mode} (${status.cache.hits} hits, ${status.cache.misses} misses), ${status.users.count} users`);

  // 3. Another one with the API key instead of a token.
  const usersResult = await client.GET('/api/admin/users', { headers: { 'X-API-Key': credentials.apiKey } });
  const users = unwrap('list users', usersResult).data;
  log(`users: ${users.map((u) => `${u.username}${u.is_admin ? ' (admin)' : ''}`).join(', ')}`);

  // 4. Public market data, with the cache headers.
  const indicesResult = await client.GET('/api/indices');
  const indices = unwrap('indices', indicesResult);
  const etag = indicesResult.response.headers.get('ETag');
  if (etag === null) throw new Error('indices: the answer has no ETag');
  const xCache = indicesResult.response.headers.get('X-Cache');
  log(`${indices.data.length} quotes from ${indices.source} (X-Cache: ${xCache}, ETag: ${etag})`);
  for (const quote of indices.data) log(`  ${quote.symbol.padEnd(10)} ${quote.price.toFixed(2).padStart(10)} ${percent(quote.change_percent)}`);

  // 5. Revalidate: the same ETag in If-None-Match gets 304 and no body while the data is unchanged.
  const again = await client.GET('/api/indices', { params: { header: { 'If-None-Match': etag } } });
  log(`revalidated with If-None-Match: HTTP ${again.response.status}`);

  // 6. Quotes of any symbols, in one batch: answered in request order, unknown symbols under `missing`.
  const quotesResult = await client.GET('/api/quotes', { params: { query: { symbols: '^GSPC,AAPL,NOSUCH' } } });
  const quotes = unwrap('quotes', quotesResult);
  log(`batch: ${quotes.data.map((q) => `${q.symbol} ${q.price}`).join(', ')}; missing: ${quotes.missing.join(', ') || 'none'}`);

  // 7. One quote, with its market's state.
  const quoteResult = await client.GET('/api/quotes/{symbol}', { params: { path: { symbol: 'aapl' } } });
  const quote = unwrap('quote', quoteResult).data;
  log(`${quote.symbol} (${quote.instrument_type} on ${quote.exchange}, market ${quote.market_state}): ${quote.price} ${quote.currency}`);

  // 8. Daily candles of the last month.
  const historyResult = await client.GET('/api/history/{symbol}', { params: { path: { symbol: 'AAPL' }, query: { interval: '1d', range: '1mo' } } });
  const historyBody = unwrap('history', historyResult);
  // The contract also offers the candles as CSV (format=csv); asked without it, the answer is JSON.
  if (typeof historyBody === 'string') throw new Error('history: expected JSON, got CSV');
  const history = historyBody.data;
  const last = history.candles.at(-1);
  log(`${history.candles.length} daily candles of ${history.symbol} (${history.timezone}); last close ${last?.close ?? 'n/a'}`);

  // 9. Find an instrument by name.
  const searchResult = await client.GET('/api/search', { params: { query: { q: 'apple', limit: 5 } } });
  const found = unwrap('search', searchResult).data;
  log(`search 'apple': ${found.map((r) => `${r.symbol} (${r.name})`).join(', ') || 'nothing'}`);

  // 10. The trading calendar.
  const marketsResult = await client.GET('/api/markets');
  const markets = unwrap('markets', marketsResult).data;
  log(`markets: ${markets.map((m) => `${m.market} ${m.state}`).join(', ')}`);

  // 11. An unknown symbol is a 404 envelope.
  const unknown = await client.GET('/api/quotes/{symbol}', { params: { path: { symbol: 'NOSUCH' } } });
  if (unknown.error === undefined) throw new Error('an unknown symbol was quoted');
  log(`an unknown symbol: HTTP ${unknown.response.status}: ${unknown.error.error}`);

  // 12. A failure: every error has the same envelope, typed from the contract.
  const failed = await client.POST('/api/auth/login', {
    body: { username: credentials.username, password: `${credentials.password}-wrong` },
  });
  if (failed.error === undefined) throw new Error('a login with a wrong password succeeded');
  log(`a wrong password: HTTP ${failed.response.status}, code ${failed.error.code}: ${failed.error.error}`);

  return {
    login: {
      status: loginResult.response.status,
      username: login.username,
      isAdmin: login.is_admin,
      expiresInS: login.expires_in,
      mustChangePassword: login.must_change_password,
    },
    adminStatus: { status: statusResult.response.status, version: status.version, cacheMode: status.cache.mode, users: status.users.count },
    users: { status: usersResult.response.status, usernames: users.map((u) => u.username) },
    indices: {
      status: indicesResult.response.status,
      xCache,
      etag,
      source: indices.source,
      quotes: indices.data.map((q) => ({ symbol: q.symbol, price: q.price, change_percent: q.change_percent })),
    },
    revalidated: { status: again.response.status, xCache: again.response.headers.get('X-Cache') },
    quotes: { status: quotesResult.response.status, symbols: quotes.data.map((q) => q.symbol), missing: quotes.missing },
    quote: { status: quoteResult.response.status, symbol: quote.symbol, marketState: quote.market_state, instrumentType: quote.instrument_type },
    history: { status: historyResult.response.status, interval: history.interval, candles: history.candles.length, timezone: history.timezone },
    search: { status: searchResult.response.status, symbols: found.map((r) => r.symbol) },
    markets: { status: marketsResult.response.status, markets: markets.map((m) => ({ market: m.market, state: m.state })) },
    unknownSymbol: { status: unknown.response.status, error: unknown.error.error },
    failedLogin: { status: failed.response.status, code: failed.error.code, error: failed.error.error },
  };
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const baseUrl = process.argv[2] ?? 'http://127.0.0.1:8000';
  main(baseUrl, { username: required('MDS_USERNAME'), password: required('MDS_PASSWORD'), apiKey: required('MDS_API_KEY') }).catch(
    (err: unknown) => {
      if (err instanceof ApiError) console.error(`failed: HTTP ${err.status}, code ${err.envelope.code}: ${err.envelope.error}`);
      else console.error(`failed: ${err instanceof Error ? err.message : String(err)}`);
      process.exitCode = 1;
    },
  );
}
