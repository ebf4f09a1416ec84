/**
 * Password hashing with bcryptjs, the password rules, and the dummy hash that makes a login for an
 * unknown user cost as much as one with a wrong password.
 */
import { randomBytes } from 'node:crypto';
import { InvalidRequestError } from '../../domain/errors.js';
import type { Passwords } from '../../domain/ports/accounts.js';
import { sharedBcryptPool, type BcryptPool } from './bcrypt-pool.js';

/** bcrypt reads at most 72 bytes; a longer password would be silently truncated, so it is refused. */
export const PASSWORD_MIN_BYTES = 8;
export const PASSWORD_MAX_BYTES = 72;

/**
 * Throws `InvalidRequestError` (one violation at `path`) unless `password` is 8 to 72 bytes in UTF-8.
 * Bytes, not characters: `'é'.repeat(37)` is 37 characters but 74 bytes.
 */
export function assertAcceptablePassword(password: string, path = 'body.password'): void {
  const bytes = Buffer.byteLength(password, 'utf8');
  if (bytes < PASSWORD_MIN_BYTES) {
    throw new InvalidRequestError([{ path, message: `must be at least ${PASSWORD_MIN_BYTES} bytes long (got ${bytes})` }]);
  }
  if (bytes > PASSWORD_MAX_BYTES) {
    throw new InvalidRequestError([{ path, message: `must be at most ${PASSWORD_MAX_BYTES} bytes in UTF-8 (got ${bytes})` }]);
  }
}

/** Hashes and verifies passwords at one bcrypt cost, on worker threads (never on the event loop). */
export class PasswordHasher implements Passwords {
  /** bcrypt cost factor (log2 of the rounds), 4..31. */
  readonly rounds: number;
  readonly #bcrypt: BcryptPool;
  #dummyHash: Promise<string> | undefined;

  constructor(options: { rounds: number; pool?: BcryptPool }) {
    this.#bcrypt = options.pool ?? sharedBcryptPool();
    if (!Number.isInteger(options.rounds) || options.rounds < 4 || options.rounds > 31) {
      throw new RangeError(`bcrypt rounds must be a whole number from 4 to 31 (got ${options.rounds})`);
    }
    this.rounds = options.rounds;
  }

  /** Throws `InvalidRequestError` at `path` unless `password` is 8 to 72 bytes in UTF-8. */
  assertAcceptable(password: string, path: string): void {
    assertAcceptablePassword(password, path);
  }

  /** A bcrypt hash of `password` (60 characters) at this hasher's cost. Does not check the rules. */
  hash(password: string): Promise<string> {
    return this.#bcrypt.hash(password, this.rounds);
  }

  /**
   * True when `password` matches `hash`. A password over 72 bytes never matches (bcrypt would compare
   * only its first 72 bytes), but still costs one comparison so its timing gives nothing away.
   */
  async verify(password: string, hash: string): Promise<boolean> {
    if (Buffer.byteLength(password, 'utf8') > PASSWORD_MAX_BYTES) {
      await this.#bcrypt.compare(password, hash);
      return false;
    }
    return this.#bcrypt.compare(password, hash);
  }

  /**
   * Spends the time of one `verify` against a hash of this cost and resolves to false: the path for a
   * user that does not exist, so it cannot be told apart from a wrong password by timing.
   */
  async verifyUnknownUser(password: string): Promise<false> {
    await this.verify(password, await this.dummyHash());
    return false;
  }

  /**
   * The dummy hash, computed once per hasher (a random secret nobody knows, at this cost). Call it at
   * startup to keep its one-time cost off the first failed login.
   */
  dummyHash(): Promise<string> {
    this.#dummyHash ??= this.#bcrypt.hash(randomBytes(32).toString('base64url'), this.rounds);
    return this.#dummyHash;
  }
}
