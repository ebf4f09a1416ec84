/**
 * The accounts and API-key services, built the same way by the CLI and the running service (the parts
 * that differ are handed in). Apart from main.ts, so a CLI command that needs the accounts loads these,
 * not the HTTP app, the providers and the rest of what `startService` wires.
 */
import type { LoginAttempts, Passwords, TokenIssuer, UserStore } from '../domain/ports/accounts.js';
import type { ApiKeyStore } from '../domain/ports/api-keys.js';
import type { AuditLog } from '../domain/ports/audit.js';
import type { Broadcast } from '../domain/ports/cache.js';
import type { Logger } from '../domain/ports/logger.js';
import { AccountService } from './accounts.js';
import { ApiKeyService } from './api-keys.js';

/** What the API-key service takes. */
export interface KeyParts {
  apiKeys: ApiKeyStore;
  audit: AuditLog;
  /** Carries API-key revocations to every instance (the CLI's only announces them). */
  broadcast?: Broadcast | undefined;
  /** How long a key verified before a database outage keeps working during it (the CLI verifies none). */
  outageGraceMs?: number | undefined;
}

/** What the accounts service takes besides. */
export interface AccountParts extends KeyParts {
  users: UserStore;
  tokens: TokenIssuer;
  throttle: LoginAttempts;
  passwords: Passwords;
  defaultAdmin: { username: string; password: string };
  tokenTtlMs: number;
  /** Whether logins will be answered, so the dummy hash is worth computing at once; default true (false in the CLI, which logs nobody in). */
  answersLogins?: boolean;
}

/** The API-key service alone (what `mds keys` needs), built as `accountServices` builds it. */
export function keyServices(logger: Logger, parts: KeyParts): { keys: ApiKeyService; audit: AuditLog } {
  const keys = new ApiKeyService({ store: parts.apiKeys, audit: parts.audit, broadcast: parts.broadcast, logger, outageGraceMs: parts.outageGraceMs });
  return { keys, audit: parts.audit };
}

/** The accounts and API-key services. */
export function accountServices(logger: Logger, parts: AccountParts): { accounts: AccountService; keys: ApiKeyService; audit: AuditLog } {
  const { keys, audit } = keyServices(logger, parts);
  const accounts = new AccountService({
    userStore: parts.users,
    tokens: parts.tokens,
    throttle: parts.throttle,
    passwords: parts.passwords,
    audit,
    defaultAdmin: parts.defaultAdmin,
    tokenTtlMs: parts.tokenTtlMs,
    precomputeDummyHash: parts.answersLogins ?? true,
    logger,
  });
  return { accounts, keys, audit };
}
