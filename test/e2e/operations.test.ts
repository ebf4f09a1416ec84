/**
 * An operator's first week (issue 38): `npm start` under a supervisor's signal, a second instance on one
 * machine, a path that cannot hold the database, the backfill's trimmed window, the default-password
 * warning, and two processes sharing one SQLite file under load. Real processes, real sockets.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/redis-server.js';
import { MDS_BIN, spawnServe, type ServeProcess } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

const REPO = resolve(import.meta.dirname, '../..');
/** No Redis: these processes need none, and a missing one costs nothing (memory fallback). */
const NO_REDIS = 'redis://127.0.0.1:1/0';

let dir: string;
let env: NodeJS.ProcessEnv;
const started: ServeProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mds-operations-'));
  env = { PATH: process.env.PATH, HOME: dir, DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`, CACHE_URL: NO_REDIS, METRICS_PORT: '0', LOG_FORMAT: 'json', SECRET_KEY: 'operations-test-secret-of-more-than-32-bytes' };
});
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop('SIGKILL')));
  rmSync(dir, { recursive: true, force: true });
});

function mds(args: string[], extra: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(process.execPath, [MDS_BIN, ...args], { cwd: dir, env: { ...env, ...extra }, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A started `mds serve`, once its log (written in batches) has reached the "listening on" line. */
async function serve(extra: NodeJS.ProcessEnv = {}, args: string[] = ['--port', '0']): Promise<ServeProcess> {
  const s = await spawnServe(args, { env: { ...env, ...extra }, cwd: dir });
  started.push(s);
  await waitFor(() => /"msg":"listening on /.test(s.stdout()), { timeoutMs: 10_000 });
  return s;
}

function exitOf(child: ChildProcess): Promise<number | null> {
  return child.exitCode !== null ? Promise.resolve(child.exitCode) : new Promise((r) => child.once('exit', (code) => r(code)));
}

/** Whether a process with this pid still runs. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('operations', () => {
  it('when npm start is sent SIGTERM, then the server it started drains and exits too (no orphan keeps the port)', async () => {
    const port = await freePort();
    const npm = spawn('npm', ['start', '--silent'], { cwd: REPO, env: { ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    npm.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    await waitFor(() => /listening on http/.test(err), { timeoutMs: 60_000 });
    const children = spawnSync('ps', ['--ppid', String(npm.pid), '-o', 'pid=,args='], { encoding: 'utf8' }).stdout.trim().split('\n');
    const server = children.map((l) => l.trim().split(/\s+/)).find((parts) => parts.includes('serve'));
    expect(server, children.join('\n')).toBeDefined();
    const serverPid = Number(server![0]);

    npm.kill('SIGTERM');
    await exitOf(npm);

    await waitFor(() => !alive(serverPid), { timeoutMs: 10_000 });
    const probe = await fetch(`http://127.0.0.1:${port}/api/health`).then(
      () => 'answered',
      () => 'refused',
    );
    expect(probe).toBe('refused');
  }, 90_000);

  it('when serve is stopped, then the process exits within a second of its "stopped" line, with code 0', async () => {
    const s = await serve();
    const stoppedAt: number[] = [];
    s.child.stdout!.on('data', (c: Buffer) => {
      if (/"msg":"stopped"/.test(c.toString())) stoppedAt.push(Date.now());
    });

    const code = await s.stop('SIGTERM');
    const exitedAt = Date.now();

    expect(code).toBe(0);
    expect(stoppedAt).toHaveLength(1);
    expect(exitedAt - stoppedAt[0]!).toBeLessThan(1000);
  });

  it('when a second instance starts on a taken port, then one line names PORT; on a taken metrics port, METRICS_PORT', async () => {
    const metricsPort = String(await freePort());
    const first = await serve({ METRICS_PORT: metricsPort });
    const port = new URL(first.url).port;

    const samePort = mds(['serve', '--port', port]);
    const sameMetrics = mds(['serve', '--port', '0'], { METRICS_PORT: metricsPort });

    expect(samePort.code).toBe(1);
    expect(samePort.stderr).toMatch(new RegExp(`^Error: 127\\.0\\.0\\.1:${port} is already in use .*set PORT`, 'm'));
    expect(sameMetrics.code).toBe(1);
    expect(sameMetrics.stderr).toMatch(/^Error: Metrics listener on 127\.0\.0\.1:\d+: .*METRICS_PORT.*PORT/m);
  }, 90_000);

  it('when DATABASE_URL names a file no directory can be made for, then serve exits 1 at once with one line naming DATABASE_URL', () => {
    const r = mds(['serve', '--port', '0'], { DATABASE_URL: 'sqlite:/proc/nope/x.sqlite' });

    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^Error: DATABASE_URL: cannot create the directory '\/proc\/nope'/m);
  });

  it('when the env file holds a mistyped variable, then startup warns with the closest known name', async () => {
    const envFile = join(dir, 'mds.env');
    writeFileSync(envFile, 'MARKET_DATA_PROVDER=yahoo\nFAVOURITE_COLOUR=blue\n');

    const s = await serve({ ENV_FILE: envFile });

    expect(s.stdout()).toMatch(/sets MARKET_DATA_PROVDER, which mds does not read \(did you mean MARKET_DATA_PROVIDER\?\)/);
    expect(s.stdout()).toMatch(/sets FAVOURITE_COLOUR, which mds does not read: it is ignored/);
  });

  it('when backfill is asked for 1m bars from years back, then it says how far back the upstream reaches; a future --since is said in the command\'s words', () => {
    const trimmed = mds(['history', 'backfill', 'AAPL', '--interval', '1m', '--since', '2020-01-01']);
    const future = mds(['history', 'backfill', 'AAPL', '--since', '2999-01-01']);

    expect(trimmed.code, trimmed.stderr).toBe(0);
    expect(trimmed.stdout).toMatch(/^backfill done: \d+ bars stored for 1 of 1 symbols \(1m since \d{4}-\d{2}-\d{2}\)$/m);
    expect(trimmed.stdout).not.toMatch(/1m since 2020-01-01/);
    expect(trimmed.stdout).toMatch(/^note: 1m bars reach back to \d{4}-\d{2}-\d{2} upstream, so nothing before it was fetched \(asked since 2020-01-01\)/m);
    expect(future.code).toBe(2);
    expect(future.stderr).toMatch(/^Error: --since must not be in the future \(see --help\)$/m);
    expect(future.stderr).not.toMatch(/body\./);
  }, 90_000);

  it('when the administrator has changed the shipped default password, then startup no longer warns about it', async () => {
    expect(mds(['init']).code).toBe(0);
    const before = await serve();
    expect(before.stdout()).toMatch(/still has the shipped default password/);
    await before.stop('SIGTERM');

    const changed = spawnSync(process.execPath, [MDS_BIN, 'users', 'set-password', 'admin'], { cwd: dir, env, input: 'a-new-password-1\n', encoding: 'utf8' });
    expect(changed.status, changed.stderr).toBe(0);
    const after = await serve();

    expect(after.stdout()).toMatch(/default administrator 'admin' exists/);
    expect(after.stdout()).not.toMatch(/shipped default password/);
  }, 90_000);
});

