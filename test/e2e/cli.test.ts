import { spawn, spawnSync } from 'node:child_process';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream } from '../helpers/fake-upstream.js';
import { cliEnv } from '../helpers/cli-env.js';
import { MDS_BIN, spawnServe } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

const BIN = MDS_BIN;

let dir: string;
let env: NodeJS.ProcessEnv;

function mds(args: string[], input?: string) {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd: dir, env, input, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mds-cli-'));
  env = cliEnv(dir, 'cli-test-secret-key-0123456789abcdef');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('mds init', () => {
  it('creates the user table and the default administrator, prints the two lines, and is safe to run again', () => {
    const first = mds(['init']);
    expect(first.code).toBe(0);
    expect(first.stdout).toBe("Default administrator 'admin' created\ninit done\n");

    const db = new Database(join(dir, 'data', 'mds.sqlite'), { readonly: true });
    const rows = db.prepare('SELECT username, is_admin FROM users').all() as Array<{ username: string; is_admin: number }>;
    db.close();
    expect(rows).toEqual([{ username: 'admin', is_admin: 1 }]);

    const second = mds(['init']);
    expect(second.code).toBe(0);
    expect(second.stdout).toBe("Default administrator 'admin' already exists\ninit done\n");
  });

  it('when a variable is invalid, exits non-zero with one line naming it', () => {
    env.CACHE_PORT = 'abc';
    delete env.CACHE_URL;
    const r = mds(['init']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('CACHE_PORT');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('when several variables are invalid, the error names them all on one line, however long', () => {
    Object.assign(env, { CACHE_TTL_SECONDS: 'abc', RATE_LIMIT_ANONYMOUS_PER_MINUTE: '-1', DATA_REQUIRES_AUTH: 'maybe' });
    const r = mds(['keys', 'list']);
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^Error: Invalid configuration: .*CACHE_TTL_SECONDS.*RATE_LIMIT_ANONYMOUS_PER_MINUTE.*DATA_REQUIRES_AUTH/);
  });

  it('when NODE_ENV=production and SECRET_KEY is short or the example value, serve stops with one line naming SECRET_KEY', () => {
    for (const weak of ['x', 'change-me-to-a-long-random-string']) {
      Object.assign(env, { NODE_ENV: 'production', SECRET_KEY: weak });
      const r = mds(['serve', '--port', '0']);
      expect(r.code, weak).toBe(2);
      expect(r.stderr.trimEnd().split('\n'), weak).toHaveLength(1);
      expect(r.stderr).toMatch(/^Error: Invalid configuration: SECRET_KEY must be at least 32 bytes/);
      expect(r.stderr).not.toContain(weak === 'x' ? 'SECRET_KEY=x' : weak);
    }
  });

  it('when a flag or argument is refused by the parser, exits 2 with one line naming it and no usage block', () => {
    const cases: Array<[string[], RegExp]> = [
      [['serve', '--port', 'abc'], /^Error: --port: Expected an integer but received: abc \(see --help\)$/],
      [['keys', 'create', 'feed', '--rate-limit', '-5'], /^Error: --rate-limit: Expected an integer greater than or equal to 1 but received: -5 \(see --help\)$/],
      [['keys', 'create', 'feed', '--role', 'superuser'], /^Error: Expected --role=superuser to be one of: read, admin \(see --help\)$/],
      [['keys', 'revoke'], /^Error: mds keys revoke needs ID, the id of the key, as `mds keys list` shows it \(see --help\)$/],
      [['users', 'create'], /^Error: mds users create needs USERNAME, login name: 1 to 64 letters, digits, dots, dashes or underscores \(see --help\)$/],
      [['users', 'list', '--bogus'], /^Error: Nonexistent flag: --bogus \(see --help\)$/],
    ];
    for (const [args, line] of cases) {
      const r = mds(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
      expect(r.stderr.trimEnd(), args.join(' ')).toMatch(line);
      expect(r.stdout).toBe('');
    }
  });

  it('when the database is unreachable, exits non-zero with one clear line', () => {
    env.DATABASE_URL = 'postgres://nobody@127.0.0.1:1/nothing';
    const r = mds(['init']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Cannot open the database/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('mds users', () => {
  it('create (password from stdin), list, set-password and delete work on the same database as the API', () => {
    expect(mds(['init']).code).toBe(0);
    const created = mds(['users', 'create', 'analyst'], 'analyst-pass-1\n');
    expect(created.code).toBe(0);
    expect(created.stdout).toContain("User 'analyst' created");

    const list = mds(['users', 'list', '--json']);
    expect(list.code).toBe(0);
    const { data: users } = JSON.parse(list.stdout) as { data: Array<{ username: string; is_admin: boolean }> };
    expect(users.map((u) => [u.username, u.is_admin])).toEqual([
      ['admin', true],
      ['analyst', false],
    ]);
    expect(list.stdout).not.toMatch(/\$2[aby]\$/);

    expect(mds(['users', 'set-password', 'analyst'], 'another-pass-2\n').code).toBe(0);
    const deleted = mds(['users', 'delete', 'analyst']);
    expect(deleted.code).toBe(0);
    expect((JSON.parse(mds(['users', 'list', '--json']).stdout) as { data: unknown[] }).data).toHaveLength(1);
  }, 90_000);

  it('refuses bad input with one line and a non-zero exit: unknown user, weak password, taken name, last admin', () => {
    expect(mds(['init']).code).toBe(0);
    const unknown = mds(['users', 'delete', 'nobody']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain("User 'nobody' not found");

    const weak = mds(['users', 'create', 'shorty'], 'short\n');
    expect(weak.code).not.toBe(0);
    expect(weak.stderr).toMatch(/at least 8 bytes/);

    const taken = mds(['users', 'create', 'admin'], 'whatever-pass-1\n');
    expect(taken.code).not.toBe(0);
    expect(taken.stderr).toContain('already taken');

    const last = mds(['users', 'delete', 'admin']);
    expect(last.code).not.toBe(0);
    expect(last.stderr).toContain('last administrator');
  });
});

describe('CLI conventions', () => {
  it('when an argument value is refused by the service rules, then exits 2 with one line naming the argument', () => {
    expect(mds(['init']).code).toBe(0);
    const r = mds(['keys', 'create', 'bad name!']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('Error: NAME must be 1 to 64 letters, digits, dots, dashes or underscores (see --help)\n');
    expect(r.stdout).toBe('');

    const flag = mds(['keys', 'create', 'feed', '--expires-at', 'tomorrow']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/^Error: --expires-at must be an ISO 8601 date-time .*\(see --help\)\n$/);
  });

  it('when a command is mistyped, then one line suggests the nearest one and exits 127', () => {
    const serv = mds(['serv']);
    expect(serv.code).toBe(127);
    expect(serv.stderr).toBe("Error: 'serv' is not an mds command; did you mean 'mds serve'? (see mds help)\n");

    const crate = mds(['keys', 'crate']);
    expect(crate.code).toBe(127);
    expect(crate.stderr).toContain("did you mean 'mds keys create'?");
  });

  it('when asked for help on a topic or a command, then `mds help` shows it', () => {
    const topic = mds(['help', 'keys']);
    expect(topic.code).toBe(0);
    expect(topic.stdout).toMatch(/^Managed API keys for external systems/);
    for (const command of ['keys create', 'keys list', 'keys revoke']) expect(topic.stdout).toContain(command);

    const command = mds(['help', 'keys', 'create']);
    expect(command.code).toBe(0);
    expect(command.stdout).toMatch(/USAGE\s+\$ mds keys create NAME/);
  });

  it('when LOG_FORMAT is pretty, then audit lines of a CLI action are readable log lines on stderr, not JSON', () => {
    expect(mds(['init']).code).toBe(0);
    env.LOG_FORMAT = 'pretty';
    const r = mds(['keys', 'create', 'dashboard', '--verbose']);
    expect(r.code).toBe(0);
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(mds\): audit: api_key\.created .*"actor":"cli"/);
  });

  it('when stderr is a terminal and LOG_FORMAT is unset, then audit lines (asked for) are pretty', () => {
    expect(mds(['init']).code).toBe(0);
    // util-linux `script` runs the command on a pseudo-terminal, as an operator's shell would.
    const r = spawnSync('script', ['-qec', `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} keys create dashboard --verbose`, '/dev/null'], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(0);
    const text = r.stdout.replace(/\u001B\[[0-9;]*m/g, '');
    expect(text).toMatch(/\] INFO \(mds\): audit: api_key\.created /);
    expect(text).not.toMatch(/^\{"level"/m);
  });
});

describe('mds --help', () => {
  it.each([['init'], ['serve'], ['users', 'list'], ['users', 'create'], ['users', 'delete'], ['users', 'set-password']])(
    '%s %s --help shows a description and examples',
    (...cmd) => {
      const r = mds([...cmd.filter(Boolean), '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/DESCRIPTION/);
      expect(r.stdout).toMatch(/EXAMPLES/);
    },
  );

  it('mds --help describes each topic as a whole, not as one of its commands', () => {
    const r = mds(['--help']);
    expect(r.code).toBe(0);
    const topics = r.stdout.slice(r.stdout.indexOf('TOPICS'), r.stdout.indexOf('COMMANDS')).replace(/\s+/g, ' ');
    expect(topics).toContain('keys Managed API keys for external systems: create (the key is shown once), list, revoke.');
    expect(topics).toContain('users User accounts: list, create, delete, set a password.');
  });
});

describe('mds serve', () => {
  it('logs the startup sequence, serves, and exits 0 on SIGTERM', async () => {
    expect(mds(['init']).code).toBe(0);
    const serve = await spawnServe(['--port', '0', '--host', '127.0.0.1'], { cwd: dir, env });
    const health = await fetch(`${serve.url}/api/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ ok: true, datasource: true, cache: true, auth: true });

    expect(await serve.stop('SIGTERM')).toBe(0);

    const messages = serve
      .stdout()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(messages).toContainEqual(expect.stringMatching(/redis/i));
    expect(messages).toContain("default administrator 'admin' exists");
    expect(messages).toContain('database ready');
    expect(messages).toContainEqual(expect.stringMatching(/^scheduler/));
    expect(messages).toContain('authentication ready');
    expect(messages).toContainEqual(expect.stringMatching(/^listening on http/));
    expect(messages).toContain('stopped');
  });

  it('without init, says to run `mds init`, and with Redis unreachable, says memory is used, and still serves', async () => {
    env.CACHE_URL = 'redis://127.0.0.1:1/0';
    const serve = await spawnServe(['--port', '0'], { cwd: dir, env });
    const health = (await (await fetch(`${serve.url}/api/health`)).json()) as { cache: boolean };
    expect(health.cache).toBe(false);
    const indices = await fetch(`${serve.url}/api/indices`);
    expect(indices.status).toBe(200);
    expect(await serve.stop('SIGINT')).toBe(0);
    expect(serve.stdout()).toContain('run `mds init`');
    expect(serve.stdout()).toMatch(/memory/i);
  });
});

describe('mds serve shutdown', () => {
  it('on SIGTERM while still starting (waiting for Redis), finishes starting, stops and exits 0', async () => {
    // Stands where Redis should be: takes the connection and never answers, so startup waits there.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((done) => silent.listen(0, '127.0.0.1', done));
    try {
      env.CACHE_URL = `redis://127.0.0.1:${(silent.address() as AddressInfo).port}/0`;
      const child = spawn(process.execPath, [BIN, 'serve', '--port', '0'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
      // The command is running once it tries to reach Redis.
      await waitFor(() => sockets.size > 0, { timeoutMs: 20_000, message: 'serve to connect to the silent Redis' });
      child.kill('SIGTERM');

      expect(await exited).toBe(0);
      expect(stdout).toContain('"msg":"shutting down"');
      expect(stdout).toContain('"msg":"stopped"');
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  it('on SIGTERM, a request in flight still gets its answer before the process exits 0', async () => {
    expect(mds(['init']).code).toBe(0);
    const upstream = await startFakeUpstream({ fixturesDir: resolve(import.meta.dirname, '../fixtures/yahoo') });
    try {
      await upstream.setMode('hang');
      Object.assign(env, { MARKET_DATA_PROVIDER: 'yahoo', MARKET_DATA_BASE_URL: upstream.baseUrl, MARKET_INDICES: '^IXIC', MARKET_DATA_TIMEOUT_MS: '1000' });
      const serve = await spawnServe(['--port', '0'], { cwd: dir, env });
      const inFlight = fetch(`${serve.url}/api/indices`);
      await waitFor(() => upstream.requests > 0, { message: 'the read reaches the upstream' });

      const exitCode = serve.stop('SIGTERM');
      const res = await inFlight;

      expect(res.status).toBe(503);
      expect(((await res.json()) as { code: number }).code).toBe(503);
      expect(await exitCode).toBe(0);
      expect(serve.stdout()).toContain('"msg":"stopped"');
    } finally {
      await upstream.close();
    }
  });
});

