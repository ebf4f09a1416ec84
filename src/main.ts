/**
 * The composition root: config -> infra -> services -> app -> listen, and the graceful shutdown.
 * Nothing else builds adapters; tests call `startService` with their own config and logger.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Request } from 'express';
import { createApp, type AppListener } from './http/app.js';
import { consoleStep } from './http/console.js';
import { createWireServer } from './http/client-errors.js';
import { FastPath } from './http/fast-path.js';
import { McpEndpoint } from './http/mcp/endpoint.js';
import { PLACEHOLDERS, type Config } from './config.js';
import { StartupError } from './domain/errors.js';
import { loadContract, withSecurityPolicy, type Contract } from './http/contract.js';
import { credentialSchemes } from './http/security.js';
import { createHandlers } from './http/handlers/index.js';
import { createPassportAuth } from './infra/auth/passport-auth.js';
import { LoginThrottle } from './infra/auth/login-throttle.js';
import { PiscinaComputePool } from './infra/compute/piscina-compute-pool.js';
import { RevocationCache } from './services/revocation-cache.js';
import { TokenService } from './infra/auth/tokens.js';
import { createCache } from './infra/cache/index.js';
import { openUserStore } from './infra/db/typeorm-user-store.js';
import { createProviderChain, createTestProviderLink } from './infra/market/index.js';
import { BatchedRequestCounter } from './infra/counters/batched-request-counter.js';
import { QuotaCounter } from './infra/counters/quota-counter.js';
import { Scheduler } from './infra/scheduler.js';
import type { Logger } from './infra/logger.js';
import { createRateLimit } from './http/rate-limit.js';
import { channels, keys as keySpace } from './domain/key-space.js';
import { NO_METRICS } from './domain/ports/metrics.js';
import type { Broadcast } from './domain/ports/cache.js';
import type { MarketDataProvider } from './domain/ports/market-data.js';
import { startMetricsServer, type MetricsServer } from './http/metrics-server.js';
import { PrometheusMetrics } from './infra/metrics/index.js';
import { HealthService } from './services/health.js';
import { MarketDataService } from './services/market-data.js';
import { ReferenceRates } from './services/reference-rates.js';
import { EcbReferenceRates } from './infra/market/ecb-reference-rates.js';
import { IndicatorService } from './services/indicators.js';
import { MarketCalendarService } from './services/market-calendar.js';
import { ProviderRouter } from './services/provider-router.js';
import { QuoteStreamHub } from './services/stream/hub.js';
import { LiveFeed } from './services/live-feed.js';
import { LiveBars } from './services/live-bars.js';
import { barSessions } from './domain/bar-sessions.js';
import type { LiveBarSink } from './domain/live-bar.js';
import { PushedQuotes } from './services/pushed-quotes.js';
import { createPushUpstreams } from './infra/stream/index.js';
import { WebSocketApi } from './http/ws/api.js';
import { RepresentationCache } from './services/cache/representation-cache.js';
import { UnknownSymbols } from './services/unknown-symbols.js';
import { recently } from './services/recently.js';
import { StatusService } from './services/status.js';
import { UsageMeter } from './services/usage-meter.js';
import { HistoryBackfill } from './services/history-backfill.js';
import { HistoryVerify } from './services/history-verify.js';
import { chainHistory } from './services/chain-history.js';
import { refreshJob } from './services/refresh-job.js';
import { retentionJob } from './services/history-retention.js';
import { ShutdownList } from './services/shutdown-list.js';
import { accountServices } from './services/account-services.js';
import { auditLogTo, passwordHasher } from './infra/auth/auth-parts.js';
import { indexRefreshSchedule } from './services/background-budget.js';

export interface StartOptions {
  /** Validate every response against the contract and report violations (tests). */
  onResponseViolation?: (message: string, req: Request) => void;
  /** Run the refresh scheduler in this process (default: when REFRESH_INTERVAL_SECONDS > 0). */
  scheduler?: boolean;
  contract?: Contract;
  /** The upstream to use instead of the configured one (tests that need to make quotes change); wrapped in the circuit breaker like any. */
  provider?: MarketDataProvider;
  /**
   * Open the metrics listener when metrics are on (default true). False in a `serve --workers N`
   * worker: metrics are still recorded, and the primary serves the sum of all workers.
   */
  metricsListener?: boolean;
  /** Answer cached public reads by the cached-answer shortcut (default true; false sends every request the full way, for the test comparing both). */
  fastPath?: boolean;
  /** The clock in epoch milliseconds the market data (market states, cache lifetimes) reads; `Date.now` by default (tests pin a day). */
  now?: () => number;
  /** First reconnect delay of the push upstreams in ms (tests shorten it); 500 by default. */
  pushReconnectMs?: number;
}

