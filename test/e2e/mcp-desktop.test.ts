/**
 * `mds mcp` started as a desktop MCP client starts it (issue 52): the stdio config of docs/mcp.md, its
 * command and arguments as written (the clone's path put in), in a folder that has nothing to do with
 * mds, with only the config's environment and PATH. It must answer over stdio and leave that folder
 * as it found it; started on a SQLite database that does not exist, it must say which path it looked
 * at and stop, creating nothing.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv } from '../helpers/cli-env.js';
import { logFile, noteSecrets } from '../helpers/log-files.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { MDS_BIN } from '../helpers/serve-process.js';

const TIMEOUT_MS = 60_000;
/** Where docs/mcp.md's config has the clone. */
const DOC_CLONE = '/home/me/mds';

let redis: RedisProcess;
/** Stands for the clone's data: the database `mds init` created. */
let home: string;
let database: string;
let readKey: string;
const folders: string[] = [];
const children: ChildProcessWithoutNullStreams[] = [];
/** How long a server may take to exit once its client closed stdin (as the MCP stdio transport ends a session). */
const EXIT_AFTER_STDIN_MS = 15_000;

/** An empty folder of no concern to mds, as a client's working directory. */
function unrelatedFolder(): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'mds-desktop-cwd-')));
  folders.push(dir);
  return dir;
}

interface ServerConfig {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** The stdio server of docs/mcp.md: the JSON block whose server is started with `node`. */
function documentedConfig(): ServerConfig {
  const page = readFileSync(resolve(import.meta.dirname, '../../docs/mcp.md'), 'utf8');
  const blocks = [...page.matchAll(/```json\n([\s\S]*?)\n```/g)].map((m) => JSON.parse(m[1]!) as { mcpServers?: Record<string, Partial<ServerConfig>> });
  const stdio = blocks.flatMap((block) => Object.values(block.mcpServers ?? {})).filter((server) => server.command === 'node');
  expect(stdio, 'docs/mcp.md gives one stdio config, started with node').toHaveLength(1);
  return stdio[0] as ServerConfig;
}

type JsonRpcAnswer = { id: number; result?: Record<string, unknown>; error?: { message: string } };

/** A JSON-RPC session over a child's stdin and stdout, one message per line, as the MCP stdio transport speaks. */
function stdioSession(child: ChildProcessWithoutNullStreams, stderr: () => string) {
  const waiting = new Map<number, { resolve: (answer: JsonRpcAnswer) => void; reject: (err: Error) => void }>();
  let buffered = '';
  let nextId = 1;
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      const answer = JSON.parse(buffered.slice(0, end)) as JsonRpcAnswer;
      buffered = buffered.slice(end + 1);
      waiting.get(answer.id)?.resolve(answer);
      waiting.delete(answer.id);
    }
  });
  child.once('exit', (code) => {
    for (const { reject } of waiting.values()) reject(new Error(`mds mcp exited (${code}) before answering: ${stderr()}`));
  });
  const send = (message: Record<string, unknown>) => child.stdin.write(`${JSON.stringify(message)}\n`);
  return {
    request(method: string, params: Record<string, unknown> = {}): Promise<JsonRpcAnswer> {
      const id = nextId++;
      return new Promise((resolveAnswer, reject) => {
        waiting.set(id, { resolve: resolveAnswer, reject });
        send({ jsonrpc: '2.0', id, method, params });
      });
    },
    notify: (method: string) => send({ jsonrpc: '2.0', method }),
  };
}

/** Starts `config` as a desktop client does: in `cwd`, with only its env and PATH. */
function startAsClient(config: ServerConfig, cwd: string) {
  const child = spawn(config.command, config.args, { cwd, env: { PATH: process.env.PATH!, ...config.env } });
  children.push(child);
  let stderr = '';
  const toLog = logFile('mcp-desktop-stderr');
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    toLog(chunk.toString());
  });
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return { child, exited, stderr: () => stderr, session: stdioSession(child, () => stderr) };
}

