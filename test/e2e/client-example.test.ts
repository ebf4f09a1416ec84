/**
 * examples/client.ts against a real service, and proof that it is tied to the contract: with a Quote
 * field renamed in openapi.yaml, the regenerated types make the example fail to compile.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseDocument } from 'yaml';
import { main } from '../../examples/client.js';
import { startTestService, type TestService } from '../helpers/service.js';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');
const EXAMPLE = resolve(ROOT, 'examples/client.ts');
const OPENAPI_TS = resolve(ROOT, 'node_modules/openapi-typescript/bin/cli.js');
const TSC = resolve(ROOT, 'node_modules/typescript/bin/tsc');

/** An administrator of its own, so login throttling counters shared through Redis never collide. */
const USER = { username: `client-example-${process.pid}`, password: 'client-example-password-1' };
const API_KEY = 'client-example-api-key-0123456789abcdef';

describe('examples/client.ts', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(
      {
        API_KEYS: API_KEY,
        DEFAULT_ADMIN_USERNAME: USER.username,
        DEFAULT_ADMIN_PASSWORD: USER.password,
        LOGIN_MAX_FAILURES: '1000',
        // A database of its own: another suite flushing the shared one cannot change the ETag mid-test.
        CACHE_URL: `redis://127.0.0.1:${inject('redisPort')}/13`,
      },
      { init: true },
    );
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('main: when run against a service, then every step answers as the contract says', async () => {
    const lines: string[] = [];
    const summary = await main(svc.url, { ...USER, apiKey: API_KEY }, (line) => lines.push(line));

    expect(summary.login).toEqual({ status: 200, username: USER.username, isAdmin: true, expiresInS: expect.any(Number), mustChangePassword: true });
    expect(summary.adminStatus).toMatchObject({ status: 200, cacheMode: 'redis', users: 1 });
    expect(summary.users).toEqual({ status: 200, usernames: [USER.username] });
    expect(summary.indices.status).toBe(200);
    expect(summary.indices.xCache).toMatch(/^(HIT|MISS)$/);
    expect(summary.indices.etag).toMatch(/^"[^"]+"$/);
    expect(summary.indices.source).toBe('simulated');
    expect(summary.indices.quotes.length).toBeGreaterThan(0);
    for (const q of summary.indices.quotes) expect(Number.isFinite(q.change_percent)).toBe(true);
    expect(summary.revalidated).toEqual({ status: 304, xCache: 'HIT' });
    expect(summary.quotes).toEqual({ status: 200, symbols: ['^GSPC', 'AAPL'], missing: ['NOSUCH'] });
    expect(summary.quote).toEqual({ status: 200, symbol: 'AAPL', marketState: expect.stringMatching(/^(open|closed|pre|post)$/), instrumentType: 'equity' });
    expect(summary.history).toMatchObject({ status: 200, interval: '1d', timezone: 'America/New_York' });
    expect(summary.history.candles).toBeGreaterThan(15);
    expect(summary.search.status).toBe(200);
    expect(summary.search.symbols[0]).toBe('AAPL');
    expect(summary.markets.status).toBe(200);
    expect(summary.markets.markets.map((m) => m.market)).toEqual(expect.arrayContaining(['US', 'UK', 'DE', 'EU', 'JP', 'HK', 'CN', 'CRYPTO', 'FX']));
    expect(summary.unknownSymbol).toEqual({ status: 404, error: "Unknown symbol 'NOSUCH'" });
    expect(summary.failedLogin).toEqual({ status: 401, code: 401, error: expect.stringMatching(/\S/) });
    expect(lines.some((l) => l.includes('HTTP 304'))).toBe(true);
  });

  it('CLI: when run with node --import tsx and the credentials in the environment, then it prints the walk-through and exits 0', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', EXAMPLE, svc.url], {
      cwd: ROOT,
      env: { ...process.env, MDS_USERNAME: USER.username, MDS_PASSWORD: USER.password, MDS_API_KEY: API_KEY },
      timeout: 20_000,
    });
    expect(stdout).toContain(`logged in as ${USER.username}`);
    expect(stdout).toContain('revalidated with If-None-Match: HTTP 304');
    expect(stdout).toMatch(/a wrong password: HTTP 401, code 401: \S/);
  });
});

describe('examples/client.ts and the contract', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'mds-client-types-'));
    // The copy resolves openapi-fetch and @types/node from the project, and is an ES module like it.
    symlinkSync(resolve(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Generates types from `spec` with the project's generator, then typechecks a copy of the example against them. */
  async function typecheckAgainst(variant: 'original' | 'renamed', spec: string): Promise<{ code: number; output: string }> {
    const specFile = join(dir, `openapi.${variant}.yaml`);
    writeFileSync(specFile, spec);
    await run(process.execPath, [OPENAPI_TS, specFile, '-o', join(dir, `api.${variant}.ts`)], { cwd: dir });
    const source = readFileSync(EXAMPLE, 'utf8');
    const copy = source.replace("from '../src/generated/api.js'", `from './api.${variant}.js'`);
    expect(copy).not.toBe(source);
    writeFileSync(join(dir, `client.${variant}.ts`), copy);
    writeFileSync(join(dir, `tsconfig.${variant}.json`), JSON.stringify(tsconfigFor(variant)));
    try {
      const { stdout } = await run(process.execPath, [TSC, '-p', join(dir, `tsconfig.${variant}.json`)], { cwd: dir });
      return { code: 0, output: stdout };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: typeof e.code === 'number' ? e.code : -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
    }
  }

  function tsconfigFor(variant: string): object {
    const tsconfig = JSON.parse(readFileSync(resolve(ROOT, 'tsconfig.json'), 'utf8')) as { compilerOptions: Record<string, unknown> };
    const { outDir: _outDir, rootDir: _rootDir, sourceMap: _sourceMap, ...compilerOptions } = tsconfig.compilerOptions;
    return { compilerOptions: { ...compilerOptions, noEmit: true }, files: [`client.${variant}.ts`] };
  }

  it('types: when Quote.change_percent is renamed in openapi.yaml, then the example no longer compiles, and it does with the spec as is', async () => {
    const original = readFileSync(resolve(ROOT, 'openapi.yaml'), 'utf8');
    const doc = parseDocument(original);
    const path = ['components', 'schemas', 'Quote'];
    const required = doc.getIn([...path, 'required']) as { items: Array<{ value: unknown }> };
    const entry = required.items.find((i) => i.value === 'change_percent');
    if (!entry) throw new Error('Quote.required has no change_percent');
    entry.value = 'change_pct';
    const property: unknown = doc.getIn([...path, 'properties', 'change_percent']);
    expect(property).toBeDefined();
    doc.deleteIn([...path, 'properties', 'change_percent']);
    doc.setIn([...path, 'properties', 'change_pct'], property);
    const renamed = doc.toString();

    const [asIs, broken] = await Promise.all([typecheckAgainst('original', original), typecheckAgainst('renamed', renamed)]);

    expect(asIs).toEqual({ code: 0, output: '' });
    expect(broken.code).not.toBe(0);
    expect(broken.output).toMatch(/client\.renamed\.ts\(\d+,\d+\): error TS\d+/);
    expect(broken.output).toContain('change_percent');
  }, 60_000);
});
