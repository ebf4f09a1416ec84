/**
 * A rolling upgrade (DESIGN 27): the release before (PREVIOUS_RELEASE, built from its commit) and this
 * checkout, two `mds serve` processes on one redis-server of their own and one PostgreSQL schema (the
 * fleet's database, docs/operations.md "Several instances"), against a fake upstream, under a read load
 * through both instances in turn (anonymous and with a managed key) and a login load. Every answer must
 * be a 2xx whose body has the shape its operation declares: a body one release stored and the other
 * sent as it was (a raw cache entry, `["found",...]`) fails here. Quotas and revocations are one across both.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CACHE_KINDS } from '../../src/services/cache/cache-types.js';
import { buildOfRef } from '../helpers/build-of-ref.js';
import { schemaViolations } from '../helpers/contract-schema.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { noteSecrets } from '../helpers/log-files.js';
import { createTestSchema, findPostgres, shouldRunPostgres, type TestSchema } from '../helpers/postgres.js';
import { freePort, startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * The release this one replaces in a fleet: the commit of main when the last release was cut. Bump it
 * with every release (to the commit the release was cut from), so the test always runs the two
 * releases that meet during an upgrade. The clone must have it (a shallow clone fails with a clear message).
 */
const PREVIOUS_RELEASE = process.env.MDS_PREVIOUS_RELEASE ?? 'f2df386';

const FIXTURES = resolve(import.meta.dirname, '../fixtures/yahoo');
const LOAD_MS = 20_000;
const ADMIN = { username: 'admin', password: 'admin-password-1' };
const READERS = 4;
const FLUSH_EVERY_MS = 1000;
/** The small quota of the key that proves quotas are shared. */
const SMALL_QUOTA = 10;

/** A read of the load: its path and the schema of its 200 body (openapi.yaml's). */
const READS: ReadonlyArray<{ path: string; schema: string }> = [
  { path: '/api/quotes/AAPL', schema: 'QuoteResponse' },
  { path: '/api/quotes/%5EIXIC', schema: 'QuoteResponse' },
  { path: '/api/quotes?symbols=AAPL,%5EIXIC,%5ESOX', schema: 'QuotesResponse' },
  { path: '/api/indices', schema: 'IndicesResponse' },
  { path: '/api/history/AAPL?interval=1d&range=1mo', schema: 'HistoryResponse' },
  { path: '/api/search?q=aapl', schema: 'SearchResponse' },
];

interface Answer {
  instance: 'previous' | 'current';
  what: string;
  status: number;
  /** What is wrong with the body (empty when it is what the operation declares). */
  problems: string[];
}

/** What is wrong with a 2xx body of an operation whose 200 schema is `schema`. */
function problemsOf(text: string, schema: string): string[] {
  if (text.startsWith('[')) return [`a raw cache entry: ${text.slice(0, 60)}`];
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return [`not JSON: ${text.slice(0, 60)}`];
  }
  const problems = schemaViolations(schema, body);
  if (schema !== 'LoginResult') {
    const { success, data } = body as { success?: unknown; data?: unknown };
    if (success !== true || data === undefined) problems.push('no success: true with data');
  }
  return problems;
}

