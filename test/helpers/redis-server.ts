/**
 * Real `redis-server` processes for tests: started on a free loopback port with persistence off,
 * and stopped, killed, frozen or restarted on the same port by the tests that need Redis to misbehave.
 * Never uses the system Redis on 6379.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { createServer, connect } from 'node:net';
import { delimiter, join } from 'node:path';

/** A running (or stopped) redis-server owned by a test. */
export interface RedisProcess {
  /** The loopback port it listens on; stays the same across `restart()`. */
  readonly port: number;
  /** `redis://[:password@]127.0.0.1:<port>` */
  readonly url: string;
  /** The password given with `--requirepass`, if any. */
  readonly password: string | undefined;
  /** SIGTERM, then waits for the process to exit. */
  stop(): Promise<void>;
  /** SIGKILL, then waits for the process to exit. */
  kill(): Promise<void>;
  /** Starts it again on the same port (stopping it first if it still runs) and waits until it answers. */
  restart(): Promise<void>;
  /** SIGSTOP: the socket stays open but nothing answers. */
  pause(): void;
  /** SIGCONT after `pause()`. */
  resume(): void;
}

const HOST = '127.0.0.1';
const SYSTEM_REDIS_PORT = 6379;
const READY_TIMEOUT_MS = 10_000;
const EXIT_TIMEOUT_MS = 10_000;

function findRedisServer(): string {
  const candidates = [
    process.env.REDIS_SERVER_BIN,
    ...(process.env.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, 'redis-server')),
    '/usr/bin/redis-server',
  ].filter((p): p is string => typeof p === 'string' && p.length > 0);
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not this one
    }
  }
  throw new Error(
    'redis-server not found (looked at REDIS_SERVER_BIN, the PATH and /usr/bin/redis-server). ' +
      'The cache tests need a real Redis: install it (e.g. `apt-get install redis-server`) or set REDIS_SERVER_BIN.',
  );
}

/** A port the kernel just handed out on the loopback interface, released again (nothing listens on it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('could not obtain a free port'))));
    });
  });
}

/** True when something on `port` answers a RESP PING (`+PONG`, or `-NOAUTH` when a password is required). */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: HOST, port });
    let settled = false;
    const done = (ok: boolean) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('*1\r\n$4\r\nPING\r\n'));
    socket.once('data', (chunk) => {
      const reply = chunk.toString('utf8');
      done(reply.startsWith('+PONG') || reply.startsWith('-NOAUTH'));
    });
  });
}

function waitForExit(child: ChildProcess, timeoutMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server (pid ${child.pid}) did not exit within ${timeoutMs} ms`)), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Children still running when the test process exits are killed, so no redis-server outlives a run. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

async function spawnRedis(binary: string, port: number, password: string | undefined): Promise<ChildProcess> {
  const args = ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning'];
  if (password !== undefined) args.push('--requirepass', password);
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let output = '';
  const collect = (chunk: Buffer) => {
    if (output.length < 8_000) output += chunk.toString('utf8');
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  child.once('exit', () => running.delete(child));

  const spawnError = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(new Error(`could not start ${binary}: ${err.message}`)));
    child.once('exit', (code, signal) =>
      reject(new Error(`redis-server on port ${port} exited before answering (code ${code}, signal ${signal}): ${output.trim()}`)),
    );
  });
  spawnError.catch(() => undefined);

  const deadline = Date.now() + READY_TIMEOUT_MS;
  const ready = (async () => {
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      if (await answersPing(port)) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`redis-server on port ${port} did not answer PING within ${READY_TIMEOUT_MS} ms: ${output.trim()}`);
  })();

  try {
    await Promise.race([ready, spawnError]);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  if (child.exitCode !== null || child.signalCode !== null) await spawnError;
  return child;
}

/**
 * Starts a redis-server on a free loopback port (or `opts.port`) with `--save '' --appendonly no`,
 * and resolves once it answers PING. Rejects with a clear message when redis-server is missing.
 */
export async function startRedis(opts: { password?: string; port?: number } = {}): Promise<RedisProcess> {
  if (opts.port === SYSTEM_REDIS_PORT) throw new Error('tests never use port 6379 (the system Redis)');
  const binary = findRedisServer();
  const password = opts.password;

  let port = opts.port ?? 0;
  let child: ChildProcess | undefined;
  // Another process may grab a free port between our probe and redis-server's bind: try a few.
  for (let attempt = 0; child === undefined; attempt++) {
    const candidate = opts.port ?? (await freePort());
    try {
      child = await spawnRedis(binary, candidate, password);
      port = candidate;
    } catch (err) {
      if (opts.port !== undefined || attempt >= 4) throw err;
    }
  }

  let current: ChildProcess = child;
  let paused = false;

  const signalAndWait = async (signal: NodeJS.Signals) => {
    if (current.exitCode !== null || current.signalCode !== null) return;
    current.kill(signal);
    // A stopped process only acts on SIGTERM once it runs again.
    if (paused && signal !== 'SIGKILL') current.kill('SIGCONT');
    paused = false;
    await waitForExit(current, EXIT_TIMEOUT_MS);
  };

  const auth = password !== undefined ? `:${encodeURIComponent(password)}@` : '';
  return {
    port,
    url: `redis://${auth}${HOST}:${port}`,
    password,
    stop: () => signalAndWait('SIGTERM'),
    kill: () => signalAndWait('SIGKILL'),
    async restart() {
      await signalAndWait('SIGTERM');
      current = await spawnRedis(binary, port, password);
    },
    pause() {
      current.kill('SIGSTOP');
      paused = true;
    },
    resume() {
      current.kill('SIGCONT');
      paused = false;
    },
  };
}
