/**
 * `mds keys create|list|revoke` as processes against the database of a running `mds serve` process:
 * a key made at the command line works over HTTP, and one revoked there is refused within a second.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logFile, noteSecrets } from '../helpers/log-files.js';
import { cliEnv } from '../helpers/cli-env.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

let dir: string;
let env: NodeJS.ProcessEnv;
let serve: ServeProcess;

const cliStderr = logFile('cli-stderr');

/** Runs `mds ...args`; stderr (the CLI's log and audit lines) joins the run's logs, and any key it prints is noted. */
function mds(args: string[]) {
  const r = spawnSync(process.execPath, [MDS_BIN, ...args], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  cliStderr(r.stderr);
  noteSecrets(...(r.stdout.match(/mds_[A-Za-z0-9_-]{43}/g) ?? []));
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The JSON audit lines a command wrote to stderr. */
function auditLines(stderr: string): Array<Record<string, unknown>> {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.audit === true);
}

/** Each `mds` process takes seconds on a loaded machine; a test here runs up to seven of them. */
const CLI_TEST_TIMEOUT_MS = 120_000;

const adminStatus = (key: string) => fetch(`${serve.url}/api/admin/status`, { headers: { 'x-api-key': key } });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mds-keys-cli-'));
  env = cliEnv(dir, 'keys-cli-test-secret-0123456789abcdef');
  expect(mds(['init']).code).toBe(0);
  serve = await spawnServe(['--port', '0', '--host', '127.0.0.1'], { cwd: dir, env });
});

afterAll(async () => {
  await serve?.stop('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

describe('mds keys', () => {
  it('create prints the key once; list shows it without secret or digest; the key works over HTTP; revoke makes the service answer 401 within a second', async () => {
    // --verbose: the audit lines (checked at the end) are the CLI's log, shown only when asked for.
    const created = mds(['keys', 'create', 'robot', '--role', 'admin', '--rate-limit', '120', '--verbose']);
    expect(created.code).toBe(0);
    const [headline, key, warning, ...rest] = created.stdout.split('\n');
    expect(headline).toMatch(/^API key 'robot' created \(id [0-9a-f-]{36}, role admin\)$/);
    expect(key).toMatch(/^mds_[A-Za-z0-9_-]{43}$/);
    expect(warning).toMatch(/cannot be shown again/);
    expect(rest.join('')).toBe('');
    const id = /id ([0-9a-f-]{36})/.exec(headline ?? '')?.[1] ?? '';
    const secret = key ?? '';

    const listed = mds(['keys', 'list', '--json']);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual({
      success: true,
      data: [{ id, name: 'robot', role: 'admin', rate_limit_per_minute: 120, expires_at: null, created_at: expect.any(String), last_used_at: null, created_by: 'cli' }],
    });
    const table = mds(['keys', 'list']);
    expect(table.stdout).toMatch(/^ID\s+NAME\s+ROLE/);
    expect(table.stdout).toContain(id);
    for (const out of [listed.stdout, table.stdout]) {
      expect(out).not.toContain(secret);
      expect(out).not.toContain(createHash('sha256').update(secret).digest('hex'));
    }

    expect((await adminStatus(secret)).status).toBe(200);

    const revoked = mds(['keys', 'revoke', id, '--verbose']);
    const revokedAt = Date.now();
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toBe(`API key '${id}' revoked\n`);
    await waitFor(async () => (await adminStatus(secret)).status === 401, { timeoutMs: 1000, message: 'the service refuses the key revoked at the command line' });
    expect(Date.now() - revokedAt).toBeLessThan(1000);

    const again = mds(['keys', 'revoke', id]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain(`API key '${id}' not found`);
    expect(again.stderr).not.toMatch(/\n\s+at /);

    expect(auditLines(created.stderr)).toEqual([expect.objectContaining({ actor: 'cli', action: 'api_key.created', target: `key:${id}`, role: 'admin' })]);
    expect(auditLines(revoked.stderr)).toEqual([expect.objectContaining({ actor: 'cli', action: 'api_key.revoked', target: `key:${id}` })]);
    expect(created.stderr).not.toContain(secret);
  }, CLI_TEST_TIMEOUT_MS);

  it('a read key made at the command line gets 403 on admin endpoints; --json shows the key once', async () => {
    const created = mds(['keys', 'create', 'viewer', '--json']);
    expect(created.code).toBe(0);
    const { success, data: body } = JSON.parse(created.stdout) as { success: boolean; data: { key: string; role: string } };
    expect(success).toBe(true);
    expect(body.role).toBe('read');

    const res = await adminStatus(body.key);

    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: string }).error).toBe('Administrator rights required');
  }, CLI_TEST_TIMEOUT_MS);

  it('refuses bad input with one line and a non-zero exit: an expiry in the past, an unknown role, a bad name', () => {
    const past = mds(['keys', 'create', 'late', '--expires-at', '2001-01-01T00:00:00Z']);
    expect(past.code).not.toBe(0);
    expect(past.stderr).toContain('must lie in the future');

    const role = mds(['keys', 'create', 'x', '--role', 'owner']);
    expect(role.code).not.toBe(0);
    expect(role.stderr).toMatch(/role/);

    const name = mds(['keys', 'create', 'bad name']);
    expect(name.code).not.toBe(0);
    expect(name.code).toBe(2);
    expect(name.stderr).toContain('NAME must be 1 to 64 letters');
    for (const r of [past, role, name]) expect(r.stderr).not.toMatch(/\n\s+at /);
  }, CLI_TEST_TIMEOUT_MS);

  it.each([['create'], ['list'], ['revoke']])('keys %s --help shows a description and examples', (cmd) => {
    const r = mds(['keys', cmd, '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/DESCRIPTION/);
    expect(r.stdout).toMatch(/EXAMPLES/);
  });
});
