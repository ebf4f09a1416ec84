/**
 * The infrastructure the accounts and API-key services take, built the same way for the CLI and a
 * running service (services/account-services.ts wires them): the audit log and the password hasher on
 * the process's one pool of hashing threads.
 */
import type { Config } from '../../config.js';
import type { AuditLog } from '../../domain/ports/audit.js';
import type { Passwords } from '../../domain/ports/accounts.js';
import { PinoAuditLog } from '../audit/pino-audit-log.js';
import { sharedBcryptPool } from './bcrypt-pool.js';
import { PasswordHasher } from './passwords.js';
import type { Logger } from '../logger.js';

/** The audit log writing to `auditLogger`. */
export function auditLogTo(auditLogger: Logger): AuditLog {
  return new PinoAuditLog(auditLogger);
}

/** The password hasher; how many logins may wait for the hashing threads is BCRYPT_MAX_QUEUE. */
export function passwordHasher(config: Config): Passwords {
  const pool = sharedBcryptPool();
  pool.limitQueue(config.auth.bcryptMaxQueue);
  return new PasswordHasher({ rounds: config.auth.bcryptRounds, pool });
}
