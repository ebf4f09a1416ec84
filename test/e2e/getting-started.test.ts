/**
 * docs/getting-started.md run as written, as the README's First calls are (test/e2e/readme.test.ts):
 * `mds init` and `mds serve` as processes on a fresh SQLite file with the README's defaults, then every
 * ```sh block of the page in one bash, every documented output line compared with what was printed.
 * Then the same page after the README's First calls ran against the service (which changed the
 * administrator's password): without the password the page names, it stops at the sign-in with one
 * message; a poll of a job that does not exist stops with one message too; with it, it all passes.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noteSecrets } from '../helpers/log-files.js';
import { compare, parseSteps, runSteps, section, type Step, type StepOutput } from '../helpers/readme-walkthrough.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../helpers/serve-process.js';

const PAGE = resolve(import.meta.dirname, '../../docs/getting-started.md');
const README = resolve(import.meta.dirname, '../../README.md');
const DOCUMENTED_URL = 'http://127.0.0.1:8000';

/** A fresh database in a directory of its own, `mds init` run, and `mds serve` on it with `extra` in its environment. */
async function freshService(prefix: string, extra: NodeJS.ProcessEnv = {}): Promise<{ dir: string; serve: ServeProcess }> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: dir,
    DATABASE_URL: `sqlite:${join(dir, 'data', 'mds.sqlite')}`,
    // Without Redis, as a newcomer may start: every read still answers (from process memory).
    CACHE_URL: 'redis://127.0.0.1:1/0',
    BCRYPT_ROUNDS: '4',
    METRICS_PORT: '0',
    ...extra,
  };
  const init = spawnSync(process.execPath, [MDS_BIN, 'init'], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  expect(init.status, init.stderr).toBe(0);
  return { dir, serve: await spawnServe(['--port', '0', '--host', '127.0.0.1'], { cwd: dir, env }) };
}

let dir: string;
let serve: ServeProcess;
let text: string;
let steps: Step[];
let outputs: StepOutput[];
let stderr: string;

beforeAll(async () => {
  noteSecrets('admin123456', 'my-own-passphrase-1');
  ({ dir, serve } = await freshService('mds-getting-started-'));
  text = readFileSync(PAGE, 'utf8');
  steps = parseSteps(text.replaceAll(DOCUMENTED_URL, serve.url));
  ({ outputs, stderr } = await runSteps(steps, { cwd: dir, env: { PATH: process.env.PATH, HOME: dir }, timeoutMs: 90_000 }));
}, 150_000);

