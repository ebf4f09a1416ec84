/**
 * Parts of the composition root that the CLI builds too. They live apart from main.ts so a CLI
 * command that needs the accounts loads these, not the HTTP app, the providers and the rest of
 * what `startService` wires.
 */
import type { Config } from '../config.js';
import type { LoginAttempts, TokenIssuer, UserStore } from '../domain/ports/accounts.js';
import type { ApiKeyStore } from '../domain/ports/api-keys.js';
import type { Broadcast } from '../domain/ports/cache.js';
import { PinoAuditLog } from '../infra/audit/pino-audit-log.js';
import { sharedBcryptPool } from '../infra/auth/bcrypt-pool.js';
import { PasswordHasher } from '../infra/auth/passwords.js';
import type { Logger } from '../infra/logger.js';
import { AccountService } from '../services/accounts.js';
import { ApiKeyService } from '../services/api-keys.js';

/** The parts of the accounts and API-key services that differ between the CLI and a running service. */
export interface AccountParts {
  users: UserStore;
  apiKeys: ApiKeyStore;
  tokens: TokenIssuer;
  throttle: LoginAttempts;
  /** Where audit lines go. */
  auditLogger: Logger;
  /** Carries API-key revocations to every instance (the CLI's only announces them). */
  broadcast?: Broadcast | undefined;
  /** Whether logins will be answered, so the dummy hash is worth computing at once; default true (false in the CLI, which logs nobody in). */
  answersLogins?: boolean;
}

/**
 * The API-key service alone (what `mds keys` needs), built as `accountServices` builds it.
 * `outageGraceMs`: how long a key verified before a database outage keeps working during it (the CLI verifies none).
 */
export function keyServices(logger: Logger, parts: Pick<AccountParts, 'apiKeys' | 'auditLogger' | 'broadcast'>, outageGraceMs?: number) {
  const audit = new PinoAuditLog(parts.auditLogger);
  const keys = new ApiKeyService({ store: parts.apiKeys, audit, broadcast: parts.broadcast, logger, outageGraceMs });
  return { keys, audit };
}

/** The accounts and API-key services, built the same way for the CLI and the service. */
export function accountServices(config: Config, logger: Logger, parts: AccountParts) {
  const { keys, audit } = keyServices(logger, parts, config.auth.outageGraceMs);
  // One pool of hashing threads per process; how many logins may wait for it is BCRYPT_MAX_QUEUE.
  const pool = sharedBcryptPool();
  pool.limitQueue(config.auth.bcryptMaxQueue);
  const accounts = new AccountService({
    userStore: parts.users,
    tokens: parts.tokens,
    throttle: parts.throttle,
    passwords: new PasswordHasher({ rounds: config.auth.bcryptRounds, pool }),
    audit,
    defaultAdmin: config.auth.defaultAdmin,
    tokenTtlMs: config.auth.tokenTtlMs,
    precomputeDummyHash: parts.answersLogins ?? true,
    logger,
  });
  return { accounts, keys, audit };
}
