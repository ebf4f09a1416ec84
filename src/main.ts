/**
 * The composition root: config -> infra -> services -> app -> listen, and the graceful shutdown.
 * Nothing else builds adapters; tests call `startService` with their own config and logger.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Request } from 'express';
import { createApp } from './app.js';
import { withFastPath } from './fast-path.js';
import { PLACEHOLDERS, type Config } from './config.js';
import { StartupError } from './errors.js';
import { loadContract, type Contract } from './contract.js';
import { createHandlers } from './handlers/index.js';
import { createPassportAuth } from './infra/auth/passport-auth.js';
import { LoginThrottle } from './infra/auth/login-throttle.js';
import { TokenService } from './infra/auth/tokens.js';
import { createCache } from './infra/cache/index.js';
import { openUserStore } from './infra/db/typeorm-user-store.js';
import { createMarketDataProvider } from './infra/market/index.js';
import { PrometheusMetrics, startMetricsServer, type MetricsServer } from './infra/metrics/index.js';
import { Scheduler } from './infra/scheduler.js';
import type { Logger } from './logger.js';
import { NO_METRICS } from './ports.js';
import { AccountService } from './services/accounts.js';
import { HealthService } from './services/health.js';
import { MarketDataService } from './services/market-data.js';
import { StatusService } from './services/status.js';

export interface StartOptions {
  /** Validate every response against the contract and report violations (tests). */
  onResponseViolation?: (message: string, req: Request) => void;
  /** Run the refresh scheduler in this process (default: when REFRESH_INTERVAL_SECONDS > 0). */
  scheduler?: boolean;
  contract?: Contract;
  /**
   * Open the metrics listener when metrics are on (default true). False in a `serve --workers N`
   * worker: metrics are still recorded, and the primary serves the sum of all workers.
   */
  metricsListener?: boolean;
}

export interface RunningService {
  server: Server;
  /** `http://host:port` the server listens on. */
  url: string;
  /** `http://host:port/metrics` when this process serves metrics itself; undefined otherwise. */
  metricsUrl?: string;
  /** Stops accepting, finishes in-flight requests, then closes the scheduler, cache and database. */
  close(): Promise<void>;
}

/** How long a shutdown waits for requests in flight before it cuts their connections. */
const SHUTDOWN_GRACE_MS = 10_000;

const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function docsLoader(): () => Promise<string | undefined> {
  let cached: string | undefined;
  return async () => {
    cached ??= await readFile(resolve(packageRoot, 'dist', 'docs', 'index.html'), 'utf8').catch(() => undefined);
    return cached;
  };
}

/** Resolves the signing secret: the configured one, or a random one for this process with a warning. */
function signingSecret(config: Config, logger: Logger): string {
  if (config.auth.secretKey) {
    if (config.auth.secretKey === PLACEHOLDERS.secretKey) {
      logger.warn('SECRET_KEY still holds the shipped placeholder: set a long random string before production');
    }
    return config.auth.secretKey;
  }
  logger.warn('SECRET_KEY is not set: using a random key for this process; tokens will not survive a restart');
  return randomBytes(48).toString('base64url');
}

/**
 * The accounts service over the configured database, for the CLI: migrations run first, tokens are
 * never issued (a random secret), throttling stays in memory.
 */
export async function openAccounts(config: Config, logger: Logger): Promise<{ accounts: AccountService; description: string; close(): Promise<void> }> {
  const db = await openUserStore(config.database.url, { runMigrations: true });
  const accounts = new AccountService({
    userStore: db.store,
    tokens: new TokenService({ secret: randomBytes(48).toString('base64url'), ttlMs: config.auth.tokenTtlMs }),
    throttle: new LoginThrottle({ redis: undefined, maxFailures: config.auth.loginMaxFailures, blockMs: config.auth.loginBlockMs }),
    bcryptRounds: config.auth.bcryptRounds,
    defaultAdmin: config.auth.defaultAdmin,
    logger,
  });
  return { accounts, description: db.description, close: () => db.close() };
}

