/**
 * Real `redis-server` processes for tests: started on a free loopback port with persistence off,
 * and stopped, killed, frozen or restarted on the same port by the tests that need Redis to misbehave.
 * Never uses the system Redis on 6379.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { waitFor } from './wait-for.js';

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
/** A client with the fail-fast settings of STACK.md (no offline queue, short timeouts, reconnects by itself), connected to `port`. */
export async function connectFailFast(port: number): Promise<Redis> {
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 500,
    connectTimeout: 1000,
    retryStrategy: (times) => Math.min(times * 100, 1000),
  });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

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

interface SpawnOptions {
  password?: string | undefined;
  /** A config file given first (sentinels need one they may rewrite). */
  configFile?: string | undefined;
  /** Appended to the command line, e.g. `--replicaof`, `--sentinel`, `--cluster-enabled yes`. */
  args?: readonly string[] | undefined;
}

async function spawnRedis(binary: string, port: number, options: SpawnOptions): Promise<ChildProcess> {
  const password = options.password;
  const args = ['--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning'];
  if (options.configFile) args.unshift(options.configFile);
  if (password !== undefined) args.push('--requirepass', password);
  args.push(...(options.args ?? []));
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
export async function startRedis(
  opts: { password?: string; port?: number; configFile?: (port: number) => string; args?: (port: number) => string[] } = {},
): Promise<RedisProcess> {
  if (opts.port === SYSTEM_REDIS_PORT) throw new Error('tests never use port 6379 (the system Redis)');
  const binary = findRedisServer();
  const password = opts.password;

  const spawnOptions = (p: number): SpawnOptions => ({ password, configFile: opts.configFile?.(p), args: opts.args?.(p) });
  let port = opts.port ?? 0;
  let child: ChildProcess | undefined;
  // Another process may grab a free port between our probe and redis-server's bind: try a few.
  for (let attempt = 0; child === undefined; attempt++) {
    const candidate = opts.port ?? (await freePort());
    try {
      child = await spawnRedis(binary, candidate, spawnOptions(candidate));
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
      current = await spawnRedis(binary, port, spawnOptions(port));
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

/** A master, one replica and three sentinels watching them, all on loopback ports of their own. */
export interface SentinelGroup {
  /** The master's name the sentinels know (`SENTINEL MONITOR <name>`). */
  readonly name: string;
  /** The two data servers; which one is master changes with each failover. */
  readonly servers: readonly RedisProcess[];
  readonly sentinels: readonly RedisProcess[];
  /** `127.0.0.1:<port>,...` of the sentinels, as CACHE_SENTINELS takes them. */
  readonly sentinelList: string;
  /** The master's `host:port` as the first sentinel reports it now. */
  master(): Promise<string>;
  /** `SENTINEL FAILOVER <name>`; resolves to the new master's `host:port` as soon as the sentinel reports it. */
  failover(): Promise<string>;
  /** The data server that is master now, as the first sentinel reports it. */
  masterProcess(): Promise<RedisProcess>;
  stop(): Promise<void>;
}

async function sentinelCall(port: number, ...args: string[]): Promise<unknown> {
  const client = new Redis({ host: HOST, port, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, commandTimeout: 1000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call('SENTINEL', ...args);
  } finally {
    client.disconnect();
  }
}

/**
 * Starts a master, a replica of it and three sentinels (quorum 2, down-after 1 s) and resolves once
 * every sentinel knows the replica and the other sentinels, so a failover can be forced at once.
 * `failoverTimeoutMs` (default 10 s) also sets how long sentinels wait before a new election when
 * one failed (twice it): tests that kill masters over and over keep it short.
 */
export async function startSentinelGroup(opts: { name?: string; failoverTimeoutMs?: number } = {}): Promise<SentinelGroup> {
  const name = opts.name ?? 'mymaster';
  const failoverTimeoutMs = opts.failoverTimeoutMs ?? 10_000;
  const dir = mkdtempSync(join(tmpdir(), 'mds-sentinel-'));
  const started: RedisProcess[] = [];
  try {
    // A replica writes the RDB it syncs from to disk: keep it in the temporary directory, not the cwd.
    const master = await startRedis({ args: () => ['--dir', dir] });
    started.push(master);
    const replica = await startRedis({ args: () => ['--dir', dir, '--replicaof', HOST, String(master.port)] });
    started.push(replica);
    const sentinels: RedisProcess[] = [];
    for (let i = 0; i < 3; i++) {
      const sentinel = await startRedis({
        configFile: (port) => {
          const file = join(dir, `sentinel-${port}.conf`);
          writeFileSync(
            file,
            [
              `sentinel monitor ${name} ${HOST} ${master.port} 2`,
              `sentinel down-after-milliseconds ${name} 1000`,
              `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
              `sentinel parallel-syncs ${name} 1`,
              '',
            ].join('\n'),
          );
          return file;
        },
        args: () => ['--sentinel', '--dir', dir],
      });
      sentinels.push(sentinel);
      started.push(sentinel);
    }
    const master0 = async (port: number) => {
      const [host, p] = (await sentinelCall(port, 'GET-MASTER-ADDR-BY-NAME', name)) as [string, string];
      return `${host}:${p}`;
    };
    const settled = async (expectMaster: string) => {
      for (const sentinel of sentinels) {
        if ((await master0(sentinel.port)) !== expectMaster) return false;
        const replicas = (await sentinelCall(sentinel.port, 'REPLICAS', name)) as string[][];
        const inSync = replicas.some((fields) => {
          const flags = fields[fields.indexOf('flags') + 1] ?? '';
          const link = fields[fields.indexOf('master-link-status') + 1];
          return !/down|disconnected/.test(flags) && link === 'ok';
        });
        if (!inSync) return false;
        const others = (await sentinelCall(sentinel.port, 'SENTINELS', name)) as unknown[];
        if (others.length < 2) return false;
      }
      return true;
    };
    await waitFor(() => settled(`${HOST}:${master.port}`).catch(() => false), {
      timeoutMs: 30_000,
      intervalMs: 200,
      message: 'sentinels to know the replica and each other',
    });

    return {
      name,
      servers: [master, replica],
      sentinels,
      sentinelList: sentinels.map((s) => `${HOST}:${s.port}`).join(','),
      master: () => master0(sentinels[0]!.port),
      async masterProcess() {
        const now = await master0(sentinels[0]!.port);
        const found = [master, replica].find((s) => `${HOST}:${s.port}` === now);
        if (!found) throw new Error(`the sentinels name ${now}, which is neither server of the group`);
        return found;
      },
      async failover() {
        const before = await master0(sentinels[0]!.port);
        // A forced failover needs a replica every sentinel sees in sync; after an earlier failover the
        // old master takes a moment to become one, and a failover started before then can stall.
        await waitFor(() => settled(before).catch(() => false), {
          timeoutMs: 30_000,
          intervalMs: 200,
          message: 'the replica to be in sync before the failover',
        });
        let after = before;
        const changed = () =>
          waitFor(
            async () => {
              after = await master0(sentinels[0]!.port).catch(() => before);
              return after !== before;
            },
            { timeoutMs: failoverTimeoutMs + 5_000, intervalMs: 100, message: 'the failover to finish' },
          ).then(
            () => true,
            () => false,
          );
        // A sentinel aborts a failover whose promotion it did not see within failover-timeout (a slow,
        // loaded host): ask again, a few times, rather than wait on one that will never finish.
        for (let attempt = 1; attempt <= 3; attempt++) {
          const refused = await sentinelCall(sentinels[0]!.port, 'FAILOVER', name).then(
            () => undefined,
            (err: Error) => err.message,
          );
          if (refused && !/INPROG|NOGOODSLAVE/.test(refused)) throw new Error(`SENTINEL FAILOVER: ${refused}`);
          if (await changed()) return after;
        }
        throw new Error(`the sentinels still name ${before} as master after three forced failovers`);
      },
      async stop() {
        for (const p of started.reverse()) await p.kill();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    for (const p of started.reverse()) await p.kill();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** A Redis Cluster of masters without replicas, on loopback ports of its own. */
export interface RedisClusterProcesses {
  readonly nodes: readonly RedisProcess[];
  /** `127.0.0.1:<port>,...` of every node, as CACHE_CLUSTER_NODES takes them. */
  readonly nodeList: string;
  stop(): Promise<void>;
}

/** True when `node` answers CLUSTER INFO with `cluster_state:ok`. */
export async function clusterStateOk(port: number): Promise<boolean> {
  const client = new Redis({ host: HOST, port, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, commandTimeout: 1000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return /^cluster_state:ok\b/m.test(String(await client.cluster('INFO')));
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/**
 * Starts `masters` (default 3) cluster-enabled redis-servers, each with its own cluster config file in
 * a temporary directory, plus `replicas` (default 0) per master, joins them with `redis-cli --cluster
 * create`, and resolves once every node reports `cluster_state:ok`. With replicas, a master that dies
 * is replaced by its replica after the node timeout (1 s).
 */
export async function startRedisCluster(opts: { masters?: number; replicas?: number } = {}): Promise<RedisClusterProcesses> {
  const replicas = opts.replicas ?? 0;
  const count = (opts.masters ?? 3) * (1 + replicas);
  const dir = mkdtempSync(join(tmpdir(), 'mds-cluster-'));
  const nodes: RedisProcess[] = [];
  const stopAll = async () => {
    for (const node of nodes) await node.kill();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < count; i++) {
      nodes.push(
        await startRedis({
          args: (port) => {
            const nodesFile = join(dir, `nodes-${port}.conf`);
            return ['--dir', dir, '--cluster-enabled', 'yes', '--cluster-config-file', nodesFile, '--cluster-node-timeout', '1000'];
          },
        }),
      );
    }
    const addresses = nodes.map((n) => `${HOST}:${n.port}`);
    const cli = join(dirname(findRedisServer()), 'redis-cli');
    await promisify(execFile)(cli, ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'], { timeout: 30_000 });
    await waitFor(async () => (await Promise.all(nodes.map((n) => clusterStateOk(n.port)))).every(Boolean), {
      timeoutMs: 30_000,
      intervalMs: 100,
      message: 'the cluster to report cluster_state:ok on every node',
    });
    return { nodes, nodeList: addresses.join(','), stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