describe('two processes on one SQLite file', () => {
  it('when both fill and read history under load, then every answer is 2xx', async () => {
    expect(mds(['init']).code).toBe(0);
    const [a, b] = await Promise.all([serve(), serve()]);
    const symbols = ['AAPL', 'MSFT', 'NVDA', 'AMZN', 'GOOGL', 'META', 'TSLA', 'JPM', 'V', 'XOM', 'KO', 'PEP', 'WMT', 'DIS', 'INTC', 'CSCO'];
    const statuses = new Map<number, number>();
    const failures: string[] = [];
    let sent = 0;
    // Each request names a window no other request named, so each one writes bars and coverage.
    const one = async (i: number) => {
      const base = i % 2 === 0 ? a.url : b.url;
      const symbol = symbols[i % symbols.length]!;
      const year = 2000 + Math.floor(i / symbols.length);
      const r = await fetch(`${base}/api/history/${symbol}?interval=1d&start=${year}-01-01&end=${year}-12-31`);
      const body = await r.text();
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.status >= 300) failures.push(`${r.status} ${body.slice(0, 200)}`);
    };
    const workers = Array.from({ length: 16 }, async () => {
      while (sent < 400) await one(sent++);
    });
    await Promise.all(workers);

    expect(failures).toEqual([]);
    expect(statuses.get(200)).toBe(400);
  }, 120_000);
});

describe('package.json', () => {
  it('when npm start runs, then the shell execs node, so signals reach the server', () => {
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toMatch(/^exec node bin\/run\.js serve$/);
  });
});