/** `mds ...args` of this checkout, the JSON it prints. */
function mdsJson(env: NodeJS.ProcessEnv, args: string[]): { data: { id: string; key: string } } {
  const r = spawnSync(process.execPath, [MDS_BIN, ...args, '--json'], { env, encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`mds ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  const out = JSON.parse(r.stdout) as { data: { id: string; key: string } };
  noteSecrets(out.data.key);
  return out;
}

const postgresUrl = await findPostgres();

describe.runIf(shouldRunPostgres(postgresUrl, 'rolling upgrade'))(`rolling upgrade: ${PREVIOUS_RELEASE} beside this checkout`, () => {
  let dir: string;
  let redis: RedisProcess;
  let schema: TestSchema;
  let upstream: FakeUpstream;
  let env: NodeJS.ProcessEnv;
  const instances: Partial<Record<Answer['instance'], ServeProcess>> = {};

  beforeAll(async () => {
    // Built first: a commit missing from the clone fails here, before anything is started.
    const previousBuild = buildOfRef(PREVIOUS_RELEASE);
    dir = mkdtempSync(join(tmpdir(), 'mds-rolling-upgrade-'));
    redis = await startRedis();
    schema = await createTestSchema(postgresUrl!);
    upstream = await startFakeUpstream({ fixturesDir: FIXTURES });
    // Both releases in the test's own schema (pg passes `options` to the server at connection).
    const databaseUrl = new URL(postgresUrl!);
    databaseUrl.searchParams.set('options', `-c search_path=${schema.name}`);
    env = {
      PATH: process.env.PATH,
      HOME: dir,
      DATABASE_URL: databaseUrl.href,
      CACHE_URL: redis.url,
      SECRET_KEY: 'rolling-upgrade-secret-0123456789abcdef',
      BCRYPT_ROUNDS: '4',
      DEFAULT_ADMIN_USERNAME: ADMIN.username,
      DEFAULT_ADMIN_PASSWORD: ADMIN.password,
      MARKET_DATA_PROVIDER: 'yahoo',
      MARKET_DATA_BASE_URL: upstream.baseUrl,
      MARKET_INDICES: '^IXIC,^SOX',
      // Short lives: entries expire and are filled again by either release many times over the load. No
      // scheduled refresh: its one run per interval (the job lock is shared) would keep every entry in
      // the format of whichever release holds the lock, and the other release would never fill one.
      CACHE_TTL_SECONDS: '2',
      REFRESH_INTERVAL_SECONDS: '0',
      // Counted (so both releases share the counters) but never reached by the load itself.
      RATE_LIMIT_ANONYMOUS_PER_MINUTE: '1000000',
      RATE_LIMIT_AUTHENTICATED_PER_MINUTE: '1000000',
      METRICS_PORT: '0',
    };
    // The order of an upgrade: the fleet runs the release before on its database, then this release
    // starts beside it and migrates what it adds.
    const init = spawnSync(process.execPath, [join(previousBuild, 'bin', 'run.js'), 'init'], { env, encoding: 'utf8', timeout: 60_000 });
    expect(init.status, init.stderr).toBe(0);
    instances.previous = await spawnServe(['--port', String(await freePort())], { env, bin: join(previousBuild, 'bin', 'run.js'), stdout: openSync(join(dir, 'previous.log'), 'w') });
    instances.current = await spawnServe(['--port', String(await freePort())], { env, stdout: openSync(join(dir, 'current.log'), 'w') });
  }, 300_000);

  afterAll(async () => {
    await instances.previous?.stop();
    await instances.current?.stop();
    await upstream?.close();
    await redis?.stop();
    await schema?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('reads and logins through both releases for 20 s: no error, no misread body; one quota and one revocation for both', async () => {
    const loadKey = mdsJson(env, ['keys', 'create', 'upgrade-load']).data.key;
    const order = ['previous', 'current'] as const;
    const answers: Answer[] = [];
    /** Asks instance `turn % 2` (the release before, then this one). */
    const call = async (turn: number, what: string, schema: string, path: string, init: RequestInit = {}): Promise<string | undefined> => {
      const instance = order[turn % 2]!;
      try {
        const res = await fetch(`${instances[instance]!.url}${path}`, { ...init, signal: AbortSignal.timeout(10_000) });
        const text = await res.text();
        const ok = res.status >= 200 && res.status < 300;
        answers.push({ instance, what, status: res.status, problems: ok ? problemsOf(text, schema) : [text.slice(0, 120)] });
        return ok ? text : undefined;
      } catch (err) {
        answers.push({ instance, what, status: 0, problems: [String(err)] });
        return undefined;
      }
    };

    // First, each release reads what the other filled (after a flush, which drops both releases' own
    // copies): under the load below, which release fills an entry is a race.
    const adminLogin = await fetch(`${instances.current!.url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) });
    const adminToken = ((await adminLogin.json()) as { access_token: string }).access_token;
    for (const [filler, reader] of [[1, 0], [0, 1]] as const) {
      const flushed = await fetch(`${instances[order[filler]]!.url}/api/admin/cache`, { method: 'DELETE', headers: { authorization: `Bearer ${adminToken}` } });
      expect(flushed.status).toBe(200);
      for (const read of READS) {
        await call(filler, `${read.path} (filled)`, read.schema, read.path);
        await call(reader, `${read.path} (read)`, read.schema, read.path);
      }
    }

    const until = Date.now() + LOAD_MS;
    const reader = async (worker: number) => {
      for (let n = worker; Date.now() < until; n++) {
        const read = READS[n % READS.length]!;
        // Each read through both instances in turn, anonymous twice and then with the managed key twice.
        const round = Math.floor(n / READS.length);
        const withKey = Math.floor(round / 2) % 2 === 1;
        await call(round, `${read.path}${withKey ? ' (key)' : ''}`, read.schema, read.path, withKey ? { headers: { 'x-api-key': loadKey } } : {});
      }
    };
    const login = async () => {
      for (let n = 0; Date.now() < until; n++) {
        const text = await call(n, 'login', 'LoginResult', '/api/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) });
        const token = text === undefined ? undefined : (JSON.parse(text) as { access_token?: string }).access_token;
        // The token one release signed is read by the other.
        if (token !== undefined) await call(n + 1, '/api/quotes/AAPL (token)', 'QuoteResponse', '/api/quotes/AAPL', { headers: { authorization: `Bearer ${token}` } });
      }
    };
    // Entries live past the load when markets are closed (a quote's life follows its market): a flush
    // every FLUSH_EVERY_MS through each release in turn makes the releases race to fill them again.
    const flusher = async () => {
      for (let n = 0; Date.now() < until; n++) {
        await call(n, 'flush', 'CacheFlushResponse', '/api/admin/cache', { method: 'DELETE', headers: { authorization: `Bearer ${adminToken}` } });
        await new Promise((r) => setTimeout(r, FLUSH_EVERY_MS));
      }
    };
    await Promise.all([...Array.from({ length: READERS }, (_, w) => reader(w)), login(), flusher()]);

    const failed = answers.filter((a) => a.status < 200 || a.status >= 300);
    const misread = answers.filter((a) => a.status >= 200 && a.status < 300 && a.problems.length > 0);
    const count = (instance: Answer['instance']) => answers.filter((a) => a.instance === instance).length;
    console.log(
      `rolling upgrade ${PREVIOUS_RELEASE} + this checkout, ${LOAD_MS / 1000} s: ${answers.length} answers (previous ${count('previous')}, current ${count('current')}), ` +
        `${answers.filter((a) => a.what === 'login').length} logins, ${answers.filter((a) => a.what === 'flush').length} flushes, ${failed.length} errors, ${misread.length} misread`,
    );
    const examples = (list: Answer[]) => list.slice(0, 5).map((a) => `${a.instance} ${a.what}: ${a.status} ${a.problems.join('; ')}`);
    if (failed.length > 0 && misread.length > 0) console.log(`errors beside the misread bodies:\n${examples(failed).join('\n')}`);
    expect(examples(misread)).toEqual([]);
    expect(examples(failed)).toEqual([]);
    for (const instance of order) {
      for (const read of READS) {
        for (const what of [read.path, `${read.path} (key)`]) expect(answers.some((a) => a.instance === instance && a.what === what), `${instance} ${what}`).toBe(true);
      }
    }
    expect(answers.filter((a) => a.what === 'login').length).toBeGreaterThan(10);

    // Neither release logged an error of its own (pino's error level is 50).
    for (const name of ['previous', 'current']) {
      const errors = readFileSync(join(dir, `${name}.log`), 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('{') && (JSON.parse(l) as { level?: number }).level! >= 50);
      expect(errors.slice(0, 3), `${name}'s log`).toEqual([]);
    }

    // One quota: a key allowed SMALL_QUOTA requests a minute gets them across both releases, not each.
    const small = mdsJson(env, ['keys', 'create', 'upgrade-quota', '--rate-limit', String(SMALL_QUOTA)]).data.key;
    const statuses: number[] = [];
    for (let n = 0; n < SMALL_QUOTA + 2; n++) {
      const res = await fetch(`${instances[order[n % 2]!]!.url}/api/quotes/AAPL`, { headers: { 'x-api-key': small } });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    expect(statuses).toEqual([...Array<number>(SMALL_QUOTA).fill(200), 429, 429]);

    // One revocation: a key revoked through either release is refused by both.
    for (const [revoker, other] of [[0, 1], [1, 0]] as const) {
      const created = mdsJson(env, ['keys', 'create', `upgrade-revoke-${revoker}`]).data;
      const status = async (instance: number) => (await fetch(`${instances[order[instance]!]!.url}/api/quotes/AAPL`, { headers: { 'x-api-key': created.key } })).status;
      expect([await status(revoker), await status(other)]).toEqual([200, 200]);
      const revoked = await fetch(`${instances[order[revoker]]!.url}/api/admin/api-keys/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${adminToken}` } });
      expect(revoked.status).toBe(204);
      expect(await status(revoker)).toBe(401);
      await waitFor(async () => (await status(other)) === 401, { timeoutMs: 3000, message: `${order[other]} refuses the key ${order[revoker]} revoked` });
    }
  }, 300_000);

  it('every key either release wrote is one the key space builds: versioned families or the shared ones', async () => {
    const client = new Redis(redis.url);
    try {
      const written = await client.keys('*');
      expect(written.length).toBeGreaterThan(0);
      const families = [...CACHE_KINDS, 'stale', 'lock', 'unknown', 'quote-version', 'ratelimit', 'throttle', 'upstream', 'usage', 'usage-op'];
      const known = new RegExp(`^mds:v\\d+:(${families.join('|')}):`);
      expect(written.filter((k) => !known.test(k))).toEqual([]);
    } finally {
      client.disconnect();
    }
  });
});
