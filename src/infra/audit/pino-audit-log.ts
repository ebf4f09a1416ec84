/**
 * The audit trail as log lines: one pino line per security event, marked `audit: true` so a log
 * pipeline can route them apart. Events carry identities and outcomes only; the log's redaction
 * paths stay on as a second guard against a credential slipping into `details`.
 */
import type { Logger } from '../logger.js';
import type { ActionContext, AuditEvent, AuditLog } from '../../domain/ports/audit.js';

/** Writes each event as `{audit: true, actor, action, target, ip, reqId, ...details}` at level info. */
export class PinoAuditLog implements AuditLog {
  readonly #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Logs `event`; a failing destination is pino's concern, so this never throws. */
  record(event: AuditEvent, context: ActionContext): void {
    this.#logger.info(
      {
        ...event.details,
        audit: true,
        actor: context.actor,
        action: event.action,
        target: event.target,
        ip: context.ip ?? null,
        reqId: context.requestId ?? null,
      },
      `audit: ${event.action}`,
    );
  }
}
