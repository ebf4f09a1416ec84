/** `mds serve` as a real process: started, awaited until it prints where it listens, and stopped by a signal. */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

export const MDS_BIN = resolve(import.meta.dirname, '../../bin/run.js');

export interface ServeProcess {
  child: ChildProcess;
  /** `http://host:port` from the `mds listening on ...` line. */
  url: string;
  /** Everything written to stdout so far (the JSON log lines), when stdout is piped. */
  stdout(): string;
  /** Sends `signal` and resolves to the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Runs `node bin/run.js serve ...args` and resolves once it listens; rejects with its stderr when it
 * exits first. `stdout` is piped (and kept) unless a file descriptor or 'ignore' is given.
 */
export function spawnServe(
  args: string[],
  options: { env: NodeJS.ProcessEnv; cwd?: string; stdout?: 'ignore' | number; /** e.g. ['taskset', '-c', '1'] */ prefix?: string[] },
): Promise<ServeProcess> {
  const [command, ...commandArgs] = [...(options.prefix ?? []), process.execPath, MDS_BIN, 'serve', ...args];
  const child = spawn(command!, commandArgs, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', options.stdout ?? 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
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
