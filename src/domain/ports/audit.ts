/**
 * The audit port: security events and where they came from.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
/** Where a security-relevant action came from, for the audit log. */
export interface ActionContext {
  /** Actor id: a principal's `id` (`user:admin`, `key:<id>`), `cli`, or `anonymous`. */
  actor: string;
  /** Client address, when the action came over HTTP. */
  ip?: string | undefined;
  /** The request id (`X-Request-Id`), when the action came over HTTP. */
  requestId?: string | undefined;
}

/** One security event. Never carries a password, hash, token or key. */
export interface AuditEvent {
  /** What happened, dotted: `login.succeeded`, `api_key.revoked`, `cache.flushed`, ... */
  action: string;
  /** What it happened to (`user:bob`, `key:<id>`, `cache`). */
  target: string;
  /** Extra non-secret facts (`reason`, `role`, `removed`). */
  details?: Record<string, string | number | boolean | null>;
}

/** The audit trail of security events. */
export interface AuditLog {
  /** Records `event` done by `context.actor`; never throws. */
  record(event: AuditEvent, context: ActionContext): void;
}
