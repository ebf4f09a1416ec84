/**
 * docs/getting-started.md run as written, as the README's First calls are (test/e2e/readme.test.ts):
 * `mds init` and `mds serve` as processes on a fresh SQLite file with the README's defaults, then every
 * ```sh block of the page in one bash, every documented output line compared with what was printed.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noteSecrets } from '../helpers/log-files.js';
import { compare, parseSteps, runSteps, type Step, type StepOutput } from '../helpers/readme-walkthrough.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../helpers/serve-process.js';

const PAGE = resolve(import.meta.dirname, '../../docs/getting-started.md');
const DOCUMENTED_URL = 'http://127.0.0.1:8000';

let dir: string;
let serve: ServeProcess;
let text: string;
let steps: Step[];
let outputs: StepOutput[];
let stderr: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mds-getting-started-'));
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: dir,
    DATABASE_URL: `sqlite:${join(dir, 'data', 'mds.sqlite')}`,
    // Without Redis, as a newcomer may start: every read still answers (from process memory).
    CACHE_URL: 'redis://127.0.0.1:1/0',
    BCRYPT_ROUNDS: '4',
    METRICS_PORT: '0',
  };
  noteSecrets('admin123456', 'my-own-passphrase-1');
  const init = spawnSync(process.execPath, [MDS_BIN, 'init'], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  expect(init.status, init.stderr).toBe(0);
  serve = await spawnServe(['--port', '0', '--host', '127.0.0.1'], { cwd: dir, env });
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
