/**
 * Account use cases: login (throttled, same answer for unknown user and wrong password), password
 * change (revokes older tokens), the default administrator, and user administration for the API and
 * the CLI. Results are shaped as the API spells them; password hashes never leave this service.
 * Every security event (logins, password changes, user changes) goes to the audit log.
 */
import { BusinessRuleError, ConfigError, InvalidCredentialsError, InvalidRequestError, TooManyRequestsError, UsernameTakenError } from '../domain/errors.js';
import type { components } from '../generated/api.js';
import { createHash } from 'node:crypto';
import type { Logger } from '../domain/ports/logger.js';
import type { ActionContext, AuditLog } from '../domain/ports/audit.js';
import type { LoginAttempts, LoginSlot, Passwords, Principal, TokenIssuer, User, UserStore } from '../domain/ports/accounts.js';
import { addressGroup } from '../domain/address-group.js';
import { identityOf } from '../domain/identity.js';

export type LoginResult = components['schemas']['LoginResult'];
export type Session = components['schemas']['Session'];
export type ApiUser = components['schemas']['User'];

/** The one answer to a failed login, whether the user is unknown or the password wrong. */
export const LOGIN_FAILED_MESSAGE = 'Invalid username or password';

const USERNAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** The actor of an action with no principal behind it (an operator at the `mds` command line). */
export const CLI_CONTEXT: Readonly<ActionContext> = Object.freeze({ actor: 'cli' });

/** The audit actor a principal stands for: its stable id, or its name for callers built without one. */
export function actorOf(principal: Principal): string {
  return identityOf(principal);
}

export interface AccountServiceOptions {
  userStore: UserStore;
  tokens: TokenIssuer;
  throttle: LoginAttempts;
  /** Hashing and the password rules (shares its dummy hash with other users of it). */
  passwords: Passwords;
  audit: AuditLog;
  /** DEFAULT_ADMIN_USERNAME / DEFAULT_ADMIN_PASSWORD. */
  defaultAdmin: { username: string; password: string };
  /** Lifetime of issued tokens in ms; default: the issuer's own. */
  tokenTtlMs?: number;
  /**
   * Whether to compute the dummy hash now, so the first login for an unknown user is not the one that
   * pays for it; default true. A process that answers no login (the CLI) says false: the hash would take
   * a thread and a few hundred milliseconds that the command then waits for before it can exit.
   */
  precomputeDummyHash?: boolean;
  logger: Logger;
}

/** Who may log in, with what, and who administers whom. */
export class AccountService {
  readonly #store: UserStore;
  readonly #tokens: TokenIssuer;
  readonly #throttle: LoginAttempts;
  readonly #passwords: Passwords;
  readonly #audit: AuditLog;
  readonly #defaultAdmin: { username: string; password: string };
  readonly #tokenTtlMs: number | undefined;
  readonly #logger: Logger;

  constructor(options: AccountServiceOptions) {
    this.#store = options.userStore;
    this.#tokens = options.tokens;
    this.#throttle = options.throttle;
    this.#passwords = options.passwords;
    this.#audit = options.audit;
    this.#defaultAdmin = { ...options.defaultAdmin };
    this.#tokenTtlMs = options.tokenTtlMs;
    this.#logger = options.logger;
    if (options.precomputeDummyHash ?? true) void this.#passwords.dummyHash();
  }

