/**
 * The CLI's log is shown only when asked for: `mds` commands run as processes on their own SQLite file
 * print their answer on stdout and nothing on stderr, unless `--verbose` is given or LOG_LEVEL is set in
 * the environment (then the log lines, audit lines included, come as before). Errors stay one line, and
 * a change the running instances could not be told of still says so, as a plain warning.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cliEnv } from '../helpers/cli-env.js';
import { MDS_BIN } from '../helpers/serve-process.js';

let dir: string;
let env: NodeJS.ProcessEnv;

function mds(args: string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}) {
  const r = spawnSync(process.execPath, [MDS_BIN, ...args], { cwd: dir, env: options.env ?? env, input: options.input, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The lines of `stderr` that are JSON log lines (pino's), parsed. */
function logLines(stderr: string): Array<Record<string, unknown>> {
  return stderr
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Each `mds` process takes seconds on a loaded machine; a test here runs up to a dozen. */
const CLI_TEST_TIMEOUT_MS = 180_000;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mds-cli-log-'));
  env = cliEnv(dir, 'cli-log-test-secret-key-0123456789abcdef');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('the CLI log, shown only when asked for', () => {
  it('when commands run without --verbose, then each prints its answer on stdout and nothing on stderr', () => {
    const init = mds(['init']);
    expect([init.code, init.stdout, init.stderr]).toEqual([0, "Default administrator 'admin' created\ninit done\n", '']);

    const created = mds(['users', 'create', 'analyst'], { input: 'analyst-pass-1\n' });
    expect([created.code, created.stdout, created.stderr]).toEqual([0, "User 'analyst' created\n", '']);
    const users = mds(['users', 'list']);
    expect(users.code).toBe(0);
    expect(users.stdout).toMatch(/^USERNAME\s+ADMIN\s+CREATED\nadmin\s+yes\s+\S+\nanalyst\s+no\s+\S+\n$/);
    expect(users.stderr).toBe('');
    const password = mds(['users', 'set-password', 'analyst'], { input: 'another-pass-2\n' });
    expect([password.code, password.stdout, password.stderr]).toEqual([0, "Password of 'analyst' changed\n", '']);

    const key = mds(['keys', 'create', 'dashboard']);
    expect(key.code).toBe(0);
    expect(key.stdout).toMatch(/^API key 'dashboard' created \(id [0-9a-f-]{36}, role read\)\nmds_[A-Za-z0-9_-]{43}\nCopy the key now: it is not stored and cannot be shown again\.\n$/);
    expect(key.stderr).toBe('');
    const id = /id ([0-9a-f-]{36})/.exec(key.stdout)![1]!;
    const keys = mds(['keys', 'list', '--json']);
    expect(keys.code).toBe(0);
    expect(JSON.parse(keys.stdout)).toEqual({ success: true, data: [expect.objectContaining({ id, name: 'dashboard', created_by: 'cli' })] });
    expect(keys.stderr).toBe('');
    const revoked = mds(['keys', 'revoke', id]);
    expect([revoked.code, revoked.stdout, revoked.stderr]).toEqual([0, `API key '${id}' revoked\n`, '']);
    const deleted = mds(['users', 'delete', 'analyst']);
    expect([deleted.code, deleted.stdout, deleted.stderr]).toEqual([0, "User 'analyst' deleted\n", '']);

    // What the commands changed is in the database all the same.
    const db = new Database(join(dir, 'data', 'mds.sqlite'), { readonly: true });
    try {
      expect(db.prepare('SELECT username FROM users').all()).toEqual([{ username: 'admin' }]);
      expect(db.prepare('SELECT count(*) AS n FROM api_keys').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  }, CLI_TEST_TIMEOUT_MS);

  it('when history commands run without --verbose, then stderr stays empty', () => {
    expect(mds(['init']).code).toBe(0);
    const since = new Date(Date.now() - 10 * 86_400_000).toISOString().slice(0, 10);
    const backfill = mds(['history', 'backfill', 'AAPL', '--since', since]);
    expect(backfill.code).toBe(0);
    expect(backfill.stdout).toMatch(/^AAPL: \d+ bars stored\nbackfill done: /);
    expect(backfill.stderr).toBe('');
    // Whatever it finds (the simulated provider's forming bar may move), it says it on stdout.
    const verify = mds(['history', 'verify', 'AAPL', '--since', since]);
    expect(verify.stdout).toMatch(/AAPL: \d+ bars checked against simulated, \d+ diverge\n$/);
    expect(verify.stderr).toBe('');
    const purge = mds(['history', 'purge', '--provider', 'simulated']);
    expect([purge.code, purge.stderr]).toEqual([0, '']);
    expect(purge.stdout).toMatch(/^purged \d+ bars of simulated\n$/);
  }, CLI_TEST_TIMEOUT_MS);

  it('when --verbose is given, then the log lines come on stderr: the audit lines of init and of a key, as JSON, and stdout is the same', () => {
    const init = mds(['init', '--verbose']);
    expect(init.code).toBe(0);
    expect(init.stdout).toBe("Default administrator 'admin' created\ninit done\n");
    expect(logLines(init.stderr)).toEqual([expect.objectContaining({ audit: true, action: 'user.created', target: 'user:admin' })]);

    const key = mds(['keys', 'create', 'dashboard', '--verbose']);
    expect(key.code).toBe(0);
    expect(key.stdout.split('\n')[0]).toMatch(/^API key 'dashboard' created/);
    const id = /id ([0-9a-f-]{36})/.exec(key.stdout)![1]!;
    expect(logLines(key.stderr)).toEqual([expect.objectContaining({ audit: true, actor: 'cli', action: 'api_key.created', target: `key:${id}` })]);
    // Nothing but log lines: every line of stderr is one.
    expect(key.stderr.trimEnd().split('\n')).toHaveLength(1);

    const help = mds(['keys', 'list', '--help']);
    expect(help.stdout).toMatch(/GLOBAL FLAGS\s+--verbose\s+Show the log lines/);
  }, CLI_TEST_TIMEOUT_MS);

  it('when LOG_LEVEL is set in the environment, then the log comes as with --verbose; in the env file alone, it does not', () => {
    expect(mds(['init']).code).toBe(0);
    writeFileSync(join(dir, '.env'), 'LOG_LEVEL=info\n');
    const quiet = mds(['keys', 'create', 'from-file']);
    expect([quiet.code, quiet.stderr]).toEqual([0, '']);

    const logged = mds(['keys', 'create', 'from-env'], { env: { ...env, LOG_LEVEL: 'info' } });
    expect(logged.code).toBe(0);
    expect(logLines(logged.stderr)).toEqual([expect.objectContaining({ audit: true, actor: 'cli', action: 'api_key.created' })]);

    const silent = mds(['keys', 'create', 'silenced', '--verbose'], { env: { ...env, LOG_LEVEL: 'silent' } });
    expect([silent.code, silent.stderr]).toEqual([0, '']);
  }, CLI_TEST_TIMEOUT_MS);

  it('when a command fails, then stderr is one Error line, with or without --verbose, and no stack', () => {
    expect(mds(['init']).code).toBe(0);
    for (const args of [
      ['users', 'delete', 'nobody'],
      ['users', 'delete', 'nobody', '--verbose'],
    ]) {
      const r = mds(args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(/^Error: User 'nobody' not found\n$/);
      expect(r.stdout).toBe('');
    }
  }, CLI_TEST_TIMEOUT_MS);

  it('when Redis cannot be reached to announce a change, then one plain Warning line says so; with --verbose, the log line', () => {
    const away = { ...env, CACHE_URL: 'redis://127.0.0.1:1/0' };
    expect(mds(['init'], { env: away }).code).toBe(0);
    const quiet = mds(['users', 'set-password', 'admin'], { input: 'a-new-pass-1\n', env: away });
    expect(quiet.code).toBe(0);
    expect(quiet.stdout).toBe("Password of 'admin' changed\n");
    expect(quiet.stderr).toMatch(/^Warning: Could not reach Redis to tell running instances of this change: [^\n]+\n$/);

    const verbose = mds(['users', 'set-password', 'admin', '--verbose'], { input: 'a-new-pass-2\n', env: away });
    expect(verbose.code).toBe(0);
    expect(verbose.stderr).not.toMatch(/^Warning:/m);
    expect(logLines(verbose.stderr)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ level: 40, msg: expect.stringMatching(/^Could not reach Redis/) }),
        expect.objectContaining({ audit: true, actor: 'cli', action: 'user.password_set' }),
      ]),
    );
  }, CLI_TEST_TIMEOUT_MS);

  it('when serve or mcp is given --verbose, then it is refused: their log is always shown', () => {
    for (const command of ['serve', 'mcp']) {
      const r = mds([command, '--verbose']);
      expect(r.code, command).toBe(2);
      expect(r.stderr, command).toMatch(/^Error: .*--verbose.*\(see --help\)\n$/);
    }
  });
});
