/**
 * Clients generated from openapi.yaml as users make them, against the real service: openapi-typescript
 * with openapi-fetch, and @hey-api/openapi-ts with its fetch client, each into a temporary directory,
 * typechecked with tsc, then run (clients/typescript/*.ts): a quote, history as JSON and as CSV, login,
 * admin calls with a token (status, cache flush) and with an API key (list and create users, create a
 * key), every one of them answering `{success: true, data}`. Each program checks its answers against its
 * generated types at run time, and at compile time that history's CSV and Arrow answers are typed as
 * what they are; here each answer is also checked against the contract's schema.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schemaViolations } from '../helpers/contract-schema.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ROOT = resolve(import.meta.dirname, '../..');
const SPEC = resolve(ROOT, 'openapi.yaml');
const PROGRAMS = resolve(ROOT, 'clients/typescript');
const OPENAPI_TS = resolve(ROOT, 'node_modules/openapi-typescript/bin/cli.js');
const HEY_API = resolve(ROOT, 'node_modules/@hey-api/openapi-ts/bin/run.js');
const TSC = resolve(ROOT, 'node_modules/typescript/bin/tsc');

/** An administrator of its own, so login throttling counters shared through Redis never collide. */
const USER = { username: `generated-clients-${process.pid}`, password: 'generated-clients-password-1' };
const API_KEY = 'generated-clients-api-key-0123456789abcdef';

/** Runs a process without blocking this event loop (the service it calls lives in this process). */
function run(args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<{ code: number | null; stdout: string; output: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let output = '';
    child.stdout.on('data', (c: Buffer) => ((stdout += c.toString()), (output += c.toString())));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.once('error', fail);
    child.once('exit', (code) => done({ code, stdout, output }));
  });
}

/** The project's compiler options (strict, noUncheckedIndexedAccess, NodeNext), checking `files` only. */
function tsconfig(files: string[]): string {
  const project = JSON.parse(readFileSync(resolve(ROOT, 'tsconfig.json'), 'utf8')) as { compilerOptions: Record<string, unknown> };
  const { outDir: _outDir, rootDir: _rootDir, sourceMap: _sourceMap, ...compilerOptions } = project.compilerOptions;
  // DOM: the generated fetch clients name Request, Response, Blob and File as a browser has them.
  return JSON.stringify({ compilerOptions: { ...compilerOptions, lib: ['ES2023', 'DOM', 'DOM.Iterable'], noEmit: true }, files });
}

type Answers = Record<string, unknown> & { csv: string; users: { success: boolean; data: unknown[] }; sent?: string[][]; arrowHead?: number[] };

let svc: TestService;
let dir: string;

beforeAll(async () => {
  svc = await startTestService({ API_KEYS: API_KEY, DEFAULT_ADMIN_USERNAME: USER.username, DEFAULT_ADMIN_PASSWORD: USER.password }, { init: true });
  dir = mkdtempSync(join(tmpdir(), 'mds-generated-clients-'));
  // The programs resolve openapi-fetch, tsx and @types/node from the project, and are ES modules like it.
  symlinkSync(resolve(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  for (const name of ['openapi-fetch', 'hey-api']) {
    mkdirSync(join(dir, name));
    copyFileSync(join(PROGRAMS, `${name}.ts`), join(dir, name, 'main.ts'));
    writeFileSync(join(dir, name, 'tsconfig.json'), tsconfig(['main.ts']));
  }
});
afterAll(async () => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  await svc?.close();
});

/** Generates, typechecks and runs one client; returns what its program printed. */
async function generateCheckAndRun(name: 'openapi-fetch' | 'hey-api', generate: string[]): Promise<Answers> {
  const cwd = join(dir, name);
  const generated = await run(generate, cwd);
  expect(generated.code, generated.output).toBe(0);
  const typecheck = await run([TSC, '-p', 'tsconfig.json'], cwd);
  expect({ code: typecheck.code, output: typecheck.output }).toEqual({ code: 0, output: '' });
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, MDS_URL: svc.url, MDS_USERNAME: USER.username, MDS_PASSWORD: USER.password, MDS_API_KEY: API_KEY };
  const ran = await run(['--import', 'tsx', 'main.ts'], cwd, env);
  expect(ran.code, ran.output).toBe(0);
  return JSON.parse(ran.stdout) as Answers;
}