  /**
   * Exchanges credentials for a token. Throws `TooManyRequestsError` while the username or `ip` is
   * blocked, and `InvalidCredentialsError('Invalid username or password')` for an unknown user or a
   * wrong password alike (both cost one bcrypt comparison and count as a failure).
   * `requestId` ties the audit line to the request's log lines.
   */
  async login(username: string, password: string, ip: string, requestId?: string): Promise<LoginResult> {
    // Failures are counted per address as every address-based limit counts them (an IPv6 /64 as one).
    const from = addressGroup(ip);
    let slot: LoginSlot;
    try {
      // The failure is counted before bcrypt runs, so parallel guesses cannot all pass one check.
      slot = await this.#throttle.begin(username, from);
    } catch (err) {
      if (err instanceof TooManyRequestsError) {
        const target = await this.#auditTarget(username);
        this.#audit.record({ action: 'login.failed', target, details: { reason: 'throttled' } }, { actor: 'anonymous', ip, requestId });
      }
      throw err;
    }
    let user: User | undefined;
    let valid: boolean;
    try {
      user = await this.#store.findByUsername(username);
      valid = user ? await this.#passwords.verify(password, user.passwordHash) : await this.#passwords.verifyUnknownUser(password);
    } catch (err) {
      // Never checked (hashing busy, store away): not a guess.
      await slot.abandoned();
      throw err;
    }
    if (!user || !valid) {
      // What was typed as the username may be a password typed in the wrong field: only a real one is named.
      const target = user ? `user:${user.username}` : unknownUserTarget(username);
      const reason = user ? 'wrong password' : 'unknown user';
      this.#audit.record({ action: 'login.failed', target, details: { reason } }, { actor: 'anonymous', ip, requestId });
      throw new InvalidCredentialsError(LOGIN_FAILED_MESSAGE);
    }
    await slot.succeeded();
    const target = `user:${user.username}`;
    this.#audit.record({ action: 'login.succeeded', target }, { actor: target, ip, requestId });
    return { ok: true, ...this.#session(user, this.#isDefaultAdminPassword(user.username, password)) };
  }

  /** `user:<name>` for an existing user, a digest of what was typed otherwise. */
  async #auditTarget(username: string): Promise<string> {
    const user = await this.#store.findByUsername(username).catch(() => undefined);
    return user ? `user:${user.username}` : unknownUserTarget(username);
  }