beforeAll(async () => {
  redis = await startRedis();
  home = mkdtempSync(join(tmpdir(), 'mds-desktop-home-'));
  database = join(home, 'data', 'mds.sqlite');
  const env = cliEnv(home, 'mcp-desktop-secret-0123456789abcdefghij', { CACHE_URL: redis.url });
  const mds = (args: string[]) => spawnSync(process.execPath, [MDS_BIN, ...args], { cwd: home, env, encoding: 'utf8', timeout: 60_000 });
  expect(mds(['init']).status).toBe(0);
  readKey = (JSON.parse(mds(['keys', 'create', 'desktop-agent', '--json']).stdout) as { data: { key: string } }).data.key;
  noteSecrets(readKey);
}, 120_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await redis?.stop();
  for (const dir of [home, ...folders]) if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('mds mcp started by a desktop client', () => {
  it("when docs/mcp.md's config is started from an unrelated folder, then it initializes, lists the tools, answers get_quote, and writes nothing in that folder", async () => {
    const documented = documentedConfig();
    expect(documented.args).toEqual([`${DOC_CLONE}/bin/run.js`, 'mcp']);
    expect(documented.env.DATABASE_URL, 'the database as an absolute path').toMatch(/^sqlite:\//);
    expect(isAbsolute(documented.env.DATABASE_URL!.slice('sqlite:'.length))).toBe(true);
    expect(Object.keys(documented.env).sort()).toEqual(['CACHE_URL', 'DATABASE_URL', 'MCP_API_KEY']);
    // The config with this checkout for the clone, and the test's database, key and Redis for the examples.
    const config: ServerConfig = {
      command: documented.command,
      args: documented.args.map((arg) => (arg === `${DOC_CLONE}/bin/run.js` ? MDS_BIN : arg)),
      env: { DATABASE_URL: `sqlite:${database}`, MCP_API_KEY: readKey, CACHE_URL: redis.url },
    };
    const cwd = unrelatedFolder();
    const mcp = startAsClient(config, cwd);
    try {
      const init = await mcp.session.request('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'desktop-test', version: '1.0.0' } });
      expect(init.result?.serverInfo).toMatchObject({ name: 'mds' });
      mcp.session.notify('notifications/initialized');
      const listed = await mcp.session.request('tools/list');
      const names = (listed.result?.tools as Array<{ name: string }>).map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['get_quote', 'get_history', 'get_indicators']));
      expect(names, 'a read key sees no admin tool').not.toContain('get_usage');
      const quote = await mcp.session.request('tools/call', { name: 'get_quote', arguments: { symbol: 'AAPL' } });
      const result = quote.result as { isError?: boolean; content: Array<{ text: string }>; structuredContent: { data: { symbol: string; price: number } } };
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      expect(result.structuredContent.data).toMatchObject({ symbol: 'AAPL', price: expect.any(Number) });
      expect(result.content[0]!.text).toMatch(/^AAPL \(Apple Inc\.\) [\d.]+ USD/);
    } finally {
      mcp.child.stdin.end();
    }
    const ended = await Promise.race([mcp.exited, new Promise((done) => setTimeout(() => done('still running'), EXIT_AFTER_STDIN_MS).unref())]);
    expect(ended, `exit once stdin is closed: ${mcp.stderr()}`).toBe(0);
    expect(readdirSync(cwd)).toEqual([]);
  }, TIMEOUT_MS);

  it('when started where the SQLite database does not exist, then it exits 1 naming the path it looked for and creates nothing', async () => {
    const bare = unrelatedFolder();
    const elsewhere = unrelatedFolder();
    const missing = join(elsewhere, 'nowhere', 'mds.sqlite');
    // A client config without DATABASE_URL (the default is relative to the folder it starts in), and one whose file is gone.
    const started = [
      startAsClient({ command: process.execPath, args: [MDS_BIN, 'mcp'], env: { MCP_API_KEY: readKey, CACHE_URL: redis.url } }, bare),
      startAsClient({ command: process.execPath, args: [MDS_BIN, 'mcp'], env: { DATABASE_URL: `sqlite:${missing}`, MCP_API_KEY: readKey, CACHE_URL: redis.url } }, bare),
    ];
    const [unset, absent] = await Promise.all(started.map(async (s) => ({ code: await s.exited, stderr: s.stderr() })));
    expect(unset!.code).toBe(1);
    expect(unset!.stderr.split('\n').filter((l) => l.startsWith('Error:'))).toEqual([
      `Error: DATABASE_URL: no database at ${join(bare, 'data', 'mds.sqlite')} (DATABASE_URL=sqlite:./data/mds.sqlite, relative to the working directory ${bare}); mds mcp never creates one. Set DATABASE_URL to the database \`mds init\` created, as an absolute path (sqlite:/path/to/mds/data/mds.sqlite)`,
    ]);
    expect(absent!.code).toBe(1);
    expect(absent!.stderr).toContain(`Error: DATABASE_URL: no database at ${missing}; mds mcp never creates one.`);
    expect(readdirSync(bare)).toEqual([]);
    expect(readdirSync(elsewhere)).toEqual([]);
  }, TIMEOUT_MS);
});