/** Every answer a program printed, against the contract's schemas. */
function expectContractShapes(answers: Answers): void {
  expect(schemaViolations('QuoteResponse', answers.quote)).toEqual([]);
  expect(schemaViolations('HistoryResponse', answers.history)).toEqual([]);
  expect(schemaViolations('HistoryCsv', answers.csv)).toEqual([]);
  expect(answers.csv.split('\r\n').length).toBeGreaterThan(15);
  expect(schemaViolations('LoginResult', answers.login)).toEqual([]);
  expect(schemaViolations('AdminStatusResponse', answers.status)).toEqual([]);
  expect(schemaViolations('CacheFlushResponse', answers.flushed)).toEqual([]);
  expect(schemaViolations('UserList', answers.users)).toEqual([]);
  expect(answers.users.data.length).toBeGreaterThan(0);
  expect(schemaViolations('UserResponse', answers.created)).toEqual([]);
  expect(schemaViolations('CreatedApiKeyResponse', answers.key)).toEqual([]);
  for (const answer of [answers.status, answers.flushed, answers.users, answers.created, answers.key]) expect(Object.keys(answer as object).sort()).toEqual(['data', 'success']);
}

describe('clients generated from openapi.yaml', () => {
  it('openapi-typescript + openapi-fetch: when generated, typechecked and run against the service, then every answer has its generated type', async () => {
    const answers = await generateCheckAndRun('openapi-fetch', [OPENAPI_TS, SPEC, '-o', 'api.ts']);

    expectContractShapes(answers);
  }, 60_000);

  it('@hey-api/openapi-ts: when generated, typechecked and run with one secret as `auth`, then token and key each work, sent as both schemes, and every answer has its generated type', async () => {
    const answers = await generateCheckAndRun('hey-api', [HEY_API, '-i', SPEC, '-o', 'client', '-c', '@hey-api/client-fetch', '--silent', '--no-log-file']);

    expectContractShapes(answers);
    // The SDK sent the one secret as both credentials, for the token and for the key: the case the service reads as one.
    expect(answers.sent).toEqual(Array.from({ length: 5 }, () => ['authorization', 'x-api-key']));
    expect(answers.arrowHead).toEqual([255, 255, 255, 255]);
  }, 60_000);
});

describe('one secret sent as both schemes, over HTTP', () => {
  it('when the API key differs from the bearer token, then both are checked and the request is refused; the same value twice is worth what it is alone', async () => {
    const token = await svc.login(USER.username, USER.password);
    const ask = (headers: Record<string, string>) => svc.fetch('/api/admin/status', { headers }).then(async (res) => ({ status: res.status, error: ((await res.json()) as { error?: string }).error }));

    const tokenTwice = await ask({ authorization: `Bearer ${token}`, 'x-api-key': token });
    const keyTwice = await ask({ authorization: `Bearer ${API_KEY}`, 'x-api-key': API_KEY });
    const tokenAndOtherKey = await ask({ authorization: `Bearer ${token}`, 'x-api-key': `${API_KEY}x` });
    const badTokenTwice = await ask({ authorization: `Bearer ${token}x`, 'x-api-key': `${token}x` });
    const badKeyTwice = await ask({ authorization: `Bearer ${API_KEY}x`, 'x-api-key': `${API_KEY}x` });

    expect(tokenTwice.status).toBe(200);
    expect(keyTwice.status).toBe(200);
    expect(tokenAndOtherKey).toEqual({ status: 401, error: 'Invalid API key' });
    expect(badTokenTwice).toEqual({ status: 401, error: 'Invalid token' });
    expect(badKeyTwice).toEqual({ status: 401, error: 'Invalid API key' });
  });
});
