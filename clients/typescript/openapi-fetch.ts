/**
 * A client generated from openapi.yaml with openapi-typescript (types) and openapi-fetch (calls), as a
 * user would make it:
 *
 *   npx openapi-typescript openapi.yaml -o api.ts
 *
 * Every call below is checked against `api.ts` by tsc; each answer is also checked at run time, so a
 * type that said something else than the service sends fails here. Run beside `api.ts` with
 * MDS_URL, MDS_USERNAME, MDS_PASSWORD and MDS_API_KEY set; prints the answers as one JSON line.
 * test/e2e/generated-clients.test.ts runs it against the real service.
 */
import createClient from 'openapi-fetch';
import type { components, paths } from './api.js';

type Schemas = components['schemas'];

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
}

function check(what: string, ok: boolean): void {
  if (!ok) throw new Error(`${what}: the answer does not have its generated type's shape`);
}

/** The body of a 2xx answer, or a thrown error naming the status and the envelope. */
function ok<T>(what: string, result: { data?: T; error?: Schemas['Error']; response: Response }): T {
  if (result.data !== undefined) return result.data;
  throw new Error(`${what}: HTTP ${result.response.status} ${JSON.stringify(result.error ?? null)}`);
}

const client = createClient<paths>({ baseUrl: env('MDS_URL') });

const quote: Schemas['QuoteResponse'] = ok('quote', await client.GET('/api/quotes/{symbol}', { params: { path: { symbol: 'AAPL' } } }));
check('quote', quote.success && typeof quote.data.symbol === 'string' && typeof quote.data.price === 'number');

// The contract's getHistory answers JSON, CSV or Arrow: openapi-fetch types the body as their union, narrowed here.
const historyBody = ok('history', await client.GET('/api/history/{symbol}', { params: { path: { symbol: 'AAPL' }, query: { interval: '1d', range: '1mo' } } }));
check('history', typeof historyBody !== 'string');
const history = historyBody as Schemas['HistoryResponse'];
check('history', history.success && Array.isArray(history.data.candles) && history.data.candles.every((c) => typeof c.time === 'string' && typeof c.close === 'number'));

// getHistoryCsv answers only text/csv: its body is typed as the contract's string.
const csv: Schemas['HistoryCsv'] = ok('history csv', await client.GET('/api/history/{symbol}/csv', { params: { path: { symbol: 'AAPL' }, query: { interval: '1d', range: '1mo' } }, parseAs: 'text' }));
check('history csv', typeof csv === 'string' && csv.startsWith('time,open,high,low,close,adj_close,volume\r\n'));

const login: Schemas['LoginResult'] = ok('login', await client.POST('/api/auth/login', { body: { username: env('MDS_USERNAME'), password: env('MDS_PASSWORD') } }));
check('login', login.ok && typeof login.access_token === 'string' && login.token_type === 'bearer');

const withToken = createClient<paths>({ baseUrl: env('MDS_URL'), headers: { Authorization: `Bearer ${login.access_token}` } });
const status: Schemas['AdminStatus'] = ok('admin status (token)', await withToken.GET('/api/admin/status'));
check('admin status', typeof status.version === 'string' && typeof status.users.count === 'number');

const withKey = createClient<paths>({ baseUrl: env('MDS_URL'), headers: { 'X-API-Key': env('MDS_API_KEY') } });
const users: Array<Schemas['User']> = ok('list users (API key)', await withKey.GET('/api/admin/users'));
check('users', Array.isArray(users) && users.every((u) => typeof u.username === 'string' && typeof u.is_admin === 'boolean'));

console.log(JSON.stringify({ quote, history, csv, login: { ...login, access_token: 'redacted.redacted.redacted' }, status, users }));
