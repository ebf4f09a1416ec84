/**
 * The README's "First calls" walk-through, run as written: `mds init` and `mds serve` as processes
 * (simulated provider, their own SQLite file and redis-server, the API_KEYS the section names), then
 * every ```sh block of the section in one bash, and every documented output line compared with what
 * the service printed. A second test changes documented lines in a copy of the section and checks
 * that the comparison reports each change, so this test can fail when the README drifts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noteSecrets } from '../helpers/log-files.js';
import { compare, parseSteps, runSteps, section, type Step, type StepOutput } from '../helpers/readme-walkthrough.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../helpers/serve-process.js';

const README = resolve(import.meta.dirname, '../../README.md');
/** Where the README's commands call mds; replaced by the test server's address. */
const DOCUMENTED_URL = 'http://127.0.0.1:8000';

let dir: string;
let redis: RedisProcess;
let serve: ServeProcess;
let text: string;
let steps: Step[];
let outputs: StepOutput[];
let stderr: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mds-readme-'));
  redis = await startRedis();
  // A new user's setup: the README's defaults (administrator admin / admin123456, simulated data),
  // with the API keys the section says to start the server with.
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: dir,
    DATABASE_URL: `sqlite:${join(dir, 'data', 'mds.sqlite')}`,
    CACHE_URL: redis.url,
    API_KEYS: 'my-key-1,my-key-2',
    // bcrypt's cost only changes how long a login takes, not what it answers.
    BCRYPT_ROUNDS: '4',
    // Other suites' servers run at the same time: no fixed metrics port to fight over.
    METRICS_PORT: '0',
  };
  noteSecrets('admin123456', 'a-much-better-passphrase');
  const init = spawnSync(process.execPath, [MDS_BIN, 'init'], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  expect(init.status, init.stderr).toBe(0);
  serve = await spawnServe(['--port', '0', '--host', '127.0.0.1'], { cwd: dir, env });

  text = section(readFileSync(README, 'utf8'), 'First calls');
  steps = parseSteps(text.replaceAll(DOCUMENTED_URL, serve.url));
  ({ outputs, stderr } = await runSteps(steps, { cwd: dir, env: { PATH: process.env.PATH, HOME: dir }, timeoutMs: 90_000 }));
}, 150_000);

afterAll(async () => {
  await serve?.stop('SIGTERM');
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('README: First calls', () => {
  it('when its shell blocks run against a fresh service, then every command succeeds and prints what the README says', () => {
    // The section is the walk-through, not an empty shell: most of its commands document their output.
    expect(steps.length).toBeGreaterThanOrEqual(25);
    expect(steps.filter((s) => s.expected.length > 0).length).toBeGreaterThanOrEqual(20);
    expect(text).not.toContain('SPEC.md');

    expect(outputs, stderr).toHaveLength(steps.length);
    const failed = steps.flatMap((step, i) => (outputs[i]!.status === 0 ? [] : [`exit ${outputs[i]!.status}: ${step.command}`]));
    expect(failed, stderr).toEqual([]);
    expect(compare(steps, outputs)).toEqual([]);
  });

  it('when a documented output is changed in a copy of the section, then the comparison reports that command', () => {
    const mutations: Array<[from: string, to: string, command: RegExp]> = [
      ['# -> {"ok":true,"datasource":true,"cache":true,"auth":true}', '# -> {"ok":true,"datasource":true,"cache":false,"auth":true}', /\/api\/health$/],
      ['# -> X-Cache: HIT', '# -> X-Cache: MISS', /grep -i -E/],
      ['"missing":["NOSUCH"]', '"missing":[]', /symbols=AAPL,MSFT,BTC-USD,NOSUCH/],
      ['# -> {"success":false,"error":"Unknown symbol \'NOSUCH\'"', '# -> {"success":true,"error":"Unknown symbol \'NOSUCH\'"', /\/api\/quotes\/NOSUCH$/],
      ['# -> 204', '# -> 200', /-X DELETE/],
      ['# -> 2024-01-03T14:30:00.000Z,...', '# -> 2024-01-03T14:30:00.000Z,...\n# -> 2024-01-04T14:30:00.000Z,...', /format=csv/],
    ];
    for (const [from, to, command] of mutations) {
      expect(text, from).toContain(from);
      const mutated = parseSteps(text.replace(from, to).replaceAll(DOCUMENTED_URL, serve.url));

      const mismatches = compare(mutated, outputs);

      expect(mismatches.map((m) => m.command), from).toEqual([expect.stringMatching(command)]);
    }
  });
});