  /**
   * Replaces the caller's password and returns a fresh token; every older token of the user stops
   * working. Throws `BusinessRuleError` for an API key (it has no password), a wrong old password, or
   * a new password equal to the old one, and `InvalidRequestError` when the new one is not 8..72 bytes.
   */
  async changePassword(
    principal: Principal,
    oldPassword: string,
    newPassword: string,
    request: Omit<ActionContext, 'actor'> = {},
  ): Promise<Session> {
    if (principal.kind === 'api-key') {
      throw new BusinessRuleError('API_KEY_HAS_NO_PASSWORD', 'An API key has no password to change: log in as a user first');
    }
    this.#passwords.assertAcceptable(newPassword, 'body.new_password');
    const user = await this.#requireUser(principal.username);
    if (!(await this.#passwords.verify(oldPassword, user.passwordHash))) {
      throw new BusinessRuleError('OLD_PASSWORD_INCORRECT', 'Old password is incorrect');
    }
    if (newPassword === oldPassword) {
      throw new BusinessRuleError('PASSWORD_UNCHANGED', 'New password must differ from the old one');
    }
    const updated = await this.#store.updatePasswordHash(user.username, await this.#passwords.hash(newPassword));
    this.#audit.record({ action: 'password.changed', target: `user:${user.username}` }, { ...request, actor: actorOf(principal) });
    return this.#session(updated, this.#isDefaultAdminPassword(updated.username, newPassword));
  }

  /**
   * Creates the default administrator unless a user of that name exists (safe to run concurrently).
   * Throws `ConfigError` when DEFAULT_ADMIN_PASSWORD is not 8..72 bytes and the account must be created.
   */
  async ensureDefaultAdmin(): Promise<'created' | 'exists'> {
    const { username, password } = this.#defaultAdmin;
    if (await this.#store.findByUsername(username)) return 'exists';
    try {
      this.#passwords.assertAcceptable(password, 'DEFAULT_ADMIN_PASSWORD');
    } catch (err) {
      if (err instanceof InvalidRequestError) throw new ConfigError(`Invalid configuration: ${err.violations.map((v) => `${v.path} ${v.message}`).join('; ')}`);
      throw err;
    }
    try {
      await this.#store.create({ username, passwordHash: await this.#passwords.hash(password), isAdmin: true });
    } catch (err) {
      // Another process (a second `mds init`, a starting instance) created it first.
      if (err instanceof UsernameTakenError) return 'exists';
      throw err;
    }
    this.#logger.info({ username }, 'default administrator created');
    this.#audit.record({ action: 'user.created', target: `user:${username}`, details: { is_admin: true, default_admin: true } }, { actor: 'system' });
    return 'created';
  }

  /** True when a user named DEFAULT_ADMIN_USERNAME exists. */
  async defaultAdminExists(): Promise<boolean> {
    return (await this.#store.findByUsername(this.#defaultAdmin.username)) !== undefined;
  }

  /**
   * True when the default administrator's stored password is `password` (startup asks this of the
   * shipped default: the variable alone says nothing once the password was changed). One hash check.
   */
  async defaultAdminPasswordIs(password: string): Promise<boolean> {
    const user = await this.#store.findByUsername(this.#defaultAdmin.username);
    return user !== undefined && (await this.#passwords.verify(password, user.passwordHash));
  }

  /** Every user, ordered by username, without hashes. */
  async listUsers(): Promise<ApiUser[]> {
    return (await this.#store.list()).map(toApiUser);
  }

  /**
   * Creates a user. Throws `InvalidRequestError` for a bad username or a password outside 8..72 bytes,
   * and `UsernameTakenError` when the name exists.
   */
  async createUser(input: { username: string; password: string; is_admin: boolean }, context: ActionContext = CLI_CONTEXT): Promise<ApiUser> {
    if (!USERNAME_PATTERN.test(input.username)) {
      throw new InvalidRequestError([{ path: 'body.username', message: 'must be 1 to 64 letters, digits, dots, dashes or underscores' }]);
    }
    this.#passwords.assertAcceptable(input.password, 'body.password');
    const user = await this.#store.create({
      username: input.username,
      passwordHash: await this.#passwords.hash(input.password),
      isAdmin: input.is_admin,
    });
    this.#audit.record({ action: 'user.created', target: `user:${user.username}`, details: { is_admin: user.isAdmin } }, context);
    return toApiUser(user);
  }

  /** Deletes a user. Throws `UserNotFoundError`, or `LastAdminError` for the last administrator. */
  async deleteUser(username: string, context: ActionContext = CLI_CONTEXT): Promise<void> {
    await this.#store.delete(username);
    this.#audit.record({ action: 'user.deleted', target: `user:${username}` }, context);
  }

  /**
   * Sets a user's password without the old one (operators, through the CLI); revokes the user's tokens.
   * Throws `InvalidRequestError` outside 8..72 bytes and `UserNotFoundError` for an unknown user.
   */
  async setPassword(username: string, password: string, context: ActionContext = CLI_CONTEXT): Promise<ApiUser> {
    this.#passwords.assertAcceptable(password, 'password');
    const user = await this.#store.updatePasswordHash(username, await this.#passwords.hash(password));
    this.#audit.record({ action: 'user.password_set', target: `user:${username}` }, context);
    return toApiUser(user);
  }

  async #requireUser(username: string): Promise<User> {
    const user = await this.#store.findByUsername(username);
    // The token was valid a moment ago; the account has been deleted since.
    if (!user) throw new InvalidCredentialsError('Token has been revoked');
    return user;
  }

  /**
   * Whether the default administrator's current password is DEFAULT_ADMIN_PASSWORD. Called with the
   * password that was just verified against (or just hashed into) the stored hash, so a plain comparison
   * answers what a bcrypt check of the default password would, without a second bcrypt run.
   */
  #isDefaultAdminPassword(username: string, currentPassword: string): boolean {
    return username === this.#defaultAdmin.username && currentPassword === this.#defaultAdmin.password;
  }

  #session(user: User, mustChangePassword: boolean): Session {
    const issued = this.#tokens.sign(user, this.#tokenTtlMs === undefined ? {} : { ttlMs: this.#tokenTtlMs });
    return {
      access_token: issued.token,
      token_type: 'bearer',
      username: user.username,
      is_admin: user.isAdmin,
      expires_in: issued.expiresInSeconds,
      must_change_password: mustChangePassword,
    };
  }
}

/**
 * How an unknown username appears in the audit log: `unknown-user:<12 hex digits of its SHA-256>`.
 * Attempts at the same name can be told apart and counted; what was typed is not kept.
 */
export function unknownUserTarget(username: string): string {
  return `unknown-user:${createHash('sha256').update(username, 'utf8').digest('hex').slice(0, 12)}`;
}

function toApiUser(user: User): ApiUser {
  return { username: user.username, is_admin: user.isAdmin, created_at: user.createdAt.toISOString() };
}
