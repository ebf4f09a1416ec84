/**
 * A PostgreSQL server a test owns: a fresh cluster (`initdb`) in a temporary directory, started on a
 * free loopback port, and killed, stopped and started again on the same port and data directory by
 * the tests that need the database to go away. Never the shared server on 5432.
 *
 * PostgreSQL refuses to run as root. Run as root (as CI does), the cluster belongs to the `postgres`
 * OS user: the directory is handed to it and every binary is started with its uid and gid; run as
 * anyone else, as that user.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, chownSync, constants, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { answers } from './postgres.js';
import { freePort } from './redis-server.js';
import { waitFor } from './wait-for.js';

/** Where Debian puts the server binaries; PG_BIN_DIR overrides. */
const BIN_DIRS = [process.env.PG_BIN_DIR, '/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/17/bin'];
const READY_TIMEOUT_MS = 30_000;
const EXIT_TIMEOUT_MS = 15_000;

export interface PgServer {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication, loopback only). */
  readonly url: string;
  /** The postmaster's pid while it runs. */
  readonly pid: number | undefined;
  /** SIGKILL to the postmaster (no shutdown at all), then waits until it and its backends are gone. */
  kill(): Promise<void>;
  /** A fast shutdown (SIGINT: sessions are ended, then the server stops), then waits for the exit. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data directory (crash recovery after `kill`) and waits until it answers. */
  start(): Promise<void>;
  /** Stops it and removes the directory. */
  destroy(): Promise<void>;
}

function binDir(): string {
  for (const dir of BIN_DIRS) {
    if (dir === undefined) continue;
    try {
      accessSync(join(dir, 'postgres'), constants.X_OK);
      accessSync(join(dir, 'initdb'), constants.X_OK);
      return dir;
    } catch {
      // not this one
    }
  }
  throw new Error('PostgreSQL server binaries not found (looked at PG_BIN_DIR and /usr/lib/postgresql/{15,16,17}/bin): install postgresql (Debian: apt-get install postgresql-15) or set PG_BIN_DIR');
}

/** The uid and gid to run PostgreSQL as: the `postgres` OS user when we are root, else nobody else. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) throw new Error('running as root, and no `postgres` OS user to run PostgreSQL as (initdb refuses root)');
  return { uid, gid };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Pids of the processes whose command line names `dataDir` (the postmaster and its backends). */
function processesOf(dataDir: string): number[] {
  const pids: number[] = [];
  for (const entry of execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' }).split('\n')) {
    const match = /^\s*(\d+)\s+(.*)$/.exec(entry);
    if (match?.[2]?.includes(dataDir) === true) pids.push(Number(match[1]));
  }
  return pids;
}


/** Creates a cluster in a new temporary directory and starts it; `destroy()` when done. */
export async function startPgServer(): Promise<PgServer> {
  const bin = binDir();
  const user = runAs();
  const root = mkdtempSync(join(tmpdir(), 'mds-pg-'));
  if (user !== undefined) chownSync(root, user.uid, user.gid);
  const dataDir = join(root, 'data');
  const ids = user === undefined ? {} : { uid: user.uid, gid: user.gid };
  execFileSync(join(bin, 'initdb'), ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions'], { ...ids, stdio: 'pipe', cwd: root });
  const port = await freePort();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let child: ChildProcess | undefined;
  let log = '';

  const start = async () => {
    log = '';
    // fsync off: a test's data need not survive a power cut, and the machine is shared.
    child = spawn(join(bin, 'postgres'), ['-D', dataDir, '-p', String(port), '-k', root, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'full_page_writes=off'], { ...ids, cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (c: Buffer) => {
      log = (log + c.toString()).slice(-8000);
    });
    const started = child;
    await waitFor(
      async () => {
        if (started.exitCode !== null || started.signalCode !== null) throw new Error(`postgres exited while starting (${started.exitCode ?? started.signalCode}): ${log}`);
        return answers(url, 1000);
      },
      { timeoutMs: READY_TIMEOUT_MS, intervalMs: 100, message: `postgres on port ${port} to answer` },
    ).catch((err: unknown) => {
      throw new Error(`${err instanceof Error ? err.message : String(err)}\n${log}`);
    });
  };

  const gone = async () => {
    await waitFor(() => processesOf(dataDir).length === 0 && (child?.pid === undefined || !alive(child.pid)), { timeoutMs: EXIT_TIMEOUT_MS, intervalMs: 50, message: `postgres on port ${port} to exit` });
  };

  const signal = async (name: NodeJS.Signals) => {
    const pid = child?.pid;
    if (pid !== undefined && alive(pid)) process.kill(pid, name);
    await gone();
    child = undefined;
  };

  await start();
  return {
    port,
    url,
    get pid() {
      return child?.pid;
    },
    kill: () => signal('SIGKILL'),
    stop: () => signal('SIGINT'),
    start,
    async destroy() {
      if (child !== undefined) await signal('SIGINT').catch(() => signal('SIGKILL'));
      if (existsSync(root)) rmSync(root, { recursive: true, force: true });
    },
  };
}
