/**
 * `mds db copy` and `mds db backup` as processes (dist/), on real SQLite files, the real PostgreSQL (a
 * schema per test, named through DATABASE_URL's search path) and `mds serve` over HTTP with an upstream
 * that counts its calls: a SQLite database made as users make it (the CLI, the service, the stores for
 * bulk bars) moves to PostgreSQL, survives a SIGKILL half-way, serves the same answers there without
 * asking the upstream, and comes back to SQLite.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openUserStore } from '../../src/infra/db/typeorm-user-store.js';
import { cliEnv } from '../helpers/cli-env.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { createTestSchema, findPostgres, schemaUrl, shouldRunPostgres, type TestSchema } from '../helpers/postgres.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

const SECRET = 'db-copy-test-secret-of-more-than-32-bytes-long';
const NO_REDIS = 'redis://127.0.0.1:1/0';
const MINUTES = 100_000;
const DAYS = 500;
const START_1M = Date.UTC(2025, 0, 6, 0, 0);
const START_1D = Date.UTC(2022, 0, 3, 14, 30);
const ALICE = { username: 'alice', password: 'alice-password-1' };
const ADMIN = { username: 'admin', password: 'admin-password-1' };

let dir: string;
let env: NodeJS.ProcessEnv;
let upstream: FakeUpstream;
let pgBase: string | undefined;

function mds(args: string[], extra: NodeJS.ProcessEnv = {}, input?: string) {
  const r = spawnSync(process.execPath, [MDS_BIN, ...args], { cwd: dir, env: { ...env, ...extra }, input, encoding: 'utf8', timeout: 180_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(async () => {
  pgBase = await findPostgres();
  upstream = await startFakeUpstream({ fixturesDir: resolve(import.meta.dirname, '../fixtures/yahoo') });
});
afterAll(async () => upstream?.close());
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mds-db-copy-'));
  env = cliEnv(dir, SECRET, { CACHE_URL: NO_REDIS, MARKET_DATA_PROVIDER: 'yahoo', MARKET_DATA_BASE_URL: upstream.baseUrl, LOG_LEVEL: 'warn' });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A SQLite database as an operator and the service make it: users and a managed key by the CLI, bars through the store, usage by serving. */
async function makeSource(minutes = MINUTES): Promise<{ key: string }> {
  expect(mds(['init']).code).toBe(0);
  expect(mds(['users', 'create', ALICE.username], {}, `${ALICE.password}\n`).code).toBe(0);
  const created = mds(['keys', 'create', 'dashboard', '--role', 'read', '--json']);
  expect(created.code).toBe(0);
  const key = (JSON.parse(created.stdout) as { data: { key: string } }).data.key;
  expect(mds(['keys', 'create', 'deploy-bot', '--role', 'admin', '--rate-limit', '600', '--expires-at', '2031-01-01T00:00:00Z']).code).toBe(0);

  const db = await openUserStore(env.DATABASE_URL!, { runMigrations: true });
  try {
    const bars = Array.from({ length: minutes }, (_, i) => ({ timeMs: START_1M + i * 60_000, open: 400 + i / 1000, high: 401 + i / 997, low: 399 - i / 1009, close: 0.1 + 0.2 + 400 + i / 1013, adjClose: null, volume: i % 7 === 0 ? null : 1000 + i }));
    const source = { provider: 'yahoo', fetchedAtMs: START_1M + minutes * 60_000 };
    await db.candles.putCandles('MSFT', '1m', bars, source);
    await db.candles.markCovered('MSFT', '1m', { startMs: START_1M, endMs: START_1M + minutes * 60_000 }, source);
    await db.candles.putInstrument('MSFT', { currency: 'USD', timezone: 'America/New_York' }, source);
    const days = Array.from({ length: DAYS }, (_, i) => ({ timeMs: START_1D + i * 86_400_000, open: 150 + i, high: 152 + i, low: 149 + i, close: 151 + i / 3, adjClose: 150 + i / 3, volume: 80_000_000 + i }));
    const daily = { provider: 'yahoo', fetchedAtMs: START_1D + DAYS * 86_400_000 };
    await db.candles.putCandles('AAPL', '1d', days, daily);
    await db.candles.markCovered('AAPL', '1d', { startMs: START_1D, endMs: START_1D + DAYS * 86_400_000 }, daily);
    await db.candles.putInstrument('AAPL', { currency: 'USD', timezone: 'America/New_York' }, daily);
    await db.candles.putActions('AAPL', [{ kind: 'dividend', timeMs: START_1D + 30 * 86_400_000, amount: 0.23 }], daily);
    const bar = (close: number) => ({ open: close, high: close, low: close, close, adjClose: close, volume: 1000 });
    await db.dataIssues.record([
      { symbol: 'AAPL', interval: '1d', timeMs: START_1D + 86_400_000, rule: 'unit_100x', action: 'repaired', before: bar(15_200), after: bar(152), flag: 'repaired_unit', providers: ['yahoo'], recordedAtMs: START_1D + 2 * 86_400_000 },
      { symbol: 'MSFT', interval: '1m', timeMs: START_1M, rule: 'divergent', action: 'suspect', before: bar(400.3), after: bar(400.3), flag: 'divergent', providers: ['polygon', 'yahoo'], closes: { stored: { provider: 'yahoo', close: 400.3 }, others: [{ provider: 'polygon', close: 404.1 }] }, recordedAtMs: START_1M + 1 },
    ] as never);
  } finally {
    await db.close();
  }
  // Usage and the key's last use are written by a running service, as they are in production.
  const serve = await spawnServe(['--port', '0'], { cwd: dir, env });
  try {
    for (let i = 0; i < 3; i++) expect((await fetch(`${serve.url}/api/history/AAPL?interval=1d&start=2022-02-01&end=2022-03-01`, { headers: { 'x-api-key': key } })).status).toBe(200);
    expect((await login(serve, ALICE.username, ALICE.password)).status).toBe(200);
  } finally {
    expect(await serve.stop('SIGTERM')).toBe(0);
  }
  return { key };
}

