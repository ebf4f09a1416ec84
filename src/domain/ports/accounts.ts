/**
 * The account ports: users, the principal a request runs as, passwords, tokens and login throttling.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
/** A stored user account. `passwordHash` never leaves the services layer. */
export interface User {
  username: string;
  isAdmin: boolean;
  /** bcrypt hash of the password. */
  passwordHash: string;
  createdAt: Date;
  updatedAt: Date;
}

/** Where user accounts live. Throws `UsernameTakenError` / `UserNotFoundError` as documented. */
export interface UserStore {
  /** The user named `username`, or `undefined` when there is none. */
  findByUsername(username: string): Promise<User | undefined>;
  /** Every user, ordered by username. */
  list(): Promise<User[]>;
  /** How many users exist; with `{ admins: true }` only administrators. */
  count(filter?: { admins?: boolean }): Promise<number>;
  /** Creates a user. Throws `UsernameTakenError` when the name exists. */
  create(input: { username: string; passwordHash: string; isAdmin: boolean }): Promise<User>;
  /** Replaces the password hash. Throws `UserNotFoundError` when there is no such user. */
  updatePasswordHash(username: string, passwordHash: string): Promise<User>;
  /**
   * Deletes a user. Throws `UserNotFoundError` when there is none, and `LastAdminError` when it is
   * the last administrator (checked in the same transaction as the delete).
   */
  delete(username: string): Promise<void>;
  /** True when the database answers a trivial query. */
  ping(): Promise<boolean>;
}

/** Who is calling: a user logged in with a token, or the service account of an API key. */
export interface Principal {
  username: string;
  isAdmin: boolean;
  kind: 'user' | 'api-key';
  /**
   * Stable quota and audit identity: `user:<username>`, `key:<keyId>` for a managed key,
   * `key:static:<first 8 hex of sha256(key)>` for a key from API_KEYS.
   */
  id?: string;
  /** A managed key's own requests-per-minute limit; absent means the default for its kind. */
  rateLimitPerMinute?: number;
  /**
   * When the credential that identified the caller stops being accepted, epoch ms: a bearer token's
   * `exp`, a managed key's `expires_at`. Absent when it never expires. A stream or session opened with
   * it closes then (DESIGN 24).
   */
  expiresAtMs?: number;
  /**
   * For a user identified by a bearer token: the password version the token was issued under (its
   * `pwv` claim, a keyed digest that reveals nothing), so a connection it opened can be checked again
   * against the current password.
   */
  passwordVersion?: string;
}

/** Checks again, while a connection lives, the credential that identified its caller when it opened. */
export interface CredentialRecheck {
  /**
   * `undefined` while a request with the credential behind `principal` would still be accepted with
   * the same rights; else why not, in the words of `AUTH_MESSAGES` (the token or key expired, the
   * user deleted or its password or rights changed, the key revoked), for a 401 refusal. Rejects
   * when the store cannot answer: the connection stays and is asked about again later.
   */
  recheck(principal: Principal): Promise<string | undefined>;
}

/**
 * How a credential check ends, exactly once: with the principal, or with why there is none. A check
 * that needs no I/O calls it before returning (no promise, no later turn of the event loop).
 */
export type AuthCallback = (err: unknown, principal?: Principal) => void;

/** Password hashing and the password rules, as the accounts service needs them. */
export interface Passwords {
  /** A one-way hash of `password`; does not check the rules. */
  hash(password: string): Promise<string>;
  /** True when `password` matches `hash`. */
  verify(password: string, hash: string): Promise<boolean>;
  /** Costs what `verify` costs and resolves to false: the path for an unknown user. */
  verifyUnknownUser(password: string): Promise<false>;
  /** Warms up whatever `verifyUnknownUser` needs, so the first call does not pay for it. */
  dummyHash(): Promise<string>;
  /** Throws `InvalidRequestError` (one violation at `path`) unless `password` follows the rules. */
  assertAcceptable(password: string, path: string): void;
}

/** An access token just issued. */
export interface IssuedAccessToken {
  token: string;
  /** Seconds from issue to expiry. */
  expiresInSeconds: number;
}

/** Issues access tokens for users. */
export interface TokenIssuer {
  /** A token for `user`, valid for `options.ttlMs` (default: the issuer's own lifetime) and tied to its password hash. */
  sign(user: Pick<User, 'username' | 'isAdmin' | 'passwordHash'>, options?: { ttlMs?: number }): IssuedAccessToken;
}

/** One login attempt's failure slot, taken before the password is checked. */
export interface LoginSlot {
  /** The password was right: the slot is given back and the username's failures from that address forgotten. */
  succeeded(): Promise<void>;
  /** The password was never checked (hashing was busy): the slot is given back. */
  abandoned(): Promise<void>;
}

/** Counts failed logins before the work, and refuses attempts while an address (for a username, or at all) is blocked. */
export interface LoginAttempts {
  /**
   * Takes a failure slot for `username` from `ip` (an address group), kept as a failure unless given
   * back; may wait first (a username failing from elsewhere). Throws `TooManyRequestsError` (with
   * `retryAfterSeconds`) while that address is blocked.
   */
  begin(username: string, ip: string): Promise<LoginSlot>;
}
