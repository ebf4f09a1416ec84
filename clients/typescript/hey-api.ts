/**
 * A client generated from openapi.yaml with @hey-api/openapi-ts and its fetch client, as a user would
 * make it:
 *
 *   npx @hey-api/openapi-ts -i openapi.yaml -o client -c @hey-api/client-fetch
 *
 * and given one secret with a plain `auth: () => secret`. Its SDK sends that secret as every scheme an
 * operation lists (`Authorization: Bearer` and `X-API-Key`); the service takes the one value once
 * (docs/security.md). Every call is checked against the generated types by tsc and each answer at run
 * time. Run beside `client/` with MDS_URL, MDS_USERNAME, MDS_PASSWORD and MDS_API_KEY set; prints the
 * answers as one JSON line. test/e2e/generated-clients.test.ts runs it against the real service.
 */
import { createClient, createConfig } from './client/client/index.js';
import { createApiKey, createUser, flushCache, getAdminStatus, getHistory, getHistoryArrow, getHistoryCsv, getQuote, listUsers, login } from './client/sdk.gen.js';
import type {
  AdminStatusResponse,
  CacheFlushResponse,
  CreatedApiKeyResponse,
  GetHistoryArrowResponse,
  GetHistoryCsvResponse,
  GetHistoryResponse,
  HistoryCsv,
  HistoryResponse,
  LoginResult,
  QuoteResponse,
  UserList,
  UserResponse,
} from './client/types.gen.js';

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
function ok<T>(what: string, result: { data?: T; error?: unknown; response?: Response }): T {
  if (result.data !== undefined) return result.data;
  throw new Error(`${what}: HTTP ${result.response?.status ?? '?'} ${JSON.stringify(result.error ?? null)}`);
}

const baseUrl = env('MDS_URL');
/** The credential headers each authenticated request carried, to show what the SDK sends. */
const sent: string[][] = [];

/** A client given one secret, as hey-api's documentation shows: `auth` answers it for every scheme. */
function clientWith(secret: string) {
  const client = createClient(createConfig({ baseUrl, auth: () => secret }));
  client.interceptors.request.use((request) => {
    sent.push(['authorization', 'x-api-key'].filter((name) => request.headers.has(name)));
    return request;
  });
  return client;
}

const anonymous = createClient(createConfig({ baseUrl }));

const quote: QuoteResponse = ok('quote', await getQuote({ client: anonymous, path: { symbol: 'AAPL' } }));
check('quote', quote.success && typeof quote.data.symbol === 'string' && typeof quote.data.price === 'number');

// hey-api types one media type per answer, JSON when there is one: getHistory's answer is typed as the JSON even
// though the contract lists CSV and Arrow beside it. So the CSV and the Arrow stream are their own operations, typed
// as text and binary; this line stops compiling (and says so) if a hey-api release types getHistory's union.
const typedAsWhatTheyAre: [Equal<GetHistoryResponse, HistoryResponse>, Equal<GetHistoryCsvResponse, string>, Equal<GetHistoryArrowResponse, Blob | File>] = [true, true, true];
const history: HistoryResponse = ok('history', await getHistory({ client: anonymous, path: { symbol: 'AAPL' }, query: { interval: '1d', range: '1mo' } }));
check('history', typedAsWhatTheyAre.every(Boolean) && history.success && Array.isArray(history.data.candles) && history.data.candles.every((c) => typeof c.time === 'string' && typeof c.close === 'number'));

// getHistoryCsv answers only text/csv, so its generated type is the contract's string.
const csv: HistoryCsv = ok('history csv', await getHistoryCsv({ client: anonymous, path: { symbol: 'AAPL' }, query: { interval: '1d', range: '1mo' } }));
check('history csv', typeof csv === 'string' && csv.startsWith('time,open,high,low,close,adj_close,volume\r\n'));

// getHistoryArrow answers only the Arrow stream, binary: a Blob.
const arrow: Blob | File = ok('history arrow', await getHistoryArrow({ client: anonymous, path: { symbol: 'AAPL' }, query: { interval: '1d', range: '1mo' } }));
check('history arrow', arrow instanceof Blob && arrow.size > 0);
const arrowBytes = new Uint8Array(await arrow.arrayBuffer());

const session: LoginResult = ok('login', await login({ client: anonymous, body: { username: env('MDS_USERNAME'), password: env('MDS_PASSWORD') } }));
check('login', session.ok && typeof session.access_token === 'string' && session.token_type === 'bearer');

// Every admin answer is the envelope {success: true, data}: the generated types say so, and so does each answer.
const withToken = clientWith(session.access_token);
const status: AdminStatusResponse = ok('admin status (token)', await getAdminStatus({ client: withToken }));
check('admin status', status.success && typeof status.data.version === 'string' && typeof status.data.users.count === 'number');
const flushed: CacheFlushResponse = ok('flush cache (token)', await flushCache({ client: withToken }));
check('flush cache', flushed.success && typeof flushed.data.removed === 'number');

const withKey = clientWith(env('MDS_API_KEY'));
const users: UserList = ok('list users (API key)', await listUsers({ client: withKey }));
check('users', users.success && Array.isArray(users.data) && users.data.every((u) => typeof u.username === 'string' && typeof u.is_admin === 'boolean'));
const created: UserResponse = ok('create user (API key)', await createUser({ client: withKey, body: { username: `hey-api-${Date.now()}`, password: 'hey-api-password-1', is_admin: false } }));
check('created user', created.success && typeof created.data.username === 'string' && created.data.is_admin === false);
const key: CreatedApiKeyResponse = ok('create API key (API key)', await createApiKey({ client: withKey, body: { name: 'hey-api', role: 'read' } }));
check('created key', key.success && key.data.key.startsWith('mds_') && key.data.role === 'read');

console.log(
  JSON.stringify({
    quote,
    history,
    csv,
    // The Arrow stream's first bytes: an IPC stream opens with a continuation marker (0xFFFFFFFF).
    arrowHead: [...arrowBytes.subarray(0, 4)],
    login: { ...session, access_token: 'redacted.redacted.redacted' },
    status,
    flushed,
    users,
    created,
    key: { ...key, data: { ...key.data, key: `mds_${'x'.repeat(43)}` } },
    sent,
  }),
);
