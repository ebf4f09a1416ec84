/**
 * The accounts and API-key services a CLI command opens over the configured database. Built like the
 * service's own, by `accountServices`, without what only a running service has (shared counters,
 * listening to other instances), and without loading the HTTP app, the providers or the cache client
 * (that one loads on the first announcement).
 */
import { randomBytes } from 'node:crypto';
import type { Config } from '../config.js';
import { openAccountStores } from '../infra/db/typeorm-user-store.js';
import type { Logger } from '../infra/logger.js';
import type { AccountService } from '../services/accounts.js';
import type { ApiKeyService } from '../services/api-keys.js';
import { RevocationCache } from '../services/revocation-cache.js';
import { ShutdownList } from '../services/shutdown-list.js';
import { accountServices, keyServices } from '../services/account-services.js';
import { auditLogTo, passwordHasher } from '../infra/auth/auth-parts.js';
import { CliAnnouncements } from './announcements.js';

/** What a CLI process's account commands are told besides the config and the logger. */
export interface OpenOptions {
  /** Where audit lines go; default `logger`. */
  auditLogger?: Logger;
  /** Says a warning about the command's effect when `logger` is not shown (Redis unreachable); default `logger.warn`. */
  warn?: (text: string) => void;
}

/** The database (migrated) and the announcements of a CLI process, with what closes them. */
async function openShared(config: Config, logger: Logger, options: OpenOptions) {
  const shutdown = new ShutdownList(logger);
  const db = await openAccountStores(config.database.url, { runMigrations: true });
  shutdown.add('database', () => db.close());
  const announcements = new CliAnnouncements(config.cache, logger, options.warn);
  shutdown.add('announcements', () => announcements.close());
  return { db, announcements, shutdown };
}

/**
 * The API-key service over the configured database, for `mds keys`: migrations run first; a revoked
 * key is announced to the running instances through Redis, as `openAccounts` announces it. Nothing of
 * logins (tokens, throttling, password hashing) is built or loaded.
 */
export async function openKeys(config: Config, logger: Logger, options: OpenOptions = {}): Promise<{ keys: ApiKeyService; description: string; close(): Promise<void> }> {
  const { db, announcements, shutdown } = await openShared(config, logger, options);
  const { keys } = keyServices(logger, { apiKeys: db.apiKeys, broadcast: announcements, audit: auditLogTo(options.auditLogger ?? logger) });
  shutdown.add('api keys', () => keys.close());
  return { keys, description: db.description, close: () => shutdown.close() };
}

/**
 * The accounts and API-key services over the configured database, for the CLI: migrations run first,
 * tokens are never issued (a random secret), throttling stays in memory. Every write to a user and
 * every key revoked is announced to the running instances through Redis, as an instance announces its
 * own (`CliAnnouncements`): they refuse the old credentials and close its streams at once.
 */
export async function openAccounts(
  config: Config,
  logger: Logger,
  options: OpenOptions = {},
): Promise<{ accounts: AccountService; keys: ApiKeyService; description: string; close(): Promise<void> }> {
  // Loaded here, not at the top: `mds keys` (openKeys) needs neither the token signer nor the throttle's Redis client.
  const [{ TokenService }, { LoginThrottle }] = await Promise.all([import('../infra/auth/tokens.js'), import('../infra/auth/login-throttle.js')]);
  const { db, announcements, shutdown } = await openShared(config, logger, options);
  // Nothing is remembered here (a lifetime of 0): the memory only announces each write to a user.
  const revocation = new RevocationCache({ store: db.store, ttlMs: 0, broadcast: announcements });
  shutdown.add('revocation cache', () => revocation.close());
  const { accounts, keys } = accountServices(logger, {
    users: revocation.watching(),
    apiKeys: db.apiKeys,
    broadcast: announcements,
    tokens: new TokenService({ secret: randomBytes(48).toString('base64url'), ttlMs: config.auth.tokenTtlMs }),
    throttle: new LoginThrottle({ maxFailures: config.auth.loginMaxFailures, maxFailuresPerIp: config.auth.loginMaxFailuresPerAddress, blockMs: config.auth.loginBlockMs }),
    audit: auditLogTo(options.auditLogger ?? logger),
    passwords: passwordHasher(config),
    defaultAdmin: config.auth.defaultAdmin,
    tokenTtlMs: config.auth.tokenTtlMs,
    answersLogins: false,
  });
  shutdown.add('api keys', () => keys.close());
  return { accounts, keys, description: db.description, close: () => shutdown.close() };
}
