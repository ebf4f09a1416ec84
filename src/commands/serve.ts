import cluster, { type Worker } from 'node:cluster';
import { Flags } from '@oclif/core';
import { MdsCommand } from '../cli/command.js';
import { fail } from '../cli/fail.js';
import type { Config } from '../config.js';
import type { MetricsServer } from '../http/metrics-server.js';
import type { Logger } from '../infra/logger.js';

export default class Serve extends MdsCommand {
  static override description =
    'Start the HTTP API: connect the cache (or fall back to memory), open the database, check the default administrator, start the scheduler and authentication, then listen. SIGTERM/SIGINT finish in-flight requests and exit 0.';

  static override examples = [
    '<%= config.bin %> <%= command.id %>',
    '<%= config.bin %> <%= command.id %> --port 8080 --host 0.0.0.0',
    '<%= config.bin %> <%= command.id %> --workers 2',
    'CACHE_URL=redis://127.0.0.1:6379/0 <%= config.bin %> <%= command.id %>',
  ];

  // The log is what a running service says: always shown, so no --verbose.
  static override baseFlags = {};

  static override flags = {
    port: Flags.integer({ char: 'p', description: 'Port to listen on (overrides PORT; 0 picks a free one).', min: 0, max: 65535 }),
    host: Flags.string({ char: 'H', description: 'Address to listen on (overrides HOST).' }),
    workers: Flags.integer({
      char: 'w',
      description:
        'Worker processes sharing the port (node:cluster), e.g. one per core. The scheduler runs in the first worker only; the metrics listener (METRICS_PORT) is the primary\'s and shows the sum of all workers.',
      default: 1,
      min: 1,
      max: 64,
    }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(Serve);
    // The service loads only when asked for: `mds --help` and the other commands never pay for it.
    const [{ failure, loadCliConfig }, { createLogger, logFormatFor }, { startService }] = await Promise.all([
      import('../cli/context.js'),
      import('../infra/logger.js'),
      import('../main.js'),
    ]);
    const overrides = { PORT: flags.port?.toString(), HOST: flags.host };
    const config = loadCliConfig(this, overrides);
    const logger = createLogger({ level: config.log.level, format: logFormatFor(config.log.format, 1) });
    if (cluster.isPrimary) for (const warning of config.warnings) logger.warn(warning);
    if (flags.workers > 1 && cluster.isPrimary) {
      let metrics: MetricsServer | undefined;
      try {
        metrics = await primaryMetrics(config, logger);
      } catch (err) {
        logger.fatal({ err }, 'startup failed');
        fail(this, `Metrics listener on ${config.metrics.host}:${config.metrics.port}: ${failure(err)} (set METRICS_PORT to a free port, or 0 to turn metrics off)`, 1);
      }
      await superviseWorkers(flags.workers, logger, config.workerPool.threads);
      await metrics?.close();
      return;
    }
    if (cluster.isWorker && config.metrics.enabled) (await import('../infra/metrics/index.js')).answerClusterScrapes();
    // A signal during startup is kept and acted on once startup is done (stopping halfway would leave
    // a migration or the cache connection half made): the process still drains and exits 0.
    let onSignal = (signal: string) => {
      requested ??= signal;
    };
    let requested: string | undefined;
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
    let service;
    try {
      // Workers share the API port, not the metrics one: the primary serves their sum.
      service = await startService(config, logger, cluster.isWorker ? { metricsListener: false } : {});
    } catch (err) {
      logger.fatal({ err }, 'startup failed');
      process.stderr.write(`Error: ${failure(err).replace(/\s*\n\s*/g, ' ')}\n`);
      // What startup opened is closed; a stray handle (a driver's retry, a worker thread) must not keep a
      // process that serves nothing alive.
      process.exit(1);
    }
    if (cluster.isPrimary || cluster.worker?.id === 1) process.stderr.write(`mds listening on ${service.url} (docs: ${service.url}/docs)\n`);
    await new Promise<void>((resolve) => {
      let stopping = false;
      const stop = (signal: string) => {
        // A second signal (a supervisor and a terminal both sending one) must not kill the drain.
        if (stopping) return;
        stopping = true;
        logger.info({ signal }, 'shutting down');
        service.close().then(resolve, (err: unknown) => {
          logger.error({ err }, 'shutdown failed');
          process.exitCode = 1;
          resolve();
        });
      };
      onSignal = stop;
      if (requested !== undefined) stop(requested);
    });
    // A worker's IPC channel to the primary would keep it alive after the drain.
    if (cluster.isWorker) cluster.worker?.disconnect();
    // Everything is drained and closed: exit now rather than when the last idle timer (a driver's
    // reconnect back-off, a worker thread's shutdown) lets go, which took 2 to 4 s.
    process.exit();
  }
}

/** The primary's metrics listener, answering each scrape with the sum of every worker's registry. */
async function primaryMetrics(config: Config, logger: Logger): Promise<MetricsServer | undefined> {
  if (!config.metrics.enabled) {
    logger.info('metrics off (METRICS_PORT=0)');
    return undefined;
  }
  const [{ startMetricsServer }, { clusterMetricsSource }] = await Promise.all([import('../http/metrics-server.js'), import('../infra/metrics/index.js')]);
  const server = await startMetricsServer({ ...config.metrics, source: clusterMetricsSource(), logger });
  logger.info({ url: server.url }, `metrics of all workers on ${server.url}`);
  return server;
}

/**
 * Forks `count` workers (the first one alone runs the scheduler), replaces a worker that dies, and on
 * SIGTERM/SIGINT stops them all and waits for them before exiting. `poolThreads` (WORKER_POOL_THREADS,
 * by default the cores) are the instance's compute threads: each worker process gets its share.
 */
async function superviseWorkers(count: number, logger: Logger, poolThreads: number): Promise<void> {
  let stopping = false;
  const roles = new Map<Worker, boolean>();
  // Every process has a pool of its own: a pool as large as the machine in each would put N times the cores to work.
  const threadsEach = String(Math.max(1, Math.floor(poolThreads / count)));
  const fork = (scheduler: boolean) => {
    // Only one worker refreshes on a timer; the others read what it stores.
    const worker = cluster.fork({ WORKER_POOL_THREADS: threadsEach, ...(scheduler ? {} : { REFRESH_INTERVAL_SECONDS: '0' }) });
    roles.set(worker, scheduler);
  };
  for (let i = 0; i < count; i += 1) fork(i === 0);
  logger.info({ workers: count }, `started ${count} workers`);

  await new Promise<void>((resolve) => {
    cluster.on('exit', (worker, code, signal) => {
      const scheduler = roles.get(worker) ?? false;
      roles.delete(worker);
      if (stopping) {
        if (roles.size === 0) resolve();
        return;
      }
      logger.error({ pid: worker.process.pid, code, signal }, 'worker died; starting another');
      fork(scheduler);
    });
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'stopping workers');
      if (roles.size === 0) resolve();
      for (const worker of roles.keys()) worker.process.kill('SIGTERM');
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
  });
  logger.info('stopped');
}