afterAll(async () => {
  await serve?.stop('SIGTERM');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('docs/getting-started.md', () => {
  it('when its shell blocks run against a fresh service, then every command succeeds and prints what the page says', () => {
    expect(steps.filter((s) => s.expected.length > 0).length).toBeGreaterThanOrEqual(7);
    expect(outputs, stderr).toHaveLength(steps.length);
    const failed = steps.flatMap((step, i) => (outputs[i]!.status === 0 ? [] : [`exit ${outputs[i]!.status}: ${step.command}`]));
    expect(failed, stderr).toEqual([]);
    expect(compare(steps, outputs)).toEqual([]);
  });

  it('when a documented output is changed in a copy of the page, then the comparison reports that command', () => {
    const mutations: Array<[from: string, to: string, command: RegExp]> = [
      ['# -> done', '# -> running', /echo "\$STATE"/],
      ['# -> 401', '# -> 200', /api\/admin\/status/],
      ['"date":"2024-12-24","open":"2024-12-24T14:30:00.000Z","close":"2024-12-24T18:00:00.000Z"', '"date":"2024-12-24","open":"2024-12-24T14:30:00.000Z","close":"2024-12-24T21:00:00.000Z"', /sessions/],
    ];
    for (const [from, to, command] of mutations) {
      expect(text, from).toContain(from);
      const mismatches = compare(parseSteps(text.replace(from, to).replaceAll(DOCUMENTED_URL, serve.url)), outputs);
      expect(mismatches.map((m) => m.command), from).toEqual([expect.stringMatching(command)]);
    }
  });
});

describe("docs/getting-started.md after the README's First calls", () => {
  let after: { dir: string; serve: ServeProcess } | undefined;
  let page: Step[];
  /** The password the page says to export after the README, and the one the README set. */
  let exported: string;
  let readmeSet: string;

  beforeAll(async () => {
    const readme = section(readFileSync(README, 'utf8'), 'First calls');
    readmeSet = /"new_password":"([^"]+)"/.exec(readme)![1]!;
    exported = /`export ADMIN_PASSWORD=([^`\s]+)`/.exec(readFileSync(PAGE, 'utf8'))![1]!;
    noteSecrets(readmeSet);
    // The API keys the README's section says to start the server with.
    after = await freshService('mds-getting-started-after-', { API_KEYS: 'my-key-1,my-key-2' });
    const readmeSteps = parseSteps(readme.replaceAll(DOCUMENTED_URL, after.serve.url));
    const ran = await runSteps(readmeSteps, { cwd: after.dir, env: { PATH: process.env.PATH, HOME: after.dir }, timeoutMs: 90_000 });
    expect(ran.outputs.filter((o) => o.status !== 0), ran.stderr).toEqual([]);
    expect(ran.outputs).toHaveLength(readmeSteps.length);
    page = parseSteps(readFileSync(PAGE, 'utf8').replaceAll(DOCUMENTED_URL, after.serve.url));
  }, 150_000);

  afterAll(async () => {
    await after?.serve.stop('SIGTERM');
    if (after) rmSync(after.dir, { recursive: true, force: true });
  });

  const run = (steps: readonly Step[], extra: NodeJS.ProcessEnv = {}) => runSteps(steps, { cwd: after!.dir, env: { PATH: process.env.PATH, HOME: after!.dir, ...extra }, timeoutMs: 90_000 });
  const stackTrace = /^\s+at |Error: .*\n\s+at |TypeError|SyntaxError/m;

  it('the password the page says to export is the one the README set', () => {
    expect(exported).toBe(readmeSet);
  });

  it('when ADMIN_PASSWORD is not exported, then the shell stops at the sign-in with one message naming what to do, and runs nothing after it', async () => {
    const { outputs: ran, stderr: said } = await run(page);
    const check = page.findIndex((step) => step.command.startsWith('[ -n "$TOKEN" ]'));
    expect(check).toBeGreaterThan(0);
    // Every step before the check ran and succeeded; the check ended the shell.
    expect(ran).toHaveLength(check);
    expect(ran.every((o) => o.status === 0)).toBe(true);
    expect(said.trimEnd().split('\n')).toEqual([expect.stringMatching(/^Sign-in refused: .*Invalid username or password.*Export ADMIN_PASSWORD/)]);
    expect(said).not.toMatch(stackTrace);
  });

  it('when the job polled does not exist, then the poll stops at once with curl\'s one line, not a stack trace per try', async () => {
    const poll = page.findIndex((step) => step.command.startsWith('for i in $(seq 100)'));
    expect(poll).toBeGreaterThan(0);
    const steps = [...page.slice(0, poll), { command: 'JOB_ID=00000000-0000-4000-8000-000000000000', expected: [] }, ...page.slice(poll)];
    const { outputs: ran, stderr: said } = await run(steps, { ADMIN_PASSWORD: exported });
    expect(ran).toHaveLength(poll + 1);
    expect(said.trimEnd().split('\n')).toEqual([expect.stringMatching(/^curl: \(22\) The requested URL returned error: 404/)]);
    expect(said).not.toMatch(stackTrace);
  });

  // Last: it changes the administrator's password again.
  it('when ADMIN_PASSWORD is exported as the page says, then every command succeeds and prints what the page says', async () => {
    const { outputs: ran, stderr: said } = await run(page, { ADMIN_PASSWORD: exported });
    expect(ran, said).toHaveLength(page.length);
    const failed = page.flatMap((step, i) => (ran[i]!.status === 0 ? [] : [`exit ${ran[i]!.status}: ${step.command}`]));
    expect(failed, said).toEqual([]);
    expect(compare(page, ran)).toEqual([]);
  });
});
