/** `mds serve` as a real process: started, awaited until it prints where it listens, and stopped by a signal. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { logFile, noteSecrets } from './log-files.js';
import { freePort } from './redis-server.js';

/** This checkout's CLI, or another build's (`MDS_BIN`, set by `npm run bench:compare` to bench an older build in the same run). */
export const MDS_BIN = process.env.MDS_BIN ?? resolve(import.meta.dirname, '../../bin/run.js');

export interface ServeProcess {
  child: ChildProcess;
  /** `http://host:port` from the `mds listening on ...` line. */
  url: string;
  /** Everything written to stdout so far (the JSON log lines), when stdout is piped. */
  stdout(): string;
  /** Everything written to stderr so far (the listening line; node's own notices, e.g. where `--inspect` listens). */
  stderr(): string;
  /** Sends `signal` and resolves to the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

type SpawnServeOptions = { env: NodeJS.ProcessEnv; cwd?: string; stdout?: 'ignore' | number; /** e.g. ['taskset', '-c', '1'] */ prefix?: string[]; /** Another build's `bin/run.js` (default `MDS_BIN`). */ bin?: string };

/** Attempts at a free API port: another process may take the one `freePort` found before mds binds it. */
const PORT_ATTEMPTS = 3;

/**
 * Runs `node bin/run.js serve ...args` and resolves once it listens; rejects with its stderr when it
 * exits first. `stdout` is piped (and kept) unless a file descriptor or 'ignore' is given. When the
 * `--port` given was taken by someone else between `freePort` and the bind (parallel test files start
 * servers of their own), it starts again on another free port: callers read the address from `url`.
 */
export async function spawnServe(args: string[], options: SpawnServeOptions): Promise<ServeProcess> {
  const at = args.indexOf('--port');
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await spawnServeOnce(args, options);
    } catch (err) {
      const port = at >= 0 ? args[at + 1] : undefined;
      const taken = port !== undefined && port !== '0' && err instanceof Error && err.message.includes(`:${port} is already in use`);
      if (!taken || attempt === PORT_ATTEMPTS) throw err;
      args = [...args.slice(0, at + 1), String(await freePort()), ...args.slice(at + 2)];
    }
  }
}

function spawnServeOnce(args: string[], options: SpawnServeOptions): Promise<ServeProcess> {
  const [command, ...commandArgs] = [...(options.prefix ?? []), process.execPath, options.bin ?? MDS_BIN, 'serve', ...args];
  const child = spawn(command!, commandArgs, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', options.stdout ?? 'pipe', 'pipe'],
  });
  // The leak scan reads what the process logged: both streams, and the secrets it was configured with.
  noteSecrets(options.env.SECRET_KEY, options.env.DEFAULT_ADMIN_PASSWORD, options.env.CACHE_PASSWORD, ...(options.env.API_KEYS ?? '').split(','));
  const stdoutFile = logFile('serve-stdout');
  const stderrFile = logFile('serve-stderr');
  let out = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString();
    stdoutFile(c.toString());
  });
  child.stderr?.on('data', (c: Buffer) => stderrFile(c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return new Promise<ServeProcess>((done, fail) => {
    let err = '';
    child.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/\S+) \(docs: /.exec(err);
      if (m?.[1]) {
        done({
          child,
          url: m[1],
          stdout: () => out,
          stderr: () => err,
          stop: async (signal = 'SIGTERM') => {
            if (child.exitCode === null && child.signalCode === null) child.kill(signal);
            return exited;
          },
        });
      }
    });
    child.once('exit', (code) => fail(new Error(`mds serve exited ${code}: ${err}`)));
  });
}

/**
 * One `mds serve` of a live fleet: its own data directory (`dir`, holding `mds.sqlite`), the shared
 * Redis at `redisUrl`, the simulated provider, and the push upstream Yahoo's streamer at `yahooUrl`
 * (a local replay); `env` adds or overrides settings. The caller stops it and removes `dir`.
 */
export async function spawnLiveInstance(options: { redisUrl: string; yahooUrl: string; prefix: string; env?: NodeJS.ProcessEnv }): Promise<{ proc: ServeProcess; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), `${options.prefix}-`));
  const proc = await spawnServe(['--port', '0', '--host', '127.0.0.1'], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      HOME: dir,
      DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
      CACHE_URL: `${options.redisUrl}/0`,
      SECRET_KEY: 'live-fleet-test-secret-0123456789abcdef',
      DEFAULT_ADMIN_PASSWORD: 'admin-password-1',
      MARKET_DATA_PROVIDER: 'simulated',
      REFRESH_INTERVAL_SECONDS: '0',
      STREAM_REFRESH_SECONDS: '0',
      STREAM_UPSTREAMS: 'yahoo',
      YAHOO_STREAM_URL: options.yahooUrl,
      METRICS_PORT: '0',
      LOG_FORMAT: 'json',
      ...options.env,
    },
  });
  return { proc, dir };
}