export interface RunningService {
  server: Server;
  /** `http://host:port` the server listens on. */
  url: string;
  /** The live-quote streams: how many are open now. */
  streams: { readonly size: number };
  /** Runs a scheduled job now, as its timer would (`refresh-indices`); tests drive the schedule with it. */
  runJob(name: string): Promise<void>;
  /** The MCP endpoint: `/mcp` on `server`, and `connect` for another transport (stdio). */
  mcp: McpEndpoint;
  /** Where final live bars are stored as history (DESIGN 26): the bar builder's sink. */
  liveBars: LiveBarSink;
  /** `http://host:port/metrics` when this process serves metrics itself; undefined otherwise. */
  metricsUrl?: string;
  /** Stops accepting, finishes in-flight requests, then closes the scheduler, cache and database. */
  close(): Promise<void>;
}

/** How often an instance looks for backfill jobs whose runner died. */
const BACKFILL_WATCH_MS = 15_000;

/** How often the retention job looks for candles older than their keep (once per fleet under its lock). */
const RETENTION_INTERVAL_MS = 3_600_000;

/** How long a shutdown waits for requests in flight before it cuts their connections. */
const SHUTDOWN_GRACE_MS = 10_000;

const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The text of a file of the package, read once; undefined when it cannot be read. */
function packageFile(...path: string[]): () => Promise<string | undefined> {
  let cached: string | undefined;
  return async () => {
    cached ??= await readFile(resolve(packageRoot, ...path), 'utf8').catch(() => undefined);
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

/** Builds every part, logs the startup sequence, and listens on config.server. */
export async function startService(config: Config, logger: Logger, options: StartOptions = {}): Promise<RunningService> {
  const shutdown = new ShutdownList(logger);
  try {
    return await assemble(config, logger, options, shutdown);
  } catch (err) {
    // Nothing listens: release what startup opened, so the caller's process can end. A part that
    // fails to close is logged by the list; the caller hears why startup failed.
    await shutdown.close().catch(() => undefined);
    throw err;
  }
}

/** `startService` itself: every part it builds that must be closed is registered in `shutdown`. */
async function assemble(config: Config, logger: Logger, options: StartOptions, shutdown: ShutdownList): Promise<RunningService> {
  const contract = withSecurityPolicy(options.contract ?? loadContract(), { dataRequiresAuth: config.auth.dataRequiresAuth });
  const startedAtMs = Date.now();

  const cache = createCache(config.cache, logger);
  shutdown.add('cache', () => cache.close());
  await cache.start();
  // Quotas, login throttling and the upstream budget count here, following the cache's mode.
  const counters = cache.sharedCounters();
  const prometheus = config.metrics.enabled ? new PrometheusMetrics() : undefined;
  prometheus?.watch({ cacheMode: () => cache.status().mode });
  const metrics = prometheus ?? NO_METRICS;

  const db = await openUserStore(config.database.url, { runMigrations: true, readerNiceIncrement: config.workerPool.niceIncrement });
  shutdown.add('database', () => db.close());
  logger.info({ database: db.description }, 'database ready');

  // Every write to a user goes through `users`, so the bearer check's memory of it is dropped on every instance.
  const revocation = new RevocationCache({ store: db.store, ttlMs: config.auth.userCacheTtlMs, broadcast: cache, outageGraceMs: config.auth.outageGraceMs });
  shutdown.add('revocation cache', () => revocation.close());
  const users = revocation.watching();

  const secret = signingSecret(config, logger);
  const tokens = new TokenService({ secret, ttlMs: config.auth.tokenTtlMs });
  const throttle = new LoginThrottle({
    counters,
    maxFailures: config.auth.loginMaxFailures,
    maxFailuresPerIp: config.auth.loginMaxFailuresPerAddress,
    blockMs: config.auth.loginBlockMs,
    metrics,
  });
  const { accounts, keys, audit } = accountServices(logger, {
    users,
    apiKeys: db.apiKeys,
    tokens,
    throttle,
    audit: auditLogTo(logger),
    passwords: passwordHasher(config),
    broadcast: cache,
    defaultAdmin: config.auth.defaultAdmin,
    tokenTtlMs: config.auth.tokenTtlMs,
    outageGraceMs: config.auth.outageGraceMs,
  });
  shutdown.add('api keys', () => keys.close());
  const adminName = config.auth.defaultAdmin.username;
  if (await accounts.defaultAdminExists()) {
    logger.info({ username: adminName }, `default administrator '${adminName}' exists`);
    if (await accounts.defaultAdminPasswordIs(PLACEHOLDERS.adminPassword)) {
      logger.warn(`the administrator '${adminName}' still has the shipped default password: change it (console, POST /api/auth/change-password or mds users set-password)`);
    }
  } else {
    logger.warn({ username: adminName }, `default administrator '${adminName}' does not exist: run \`mds init\``);
  }

  const auth = createPassportAuth({
    apiKeyHeader: credentialSchemes(contract.document).find((scheme) => scheme.kind === 'apiKey')?.header,
    userStore: users,
    tokens,
    apiKeys: config.auth.apiKeys,
    managedKeys: keys,
    findUser: (username) => revocation.lookup(username),
  });
  logger.info({ algorithm: 'HS256', apiKeys: config.auth.apiKeys.length }, 'authentication ready');

  // One link per provider of the chain (a chain of one for MARKET_DATA_PROVIDER); the shared counters
  // carry each provider's fleet-wide budget, daily key counts and 429 pause (memory while Redis is away).
  const links = options.provider
    ? [createTestProviderLink(options.provider, { timeoutMs: config.market.timeoutMs, logger, metrics })]
    : createProviderChain(config.market, logger, { counters, metrics });
  const provider = new ProviderRouter({ links, logger, metrics });
  shutdown.add('market data provider', () => provider.close());
  prometheus?.watch({ breakerState: () => provider.state });
  const engine = new RepresentationCache({
    cache,
    namespace: provider.name,
    staleIfErrorMs: config.cache.staleIfErrorMs,
    localMaxEntries: config.cache.memoryMaxEntries,
    broadcast: cache,
    logger,
    metrics,
  });
  const unknown = new UnknownSymbols({ store: cache, provider: provider.name, maxSymbols: config.cache.unknownMaxSymbols, broadcast: cache, logger, now: options.now });
  const { quality, history, liveBars } = chainHistory({
    candles: db.candles,
    issues: db.dataIssues,
    router: provider,
    chain: links.map((link) => link.name),
    divergenceBps: config.quality.divergenceBps,
    count: prometheus ? (rule, action, from) => prometheus.dataIssue(rule, action, from) : undefined,
    logger: logger.child({ component: 'data-quality' }),
    now: options.now,
  });
  // CPU-heavy work (indicators, exports, large history answers) runs on these threads, not the event loop (DESIGN 24).
  const compute = new PiscinaComputePool(config.workerPool);
  // The threads load while the rest starts; the server listens once they have (below).
  const computeWarm = compute.warm();
  computeWarm.catch(() => undefined); // awaited below; a startup that fails before then must not leave it unhandled
  shutdown.add('compute pool', () => compute.close());
  // currency= (DESIGN 25): the ECB's reference rates, kept in the database, fetched from ECB_BASE_URL.
  const ecb = config.market.providerSettings.ecb;
  const rates = new ReferenceRates({
    store: db.fxRates,
    source: new EcbReferenceRates({ baseUrl: ecb.baseUrl, timeoutMs: ecb.timeoutMs }),
    logger: logger.child({ component: 'fx' }),
    now: options.now,
  });
  const market = new MarketDataService({ engine, provider, indices: config.market.symbols, quoteTtlMs: config.cache.ttlMs, unknown, history, now: options.now, source: links[0]?.name, compute, rates });
  const indicators = new IndicatorService({ engine, market, history, compute, rates, now: options.now });
  const calendar = new MarketCalendarService();
  const streams = new QuoteStreamHub({
    market,
    onFill: (listener) => engine.onFill(listener),
    broadcast: cache,
    store: cache,
    provider: provider.name,
    logger: logger.child({ component: 'stream' }),
    ...config.stream,
    observer: { clients: (delta) => metrics.streamClients(delta), event: () => metrics.streamEvent(), refresh: (mode) => metrics.streamRefresh(mode) },
    pushing: (symbol) => live?.pushing(symbol) ?? false,
    // Open streams are checked again as a request would be: a lost announcement cannot keep them open.
    credentials: auth,
  });
  shutdown.add('quote streams', () => streams.close());
  // Pushed prices (DESIGN 23): one socket per push upstream for the fleet, held by the lease's holder.
  const pushed = new PushedQuotes({ quoteOf: (symbol) => market.quoteOf(symbol), store: (kind, params, value, ttlMs, parts) => engine.store(kind, params, value, ttlMs, parts), ttlMs: config.cache.ttlMs, logger });
  const upstreams = createPushUpstreams({ ...config.live, minReconnectMs: options.pushReconnectMs }, logger.child({ component: 'live' }));
  const live: LiveFeed | undefined =
    upstreams.length === 0
      ? undefined
      : new LiveFeed({
          upstreams,
          lease: cache,
          broadcast: cache,
          leaseKey: (upstream) => keySpace.liveLease(provider.name, upstream),
          channel: channels.live(provider.name),
          symbols: () => streams.subscribedSymbols(),
          onPrice: (update, from) => {
            // A minute aggregate is the bar builder's alone: a quote moves with trades and ticks.
            if (update.aggregate === undefined) pushed.accept(update, from);
            bars?.accept(update, from);
          },
          shared: () => cache.status().mode === 'redis',
          logger: logger.child({ component: 'live' }),
        });
  // Live one-minute bars (DESIGN 26): built by each push upstream's leader, streamed by every instance.
  const bars: LiveBars | undefined =
    live === undefined
      ? undefined
      : new LiveBars({
          store: cache,
          stateKey: (upstream, symbol) => keySpace.liveBarState(provider.name, upstream, symbol),
          broadcast: cache,
          channel: channels.liveBars(provider.name),
          leading: () => live.leading(),
          symbols: () => live.union(),
          deliver: (symbol, json) => streams.sendBar(symbol, json),
          sink: liveBars,
          sessionOf: barSessions(),
          graceMs: config.live.barGraceMs,
          revisionWindowMs: config.live.barRevisionWindowMs,
          logger: logger.child({ component: 'live-bars' }),
        });
  if (live !== undefined) {
    shutdown.add('push upstreams', () => live.close());
    live.start();
  }
  if (bars !== undefined) {
    // Closed before the push upstreams (the list closes in reverse): the open bars are written for the next leader before the lease goes.
    shutdown.add('live bars', () => bars.close());
    bars.start();
  }

  // Verify jobs (POST /api/admin/history/verify) run as `mds history verify` does, through the backfill's job machinery.
  const verify = new HistoryVerify({ store: db.candles, quality, providers: links.map((link) => link.name), fetchFrom: (name, query) => provider.getHistoryFrom(query, name), divergenceBps: config.quality.divergenceBps });
  const backfill = new HistoryBackfill({ history, verify, jobs: db.historyJobs, logger: logger.child({ component: 'backfill' }) });
  shutdown.add('history backfill', () => backfill.close());
  if (options.scheduler !== false) backfill.watch(BACKFILL_WATCH_MS);

  // One lock per job and provider: instances of another provider on the same Redis refresh their own data.
  const scheduler = new Scheduler({ locks: cache, logger, lockKey: (job) => keySpace.jobLock(provider.name, job) });
  shutdown.add('scheduler', () => scheduler.stop());
  const runScheduler = options.scheduler ?? config.market.refreshIntervalMs > 0;
  if (runScheduler && config.market.refreshIntervalMs > 0) {
    // Background work: within BACKGROUND_BUDGET_SHARE of each provider's budget, less often on a small one (said once).
    const refresh = indexRefreshSchedule(links, config.market.symbols, config.market.refreshIntervalMs, config.market.backgroundShare);
    if (refresh.reason !== undefined) logger.info({ intervalMs: refresh.intervalMs, backgroundShare: config.market.backgroundShare }, `Market data: ${refresh.reason}`);
    const job = refreshJob({ market, history, horizonMs: refresh.intervalMs * 2, symbols: () => [...config.market.symbols, ...streams.subscribedSymbols()] });
    scheduler.add('refresh-indices', refresh.intervalMs, job);
  } else {
    logger.info('index refresh off (REFRESH_INTERVAL_SECONDS=0 or disabled in this process)');
  }
  // Retention runs wherever a scheduler may (not in `mds mcp`), refresh or not: the job's lock keeps it to one instance an hour.
  if (options.scheduler !== false && Object.values(config.retention).some((keepMs) => keepMs !== null)) {
    scheduler.add('history-retention', RETENTION_INTERVAL_MS, retentionJob({ store: db.candles, keepMs: config.retention, logger: logger.child({ component: 'retention' }) }));
  }
  if (scheduler.status().length > 0) scheduler.start();
  else logger.info('scheduler off (REFRESH_INTERVAL_SECONDS=0 or disabled in this process, and every HISTORY_KEEP_* forever)');

  const health = new HealthService({
    datasource: () => provider.health().healthy,
    // True while the service is caching in Redis: not while it serves from memory, even if the
    // connection is up (a stalled or failing Redis, a cluster without all its slots).
    cache: () => cache.status().mode === 'redis',
    // A second-old answer is as true for a monitor; one query a second replaces one per request.
    // While the database queue is long (SQLite serves one operation at a time), health answers at once
    // with the last ping's answer (at most 5 s old) instead of waiting its turn.
    auth: recently(() => db.store.ping(), 1000, Date.now, { answerWithinMs: 20 }),
  });
  const status = new StatusService({
    version: contract.version,
    startedAtMs,
    cacheStats: () => market.stats(),
    cacheLocation: () => cache.status(),
    datasource: () => provider.health(),
    // Dropped by every write to a user on any instance; at most AUTH_CACHE_SECONDS old otherwise.
    userCount: () => revocation.count(),
    schedulerJobs: () => scheduler.status(),
  });

  // Actions, points and 429s per key and user per day, by door and operation: counted in memory, added
  // to the shared counters and written to the database every few seconds.
  const usage = new UsageMeter({ counters, store: db.usage, logger: logger.child({ component: 'usage' }), operations: contract.operations.map((op) => op.operationId) });
  usage.start();
  shutdown.add('usage meter', () => usage.close());
  const quotaCounter = new BatchedRequestCounter(new QuotaCounter({ counters }));
  // Closed before the cache (the list closes in reverse): the points still waiting reach Redis.
  shutdown.add('quota counter', () => quotaCounter.close());
  const rateLimit = createRateLimit({
    counter: quotaCounter,
    anonymousPerMinute: config.rateLimit.anonymousPerMinute,
    authenticatedPerMinute: config.rateLimit.authenticatedPerMinute,
    metrics,
  });
  logger.info({ ...config.rateLimit, dataRequiresAuth: config.auth.dataRequiresAuth }, 'rate limits ready');
  const fastPath = options.fastPath === false ? undefined : new FastPath({ engine });

  // MCP (DESIGN 22): /mcp is a branch of the app's front door, and each tool call is a request into the app.
  let app: AppListener | undefined;
  const mcp = new McpEndpoint({
    contract,
    listener: (req, res) => app!(req, res),
    fastPath,
    admission: () => app!.admission,
    logger,
    dataRequiresAuth: config.auth.dataRequiresAuth,
    bodyLimitBytes: config.server.bodyLimitBytes,
    corsOrigins: config.server.corsOrigins,
  });
  app = createApp({
    contract,
    handlers: createHandlers({ contract, docs: packageFile('dist', 'docs', 'index.html'), asyncApi: packageFile('asyncapi.yaml'), health, accounts, keys, audit, market, indicators, compute, providers: provider, calendar, status, streams, backfill, usage, quality, ...(fastPath ? { rememberTarget: fastPath.remember } : {}) }),
    authenticator: auth,
    logger,
    bodyLimitBytes: config.server.bodyLimitBytes,
    trustProxy: config.server.trustProxy,
    ...(fastPath ? { fastPath } : {}),
    corsOrigins: config.server.corsOrigins,
    rateLimit,
    usage,
    onResponseViolation: options.onResponseViolation,
    metrics,
    console: consoleStep(resolve(packageRoot, 'dist', 'console')),
    mcp,
  });

  const server = createWireServer(app, logger, app.messages);
  const websockets = new WebSocketApi({
    hub: streams,
    identify: app.identifyUpgrade,
    admission: app.admission,
    dataRequiresAuth: config.auth.dataRequiresAuth,
    maxMessageBytes: config.live.wsMaxMessageBytes,
    maxBufferedBytes: config.stream.maxBufferedBytes,
    heartbeatMs: config.stream.heartbeatMs,
    logger: logger.child({ component: 'ws' }),
  });
  websockets.attach(server);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 30_000;
  let metricsServer: MetricsServer | undefined;
  if (prometheus && options.metricsListener === false) prometheus.shareWithClusterPrimary();
  else if (prometheus) {
    const { host, port } = config.metrics;
    const listening = await startMetricsServer({ host, port, source: prometheus, logger }).catch((err: unknown) => {
      throw new StartupError(`Metrics listener on ${host}:${port}: ${err instanceof Error ? err.message : String(err)} (another mds on this machine? give each instance its own METRICS_PORT, or 0 to turn metrics off, and its own PORT)`);
    });
    metricsServer = listening;
    shutdown.add('metrics listener', () => listening.close());
    logger.info({ url: listening.url }, `metrics on ${listening.url}`);
  } else logger.info('metrics off (METRICS_PORT=0)');
  await computeWarm.catch((err: unknown) => {
    throw new StartupError(`The compute threads did not start: ${err instanceof Error ? err.message : String(err)}`);
  });
  await new Promise<void>((resolveListen, reject) => {
    const refused = (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new StartupError(`${config.server.host}:${config.server.port} is already in use (EADDRINUSE: another mds on this machine?): set PORT (or serve --port) to a free port`) : err);
    server.once('error', refused);
    server.listen(config.server.port, config.server.host, () => {
      server.off('error', refused);
      resolveListen();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  logger.info({ url, docs: `${url}/docs` }, `listening on ${url}`);

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      // Streams never finish on their own: end them before the drain (the list closes them again, a
      // no-op), or the drain waits out its grace period.
      streams.close();
      websockets.close();
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
      await shutdown.close();
      logger.info('stopped');
    })());

  return { server, url, streams, runJob: (name) => scheduler.trigger(name), mcp, liveBars, ...(metricsServer ? { metricsUrl: metricsServer.url } : {}), close };
}