function login(serve: ServeProcess, username: string, password: string): Promise<Response> {
  return fetch(`${serve.url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username, password }) });
}

/** What a client sees from a service, in one fixed order: logins, the admin's lists, the stored history, the managed key at work. */
async function answers(serve: ServeProcess, key: string): Promise<Record<string, unknown>> {
  const seen: Record<string, unknown> = {};
  const adminLogin = await login(serve, ADMIN.username, ADMIN.password);
  const token = ((await adminLogin.json()) as { access_token: string }).access_token;
  const alice = await login(serve, ALICE.username, ALICE.password);
  const aliceBody = (await alice.json()) as Record<string, unknown>;
  seen.logins = { admin: adminLogin.status, alice: alice.status, aliceFields: Object.keys(aliceBody).sort(), wrong: (await login(serve, ALICE.username, 'not-her-password')).status };
  const asAdmin = { authorization: `Bearer ${token}` };
  for (const path of ['/api/admin/users', '/api/admin/api-keys', '/api/admin/data-issues?limit=50']) {
    const res = await fetch(`${serve.url}${path}`, { headers: asAdmin });
    seen[path] = { status: res.status, body: await res.json() };
  }
  // Every window lies inside the covered spans: a window reaching past them would ask the upstream for the rest.
  for (const path of [
    '/api/history/MSFT?interval=1m&start=2025-01-20T00:00:00Z&end=2025-01-21T00:00:00Z',
    '/api/history/MSFT?interval=1m&start=2025-02-10T00:00:00Z&end=2025-02-13T00:00:00Z&format=csv',
    '/api/history/AAPL?interval=1d&start=2022-01-04&end=2023-05-01',
  ]) {
    const res = await fetch(`${serve.url}${path}`, { headers: { 'x-api-key': key } });
    const text = await res.text();
    // `updated_at` says when the answer was made, not what it holds.
    seen[path] = { status: res.status, body: res.headers.get('content-type')?.startsWith('application/json') ? { ...(JSON.parse(text) as object), updated_at: undefined } : text };
  }
  seen.wrongKey = (await fetch(`${serve.url}/api/history/AAPL?interval=1d&start=2022-01-01&end=2022-02-01`, { headers: { 'x-api-key': `${key}x` } })).status;
  return seen;
}

/** The per-table lines of the copy's summary: table, source rows, target rows, checksum, ok. */
function summaryRows(stdout: string): Map<string, { source: number; target: number; copied: number; checksum: string; ok: boolean }> {
  const rows = new Map<string, { source: number; target: number; copied: number; checksum: string; ok: boolean }>();
  for (const m of stdout.matchAll(/^(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9a-f]{16})\s+(ok)$/gm)) rows.set(m[1]!, { source: Number(m[2]), target: Number(m[3]), copied: Number(m[4]), checksum: m[5]!, ok: m[6] === 'ok' });
  return rows;
}

describe('mds db copy', () => {
  let schema: TestSchema | undefined;
  let client: pg.Client | undefined;
  afterEach(async () => {
    await client?.end();
    await schema?.drop();
  });

  it('when a SQLite database is copied to PostgreSQL with a SIGKILL half-way and a rerun, then the service answers the same there without the upstream, and it copies back to SQLite', { timeout: 600_000 }, async (ctx) => {
    if (!shouldRunPostgres(pgBase, 'mds db copy to PostgreSQL')) return ctx.skip();
    schema = await createTestSchema(pgBase!);
    client = new pg.Client({ connectionString: pgBase });
    await client.connect();
    const target = schemaUrl(pgBase!, schema.name);
    const calls = upstream.requests;
    const upstreamCalls = () => upstream.requestLog.slice(calls).map((r) => r.url);
    const { key } = await makeSource();
    const before = await spawnServe(['--port', '0'], { cwd: dir, env });
    let onSqlite: Record<string, unknown>;
    try {
      onSqlite = await answers(before, key);
    } finally {
      await before.stop('SIGTERM');
    }

    // Interrupted: killed once PostgreSQL holds some of the bars but not all of them.
    const total = MINUTES + DAYS;
    const heldBars = async () => {
      try {
        const r = await client!.query(`SELECT count(*)::int AS n FROM "${schema!.name}".candles`);
        return (r.rows[0] as { n: number }).n;
      } catch {
        return 0;
      }
    };
    const first = spawn(process.execPath, [MDS_BIN, 'db', 'copy', '--to', target, '--batch-size', '500'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let firstErr = '';
    first.stderr.on('data', (c: Buffer) => (firstErr += c.toString()));
    const exited = new Promise<NodeJS.Signals | null>((done) => first.once('exit', (_code, signal) => done(signal)));
    await waitFor(async () => {
      if (first.exitCode !== null) throw new Error(`the copy ended before it was interrupted (${first.exitCode}): ${firstErr}`);
      const n = await heldBars();
      return n > 0 && n < total;
    }, { timeoutMs: 120_000, intervalMs: 5, message: 'some but not all bars in PostgreSQL' });
    first.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    const held = await heldBars();
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(total);

    const rerun = mds(['db', 'copy', '--to', target]);
    expect(rerun.stderr).toBe('');
    expect(rerun.code).toBe(0);
    const copied = summaryRows(rerun.stdout);
    expect(copied.size).toBe(12);
    expect(copied.get('candles')).toMatchObject({ source: total, target: total, copied: total - held, ok: true });
    expect(copied.get('users')).toMatchObject({ source: 2, target: 2, copied: 0 });
    expect(copied.get('api_keys')).toMatchObject({ source: 2, target: 2 });
    expect(copied.get('data_issues')).toMatchObject({ source: 2, target: 2 });
    expect(copied.get('usage_daily')!.source).toBeGreaterThan(0);
    expect(rerun.stdout).toMatch(/^copy verified: 12 tables, \d+ rows, counts and checksums match/m);
    const distinct = await client.query(`SELECT count(*)::int AS n, count(DISTINCT (series_id, t))::int AS d FROM "${schema.name}".candles`);
    expect(distinct.rows[0]).toEqual({ n: total, d: total });
    // Run again: nothing left to copy, the same checksums.
    const again = mds(['db', 'copy', '--to', target]);
    expect(again.code).toBe(0);
    expect([...summaryRows(again.stdout).values()].map((r) => r.copied)).toEqual(Array(12).fill(0));
    expect([...summaryRows(again.stdout).values()].map((r) => r.checksum)).toEqual([...copied.values()].map((r) => r.checksum));

    const onPostgres = await spawnServe(['--port', '0'], { cwd: dir, env: { ...env, DATABASE_URL: target } });
    try {
      const seen = await answers(onPostgres, key);
      for (const [what, answer] of Object.entries(onSqlite)) expect(seen[what], what).toEqual(answer);
      expect(Object.keys(seen)).toEqual(Object.keys(onSqlite));
    } finally {
      await onPostgres.stop('SIGTERM');
    }
    expect(upstreamCalls()).toEqual([]);

    // And back: PostgreSQL (as the service left it) to a new SQLite file, verified the same way.
    const back = join(dir, 'back.sqlite');
    const home = mds(['db', 'copy', '--to', `sqlite:${back}`], { DATABASE_URL: target });
    expect(home.code).toBe(0);
    expect(summaryRows(home.stdout).get('candles')).toMatchObject({ source: total, target: total, copied: total, checksum: copied.get('candles')!.checksum });
    const onBack = await spawnServe(['--port', '0'], { cwd: dir, env: { ...env, DATABASE_URL: `sqlite:${back}` } });
    try {
      const seen = await answers(onBack, key);
      for (const path of Object.keys(onSqlite).filter((p) => p.startsWith('/api/history'))) expect(seen[path], path).toEqual(onSqlite[path]);
    } finally {
      await onBack.stop('SIGTERM');
    }
    expect(upstreamCalls()).toEqual([]);
  });

  it('when the target holds rows that are not a copy of this source, then exit 2 saying so, nothing written; --replace copies over them', { timeout: 600_000 }, async () => {
    await makeSource(1000);
    const other = join(dir, 'other.sqlite');
    expect(mds(['users', 'create', 'bob'], { DATABASE_URL: `sqlite:${other}` }, 'bob-password-1\n').code).toBe(0);

    const refused = mds(['db', 'copy', '--to', `sqlite:${other}`]);
    expect(refused.code).toBe(2);
    expect(refused.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^Error: The target \(sqlite:.*other\.sqlite\) already holds rows that are not from a copy of this source: its table users has 1 row\(s\).*pass --replace/)]);
    const users = () => new Database(other, { readonly: true }).prepare('SELECT username FROM users ORDER BY username').pluck().all();
    expect(users()).toEqual(['bob']);

    const replaced = mds(['db', 'copy', '--to', `sqlite:${other}`, '--replace']);
    expect(replaced.code).toBe(0);
    expect(users()).toEqual(['admin', 'alice']);
    expect(replaced.stdout).toContain(`candles: ${1000 + DAYS}/${1000 + DAYS} rows`);

    const bad = mds(['db', 'copy', '--to', 'mysql://x@y/z']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim()).toBe("Error: --to must be sqlite:<path> or postgres://user:pass@host:port/db, not 'mysql://x@y/z' (see --help)");
    const self = mds(['db', 'copy', '--to', env.DATABASE_URL!]);
    expect(self.code).toBe(2);
    expect(self.stderr).toContain('the configured database itself');
  });
});

describe('mds db backup', () => {
  it('when a backup is taken while the service writes, then it is a whole, consistent database the CLI can open; an existing file needs --force; PostgreSQL points to pg_dump', { timeout: 600_000 }, async () => {
    await makeSource(1000);
    const serve = await spawnServe(['--port', '0'], { cwd: dir, env });
    const file = join(dir, 'backup.sqlite');
    let written = 0;
    let writing = true;
    try {
      const token = ((await (await login(serve, ADMIN.username, ADMIN.password)).json()) as { access_token: string }).access_token;
      const writer = (async () => {
        while (writing) {
          const res = await fetch(`${serve.url}/api/admin/api-keys`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: `k${written}`, role: 'read' }) });
          expect(res.status).toBe(201);
          written += 1;
        }
      })();
      await waitFor(() => written > 0, { message: 'the service writes' });
      const startedAt = written;
      const backup = await new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
        const child = spawn(process.execPath, [MDS_BIN, 'db', 'backup', file], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        child.once('exit', (code) => done({ code, stdout, stderr }));
      });
      const endedAt = written;
      writing = false;
      await writer;
      expect(backup.stderr).toBe('');
      expect(backup.code).toBe(0);
      expect(backup.stdout).toMatch(/^backed up .*mds\.sqlite to .*backup\.sqlite \(\d+ bytes\)\n$/);
      expect(endedAt - startedAt, 'the service wrote while the backup ran').toBeGreaterThan(0);

      const copy = new Database(file, { readonly: true });
      try {
        expect(copy.pragma('integrity_check', { simple: true })).toBe('ok');
        const names = copy.prepare("SELECT name FROM api_keys WHERE name LIKE 'k%' ORDER BY created_at, name").pluck().all() as string[];
        // One snapshot: the keys written before some moment, every one of them, none after.
        expect(names.length).toBeGreaterThanOrEqual(startedAt);
        expect(names.length).toBeLessThanOrEqual(endedAt + 1);
        expect(new Set(names)).toEqual(new Set(Array.from({ length: names.length }, (_, i) => `k${i}`)));
        expect(copy.prepare('SELECT count(*) FROM candles').pluck().get()).toBe(1000 + DAYS);
      } finally {
        copy.close();
      }
      expect(readdirSync(dir).filter((f) => f.includes('partial'))).toEqual([]);
      const listed = mds(['keys', 'list'], { DATABASE_URL: `sqlite:${file}` });
      expect(listed.code).toBe(0);
      expect(listed.stdout).toContain('dashboard');
    } finally {
      writing = false;
      await serve.stop('SIGTERM');
    }

    const exists = mds(['db', 'backup', file]);
    expect(exists.code).toBe(2);
    expect(exists.stderr.trim()).toBe(`Error: ${file} exists: pass --force to replace it`);
    expect(mds(['db', 'backup', file, '--force']).code).toBe(0);
    expect(new Database(file, { readonly: true }).prepare("SELECT count(*) FROM api_keys WHERE name LIKE 'k%'").pluck().get()).toBe(written);

    const onPostgres = mds(['db', 'backup', join(dir, 'pg.dump')], { DATABASE_URL: 'postgres://mds@127.0.0.1:1/mds' });
    expect(onPostgres.code).toBe(2);
    expect(onPostgres.stderr.trim()).toBe('Error: mds db backup copies SQLite databases; DATABASE_URL is PostgreSQL: back it up with pg_dump --format=custom and restore with pg_restore (see docs/operations.md, "Backups")');
    expect(existsSync(join(dir, 'pg.dump'))).toBe(false);
  });
});
