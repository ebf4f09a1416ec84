/**
 * Identity is followed while a stream or session lives (DESIGN 24): each remembers the identity of the
 * principal that opened it (`user:<name>` whichever of the user's tokens it used, `key:<id>`). The
 * fleet-wide "identity changed" event (a key revoked, a user deleted or given a new password, on any
 * instance or from the CLI) closes every stream and session of that identity here: an SSE stream gets
 * an `error` event carrying the 401 envelope and ends, a session is ended with the same refusal. The
 * credential's own expiry (a token's `exp`, a key's `expires_at`) closes them the same way, on time.
 * The event is a hint that may be lost (Redis away, a CLI that could not reach it): every
 * `RECHECK_INTERVAL_MS`, and at once when the broadcast is live again after a gap, each open
 * stream's credential is checked again as a request's would be (`CredentialRecheck`).
 */
import { AUTH_MESSAGES } from '../../domain/credentials.js';
import { AppError, InvalidCredentialsError } from '../../domain/errors.js';
import { usernameOf } from '../../domain/identity.js';
import type { CredentialRecheck } from '../../domain/ports/accounts.js';
import type { Logger } from '../../domain/ports/logger.js';
import type { Client, Subscribers } from './subscribers.js';

/** The longest delay a Node timer takes (about 24.8 days); a later expiry is waited for in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * How often open streams' credentials are checked again whatever the broadcast said: a lost
 * announcement keeps a revoked caller's streams open at most this long after the caches that the
 * check reads (AUTH_CACHE_SECONDS for users; keys are read from the store) have seen the change.
 */
export const RECHECK_INTERVAL_MS = 5000;

/** A stream still fetching its first quotes: a change of its identity meanwhile refuses it before it begins. */
export interface Opening {
  identity: string;
  refusal: AppError | undefined;
}

export interface CredentialWatchOptions {
  subscribers: Subscribers;
  logger: Logger;
  now: () => number;
  /** Checks a credential again (the authenticator); without it, only the event and the expiry close streams. */
  credentials: CredentialRecheck | undefined;
  /** True once the hub has closed. */
  closed: () => boolean;
}

export class CredentialWatch {
  readonly #o: CredentialWatchOptions;
  /** Streams still opening, for the "identity changed" event. */
  readonly opening = new Set<Opening>();
  #rechecking = false;

  constructor(options: CredentialWatchOptions) {
    this.#o = options;
  }

  /** Closes `client` when its credential expires: now when it already has, else on time (in steps past a timer's reach). */
  armExpiry(client: Client): void {
    if (client.expiresAtMs === undefined || client.closed) return;
    const leftMs = client.expiresAtMs - this.#o.now();
    if (leftMs <= 0) {
      const user = client.identity !== undefined && usernameOf(client.identity) !== undefined;
      this.#end(client, new InvalidCredentialsError(user ? AUTH_MESSAGES.expired : AUTH_MESSAGES.apiKeyExpired));
      return;
    }
    client.expiry = setTimeout(() => this.armExpiry(client), Math.min(leftMs, MAX_TIMER_MS));
    client.expiry.unref();
  }

  /**
   * The "identity changed" event (from this instance or another): a key revoked, a user deleted or
   * given a new password. Every stream and session of that identity closes, and one still opening
   * is refused before it begins.
   */
  identityChanged(identity: string): void {
    const refusal = new InvalidCredentialsError(usernameOf(identity) !== undefined ? AUTH_MESSAGES.revoked : AUTH_MESSAGES.apiKeyRevoked);
    for (const opening of this.opening) if (opening.identity === identity) opening.refusal ??= refusal;
    const clients = this.#o.subscribers.byIdentity.get(identity);
    if (clients === undefined) return;
    const closed = clients.size;
    for (const client of [...clients]) this.#end(client, refusal);
    this.#o.logger.info({ identity, closed }, 'streams closed: the credentials that opened them were revoked or changed');
  }

  /**
   * Checks again the credential of every open stream and session, one at a time (one check per
   * distinct credential), and closes those a request would now refuse. A check that fails (the
   * store away) leaves its streams open until the next run.
   */
  async recheck(): Promise<void> {
    const credentials = this.#o.credentials;
    if (credentials === undefined || this.#rechecking || this.#o.closed()) return;
    this.#rechecking = true;
    try {
      const verdicts = new Map<string, Promise<string | undefined>>();
      for (const clients of [...this.#o.subscribers.byIdentity.values()]) {
        for (const client of [...clients]) {
          const principal = client.principal;
          if (client.closed || principal === undefined || client.identity === undefined) continue;
          // Streams of one identity opened with one credential share one check.
          const credential = `${client.identity}\n${principal.passwordVersion ?? ''}\n${principal.isAdmin}\n${principal.expiresAtMs ?? ''}`;
          let verdict = verdicts.get(credential);
          if (verdict === undefined) {
            verdict = credentials.recheck(principal);
            verdicts.set(credential, verdict);
          }
          let refused: string | undefined;
          try {
            refused = await verdict;
          } catch (err) {
            this.#o.logger.debug({ err: (err as Error).message, identity: client.identity }, 'credential check failed; the next run retries');
            continue;
          }
          if (refused === undefined || this.#o.closed()) continue;
          this.#o.logger.info({ identity: client.identity, reason: refused }, 'stream closed: its credentials are no longer accepted');
          this.#end(client, new InvalidCredentialsError(refused));
        }
      }
    } finally {
      this.#rechecking = false;
    }
  }

  /** Ends a stream or session because its caller's credentials ended: the refusal goes to the client, the place is given back. */
  #end(client: Client, refusal: AppError): void {
    if (client.closed) return;
    if (client.sink !== undefined) client.sink.refuse(refusal);
    else client.end?.(refusal);
    this.#o.subscribers.remove(client);
  }
}
