/**
 * The parts a CLI command opens over the configured database (and upstream): the accounts and
 * API-key services, and the history store with its backfill. Built like the service's own, by
 * `accountServices` of the composition root, without what only a running service has (shared
 * counters, listening to other instances).
 */
import { randomBytes } from 'node:crypto';
import type { Config } from '../config.js';
import { accountServices } from '../main.js';
import { LoginThrottle } from '../infra/auth/login-throttle.js';
import { TokenService } from '../infra/auth/tokens.js';
import { openUserStore } from '../infra/db/typeorm-user-store.js';
import { createProviderChain } from '../infra/market/index.js';
import type { Logger } from '../infra/logger.js';
import type { AccountService } from '../services/accounts.js';
import type { ApiKeyService } from '../services/api-keys.js';
import { chainHistory } from '../services/chain-history.js';
import { HistoryBackfill } from '../services/history-backfill.js';
import { HistoryVerify } from '../services/history-verify.js';
import { ProviderRouter } from '../services/provider-router.js';
import { RevocationCache } from '../services/revocation-cache.js';
import { ShutdownList } from '../services/shutdown-list.js';
import { CliAnnouncements } from './announcements.js';

/**
 * The accounts and API-key services over the configured database, for the CLI: migrations run first,
 * tokens are never issued (a random secret), throttling stays in memory. Every write to a user and
 * every key revoked is announced to the running instances through Redis, as an instance announces its
 * own (`CliAnnouncements`): they refuse the old credentials and close its streams at once.
 */
export async function openAccounts(
  config: Config,
  logger: Logger,
  options: {
    /** Where audit lines go; default `logger`. */
    auditLogger?: Logger;
    /** Says a warning about the command's effect when `logger` is not shown (Redis unreachable); default `logger.warn`. */
    warn?: (text: string) => void;
  } = {},
): Promise<{ accounts: AccountService; keys: ApiKeyService; description: string; close(): Promise<void> }> {
  const shutdown = new ShutdownList(logger);
  const db = await openUserStore(config.database.url, { runMigrations: true });
  shutdown.add('database', () => db.close());
  const announcements = new CliAnnouncements(config.cache, logger, options.warn);
  shutdown.add('announcements', () => announcements.close());
  // Nothing is remembered here (a lifetime of 0): the memory only announces each write to a user.
  const revocation = new RevocationCache({ store: db.store, ttlMs: 0, broadcast: announcements });
  shutdown.add('revocation cache', () => revocation.close());
  const { accounts, keys } = accountServices(config, logger, {
    users: revocation.watching(),
    apiKeys: db.apiKeys,
    broadcast: announcements,
    tokens: new TokenService({ secret: randomBytes(48).toString('base64url'), ttlMs: config.auth.tokenTtlMs }),
    throttle: new LoginThrottle({ maxFailures: config.auth.loginMaxFailures, maxFailuresPerIp: config.auth.loginMaxFailuresPerAddress, blockMs: config.auth.loginBlockMs }),
    auditLogger: options.auditLogger ?? logger,
  });
  shutdown.add('api keys', () => keys.close());
  return { accounts, keys, description: db.description, close: () => shutdown.close() };
}

/**
 * The history store and its backfill over the configured database and upstream, for the CLI:
 * migrations run first; the upstream budget is this process's own (no shared counters).
 */
export async function openHistory(config: Config, logger: Logger): Promise<{ backfill: HistoryBackfill; verify: HistoryVerify; description: string; close(): Promise<void> }> {
  const shutdown = new ShutdownList(logger);
  try {
    const db = await openUserStore(config.database.url, { runMigrations: true });
    shutdown.add('database', () => db.close());
    const links = createProviderChain(config.market, logger);
    const provider = new ProviderRouter({ links, logger });
    shutdown.add('market data provider', () => provider.close());
    const { quality, history } = chainHistory({
      candles: db.candles,
      issues: db.dataIssues,
      router: provider,
      chain: links.map((link) => link.name),
      divergenceBps: config.quality.divergenceBps,
      logger,
    });
    const backfill = new HistoryBackfill({ history, jobs: db.historyJobs, logger });
    shutdown.add('history backfill', () => backfill.close());
    const verify = new HistoryVerify({
      store: db.candles,
      quality,
      providers: links.map((link) => link.name),
      fetchFrom: (name, query) => provider.getHistoryFrom(query, name),
      divergenceBps: config.quality.divergenceBps,
    });
    return { backfill, verify, description: db.description, close: () => shutdown.close() };
  } catch (err) {
    await shutdown.close().catch(() => undefined);
    throw err;
  }
}

/** Drops every stored bar and covered span `provider` gave (`mds history purge`); resolves to how many bars went. */
export async function purgeProviderBars(config: Config, provider: string): Promise<{ removed: number; description: string }> {
  const db = await openUserStore(config.database.url, { runMigrations: true });
  try {
    return { removed: await db.candles.purgeProvider(provider), description: db.description };
  } finally {
    await db.close();
  }
}