/** Builds every part, logs the startup sequence of SPEC.md, and listens on config.server. */
export async function startService(config: Config, logger: Logger, options: StartOptions = {}): Promise<RunningService> {
  const contract = options.contract ?? loadContract();
  const startedAtMs = Date.now();

  const cache = createCache(config.cache, logger);
  await cache.start();
  const prometheus = config.metrics.enabled ? new PrometheusMetrics() : undefined;
  prometheus?.watch({ cacheMode: () => cache.status().mode });
  const metrics = prometheus ?? NO_METRICS;

  const db = await openUserStore(config.database.url, { runMigrations: true }).catch(async (err: unknown) => {
    await cache.close();
    throw err;
  });
  logger.info({ database: db.description }, 'database ready');

  const secret = signingSecret(config, logger);
  const tokens = new TokenService({ secret, ttlMs: config.auth.tokenTtlMs });
  const throttle = new LoginThrottle({
    redis: cache.redisClient(),
    maxFailures: config.auth.loginMaxFailures,
    blockMs: config.auth.loginBlockMs,
    metrics,
  });
  const accounts = new AccountService({
    userStore: db.store,
    tokens,
    throttle,
    bcryptRounds: config.auth.bcryptRounds,
    defaultAdmin: config.auth.defaultAdmin,
    tokenTtlMs: config.auth.tokenTtlMs,
    logger,
  });
  const adminName = config.auth.defaultAdmin.username;
  if (await accounts.defaultAdminExists()) {
    logger.info({ username: adminName }, `default administrator '${adminName}' exists`);
    if (config.auth.defaultAdmin.password === PLACEHOLDERS.adminPassword) {
      logger.warn('DEFAULT_ADMIN_PASSWORD is the shipped default: change the administrator password after first login');
    }
  } else {
    logger.warn({ username: adminName }, `default administrator '${adminName}' does not exist: run \`mds init\``);
  }

  const provider = createMarketDataProvider(config.market, logger, { metrics });
  prometheus?.watch({ breakerState: () => provider.state });
  const market = new MarketDataService({
    cache,
    provider,
    ttlMs: config.cache.ttlMs,
    staleIfErrorMs: config.cache.staleIfErrorMs,
    broadcast: cache,
    logger,
    metrics,
  });

  const scheduler = new Scheduler({ locks: cache, logger });
  const runScheduler = options.scheduler ?? config.market.refreshIntervalMs > 0;
  if (runScheduler && config.market.refreshIntervalMs > 0) {
    scheduler.add('refresh-indices', config.market.refreshIntervalMs, () => market.refresh());
    scheduler.start();
  } else {
    logger.info('scheduler off (REFRESH_INTERVAL_SECONDS=0 or disabled in this process)');
  }

  const auth = createPassportAuth({ userStore: db.store, tokens, apiKeys: config.auth.apiKeys });
  logger.info({ algorithm: 'HS256', apiKeys: config.auth.apiKeys.length }, 'authentication ready');

  const health = new HealthService({
    datasource: () => provider.health().healthy,
    cache: () => cache.status().connected,
    auth: () => db.store.ping(),
  });
  const status = new StatusService({
    version: contract.version,
    startedAtMs,
    cache: () => market.stats(),
    datasource: () => provider.health(),
    userCount: () => db.store.count(),
    schedulerJobs: () => scheduler.status(),
  });

  const app = createApp({
    contract,
    handlers: createHandlers({ contract, docs: docsLoader(), health, accounts, market, status }),
    authenticator: auth,
    logger,
    bodyLimitBytes: config.server.bodyLimitBytes,
    trustProxy: config.server.trustProxy,
    corsOrigins: config.server.corsOrigins,
    onResponseViolation: options.onResponseViolation,
    metrics,
  });

  const server = createServer(withFastPath(app, { market, logger, corsOrigins: config.server.corsOrigins, metrics }));
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 30_000;
  let metricsServer: MetricsServer | undefined;
  await (async () => {
    if (prometheus && options.metricsListener === false) prometheus.shareWithClusterPrimary();
    else if (prometheus) {
      const { host, port } = config.metrics;
      metricsServer = await startMetricsServer({ host, port, source: prometheus, logger }).catch((err: unknown) => {
        throw new StartupError(`Metrics listener on ${host}:${port}: ${err instanceof Error ? err.message : String(err)} (set METRICS_PORT to a free port, or 0 to turn metrics off)`);
      });
      logger.info({ url: metricsServer.url }, `metrics on ${metricsServer.url}`);
    } else logger.info('metrics off (METRICS_PORT=0)');
    await new Promise<void>((resolveListen, reject) => {
      server.once('error', reject);
      server.listen(config.server.port, config.server.host, () => {
        server.off('error', reject);
        resolveListen();
      });
    });
  })().catch(async (err: unknown) => {
    // Nothing listens: release what startup opened, so the caller's process can end.
    await metricsServer?.close();
    scheduler.stop();
    provider.close();
    await cache.close();
    await db.close();
    throw err;
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  logger.info({ url, docs: `${url}/docs` }, `listening on ${url}`);

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await new Promise<void>((done) => {
        // close() drops the connections idle right now; one busy now turns idle when its answer is
        // sent, and would then hold the process until its keep-alive timeout. Keep sweeping, and
        // cut whatever is left after the grace period.
        const sweep = setInterval(() => server.closeIdleConnections(), 50);
        const deadline = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
        server.close(() => {
          clearInterval(sweep);
          clearTimeout(deadline);
          done();
        });
        server.closeIdleConnections();
      });
      await metricsServer?.close();
      scheduler.stop();
      provider.close();
      await cache.close();
      await db.close();
      logger.info('stopped');
    })());

  return { server, url, ...(metricsServer ? { metricsUrl: metricsServer.url } : {}), close };
}
