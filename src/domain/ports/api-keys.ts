/**
 * The managed API key ports: the stored records and the verifier that turns a key into a principal.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
import type { Principal } from './accounts.js';

/** What a managed API key may do: `read` calls the data endpoints, `admin` is an administrator. */
export type ApiKeyRole = 'read' | 'admin';

/** A stored managed API key. Only the SHA-256 digest of the secret is kept; the secret itself never is. */
export interface ApiKeyRecord {
  /** UUID; appears in principals (`key:<id>`), lists and the revoke path. */
  id: string;
  name: string;
  role: ApiKeyRole;
  /** Lowercase hex SHA-256 of the whole key (`mds_...`). Never leaves the services layer. */
  digest: string;
  rateLimitPerMinute: number | null;
  expiresAt: Date | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  /** Actor id of the creator (`user:admin`, `cli`, ...). */
  createdBy: string;
}

/** Where managed API keys live. */
export interface ApiKeyStore {
  /** Stores a new key. The id and digest are unique (random UUID, digest of 256 random bits). */
  create(record: ApiKeyRecord): Promise<ApiKeyRecord>;
  /** The key whose digest is `digest`, or `undefined` (revoked keys are gone). */
  findByDigest(digest: string): Promise<ApiKeyRecord | undefined>;
  /** The key whose id is `id`, or `undefined` (revoked keys are gone). */
  findById(id: string): Promise<ApiKeyRecord | undefined>;
  /** Every key, newest first. */
  list(): Promise<ApiKeyRecord[]>;
  /** Removes the key; resolves to false when there was none with that id. */
  delete(id: string): Promise<boolean>;
  /**
   * Sets `lastUsedAt` to `at` unless it is already later than `at - minIntervalMs`, so instances
   * sharing the database write it at most once per interval. Resolves to true when it wrote.
   */
  touchLastUsed(id: string, at: Date, minIntervalMs: number): Promise<boolean>;
}

/** Turns a presented managed key into the caller it stands for. */
export interface ApiKeyVerifier {
  /**
   * The principal of `key` when it is a managed key that exists and has not expired, `undefined` when
   * no such key exists (never created, or revoked). Throws `InvalidCredentialsError` for an expired
   * key, and any other error when the store cannot answer.
   */
  verify(key: string): Promise<Principal | undefined>;
  /**
   * Whether the managed key `id` still exists (was not revoked), asked of the store itself, never of
   * a cache: what a connection opened with the key is checked against while it lives. Throws when
   * the store cannot answer.
   */
  exists(id: string): Promise<boolean>;
}
