/**
 * A command loads only what it uses (DESIGN 27): `mds --help` loads no database, HTTP, cache or
 * protocol package, and `mds keys list` loads the database but not the HTTP app, the Redis client or
 * the MCP SDK. Proved by the modules each process actually loaded (test/helpers/module-trace.mjs),
 * not by how long it took.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv } from '../helpers/cli-env.js';
import { MDS_BIN } from '../helpers/serve-process.js';

const TRACE = resolve(import.meta.dirname, '../helpers/module-trace.mjs');
const DIST = resolve(import.meta.dirname, '../../dist');

/** Packages whose loading means a command pulled in the service, not only its own path. */
const SERVICE_PACKAGES = ['express', 'express-openapi-validator', 'ioredis', 'apache-arrow', '@modelcontextprotocol/sdk', 'ws', 'protobufjs', 'prom-client', 'pg'];
/** What only a command that opens the database loads. */
const DATABASE_PACKAGES = ['typeorm', 'better-sqlite3'];

let dir: string;
let env: NodeJS.ProcessEnv;

/** Runs `mds ...args` with the module trace; resolves to its exit code, the packages it loaded and the dist/ modules it loaded. */
function traced(args: string[]): { code: number | null; stderr: string; packages: Set<string>; own: Set<string> } {
  const file = join(dir, `trace-${args.join('-')}.txt`);
  rmSync(file, { force: true });
  const r = spawnSync(process.execPath, ['--import', TRACE, MDS_BIN, ...args], { cwd: dir, env: { ...env, MODULE_TRACE_FILE: file }, encoding: 'utf8', timeout: 60_000 });
  const paths = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => (line.startsWith('file:') ? fileURLToPath(line) : line));
  const packages = new Set(paths.map((p) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(p)?.[1]).filter((p): p is string => p !== undefined));
  const own = new Set(paths.filter((p) => p.startsWith(`${DIST}/`)).map((p) => p.slice(DIST.length + 1)));
  return { code: r.status, stderr: r.stderr, packages, own };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'mds-cli-modules-'));
  env = cliEnv(dir, 'cli-modules-test-secret-0123456789abcdef');
  const init = spawnSync(process.execPath, [MDS_BIN, 'init'], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
  expect(init.status, init.stderr).toBe(0);
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('modules a command loads', () => {
  it('mds --help: oclif and the command declarations only, no database, HTTP, cache or protocol package and no service module', () => {
    const help = traced(['--help']);
    expect(help.code, help.stderr).toBe(0);
    expect(help.packages).toContain('@oclif/core');
    expect([...help.packages].filter((p) => [...SERVICE_PACKAGES, ...DATABASE_PACKAGES, 'zod', 'pino', 'piscina'].includes(p))).toEqual([]);
    expect([...help.own].filter((m) => m === 'main.js' || m === 'config.js' || /^(http|infra)\//.test(m))).toEqual([]);
  });

  it.each(['serve', 'mcp', 'history backfill', 'keys create'])('mds %s --help loads no database or HTTP package either', (command) => {
    const help = traced([...command.split(' '), '--help']);
    expect(help.code, help.stderr).toBe(0);
    expect([...help.packages].filter((p) => [...SERVICE_PACKAGES, ...DATABASE_PACKAGES].includes(p))).toEqual([]);
  });

  it('mds keys list: the database (typeorm, better-sqlite3), not the HTTP app, the Redis client, the MCP SDK or the login machinery', () => {
    const list = traced(['keys', 'list']);
    expect(list.code, list.stderr).toBe(0);
    // The trace sees CommonJS packages loaded deep inside others: without these the checks below would prove nothing.
    expect([...list.packages]).toEqual(expect.arrayContaining(DATABASE_PACKAGES));
    expect([...list.packages].filter((p) => [...SERVICE_PACKAGES, 'jsonwebtoken', 'rate-limiter-flexible'].includes(p))).toEqual([]);
    expect([...list.own].filter((m) => m === 'main.js' || /^http\//.test(m) || /^infra\/(market|cache|stream)\//.test(m))).toEqual([]);
    // Neither what only a pretty terminal log, the candle reader thread or another command needs.
    expect([...list.packages].filter((p) => ['pino-pretty', 'piscina'].includes(p))).toEqual([]);
    expect([...list.own].filter((m) => m.startsWith('commands/') && m !== 'commands/keys/list.js')).toEqual([]);
  });

  it('the build wrote oclif.manifest.json for exactly the commands under dist/commands, so oclif imports no other command', () => {
    const manifest = JSON.parse(readFileSync(resolve(DIST, '../oclif.manifest.json'), 'utf8')) as { commands: Record<string, unknown> };
    const built = readdirSync(join(DIST, 'commands'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.js'))
      .map((f) => f.slice(0, -'.js'.length).split(sep).join(':'))
      .sort();
    expect(Object.keys(manifest.commands).sort()).toEqual(built);
  });
});
