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

/** `true` only when A and B are the same type: a check that compiles only when a generated type is what it should be. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

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

// The contract's getHistory answers JSON, CSV or Arrow: openapi-fetch types the body as their union (the CSV and the
// Arrow stream as strings), so a caller must narrow it. This line compiles only while that is so.
const historyBody = ok('history', await client.GET('/api/history/{symbol}', { params: { path: { symbol: 'AAPL' }, query: { interval: '1d', range: '1mo' } } }));
const historyIsTheUnion: Equal<typeof historyBody, Schemas['HistoryResponse'] | Schemas['HistoryCsv'] | Schemas['HistoryArrow']> = true;
check('history', historyIsTheUnion && typeof historyBody !== 'string');
const history = historyBody as Schemas['HistoryResponse'];
check('history', history.success && Array.isArray(history.data.candles) && history.data.candles.every((c) => typeof c.time === 'string' && typeof c.close === 'number'));

// getHistoryCsv answers only text/csv: its body is typed as the contract's string.
const csv: Schemas['HistoryCsv'] = ok('history csv', await client.GET('/api/history/{symbol}/csv', { params: { path: { symbol: 'AAPL' }, query: { interval: '1d', range: '1mo' } }, parseAs: 'text' }));
check('history csv', typeof csv === 'string' && csv.startsWith('time,open,high,low,close,adj_close,volume\r\n'));

// getHistory with format=csv: the union above holds its answer; read as text, it is typed as the string it is.
const csvByFormat = ok('history format=csv', await client.GET('/api/history/{symbol}', { params: { path: { symbol: 'AAPL' }, query: { interval: '1d', range: '1mo', format: 'csv' } }, parseAs: 'text' }));
const csvByFormatIsText: Equal<typeof csvByFormat, string> = true;
check('history format=csv', csvByFormatIsText && csvByFormat === csv);

const login: Schemas['LoginResult'] = ok('login', await client.POST('/api/auth/login', { body: { username: env('MDS_USERNAME'), password: env('MDS_PASSWORD') } }));
check('login', login.ok && typeof login.access_token === 'string' && login.token_type === 'bearer');

// Every admin answer is the envelope {success: true, data}: the generated types say so, and so does each answer.
const withToken = createClient<paths>({ baseUrl: env('MDS_URL'), headers: { Authorization: `Bearer ${login.access_token}` } });
const status: Schemas['AdminStatusResponse'] = ok('admin status (token)', await withToken.GET('/api/admin/status'));
check('admin status', status.success && typeof status.data.version === 'string' && typeof status.data.users.count === 'number');
const flushed: Schemas['CacheFlushResponse'] = ok('flush cache (token)', await withToken.DELETE('/api/admin/cache'));
check('flush cache', flushed.success && typeof flushed.data.removed === 'number');

const withKey = createClient<paths>({ baseUrl: env('MDS_URL'), headers: { 'X-API-Key': env('MDS_API_KEY') } });
const users: Schemas['UserList'] = ok('list users (API key)', await withKey.GET('/api/admin/users'));
check('users', users.success && Array.isArray(users.data) && users.data.every((u) => typeof u.username === 'string' && typeof u.is_admin === 'boolean'));
const created: Schemas['UserResponse'] = ok('create user (API key)', await withKey.POST('/api/admin/users', { body: { username: `openapi-fetch-${Date.now()}`, password: 'openapi-fetch-password-1', is_admin: false } }));
check('created user', created.success && typeof created.data.username === 'string' && created.data.is_admin === false);
const key: Schemas['CreatedApiKeyResponse'] = ok('create API key (API key)', await withKey.POST('/api/admin/api-keys', { body: { name: 'openapi-fetch', role: 'read' } }));
check('created key', key.success && key.data.key.startsWith('mds_') && key.data.role === 'read');

console.log(
  JSON.stringify({
    quote,
    history,
    csv,
    login: { ...login, access_token: 'redacted.redacted.redacted' },
    status,
    flushed,
    users,
    created,
    key: { ...key, data: { ...key.data, key: `mds_${'x'.repeat(43)}` } },
  }),
);
