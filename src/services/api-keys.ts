/**
 * Managed API keys: issue (the secret is shown once, only its SHA-256 digest is stored), list, revoke,
 * and verify a presented key. Verification keeps a short-lived lookup cache; a revocation empties it
 * here at once and announces the fleet-wide "identity changed" event (`key:<id>`, domain/identity.ts)
 * through the Broadcast port, so every other instance empties its cache and closes the key's open
 * streams (the CLI announces its revocations the same way); entries also die on their own
 * after `cacheTtlMs` (at most a second), so a lost broadcast cannot keep a revoked key alive longer,
 * and within 100 ms while the broadcast is known to be down (the one in-process memory, `LocalMemory`).
 *
 * While the database is unavailable (DESIGN 27), a key this instance verified against it within the
 * outage grace (AUTH_OUTAGE_GRACE_SECONDS) is still accepted from a second memory that the same
 * revocations empty; a key it did not verify is neither accepted nor refused: 503, retry later.
 */
import { parseInstant } from '../domain/instant.js';
import { hash, randomBytes, randomUUID } from 'node:crypto';
import { ApiKeyNotFoundError, DatabaseUnavailableError, InvalidCredentialsError, InvalidRequestError } from '../domain/errors.js';
import { channels } from '../domain/key-space.js';
import { AUTH_MESSAGES } from '../domain/credentials.js';
import { apiKeyIdentity, apiKeyIdOf } from '../domain/identity.js';
import type { components } from '../generated/api.js';
import type { Logger } from '../domain/ports/logger.js';
import type { ActionContext, AuditLog } from '../domain/ports/audit.js';
import type { ApiKeyRecord, ApiKeyRole, ApiKeyStore, ApiKeyVerifier } from '../domain/ports/api-keys.js';
import type { Broadcast } from '../domain/ports/cache.js';
import type { Principal } from '../domain/ports/accounts.js';
import { lastAnswer, LocalMemory } from './local-memory.js';

/** What a managed key past its `expires_at` is told (401). */
export const EXPIRED_KEY_MESSAGE = AUTH_MESSAGES.apiKeyExpired;

export type ApiKey = components['schemas']['ApiKey'];
export type CreatedApiKey = components['schemas']['CreatedApiKey'];
export type CreateApiKeyInput = components['schemas']['CreateApiKeyRequest'];

/** Every managed key starts with this, so scanners (and people) can recognise a leaked one. */
export const API_KEY_PREFIX = 'mds_';
/** 32 random bytes: 256 bits, 43 characters of base64url. */
const SECRET_BYTES = 32;
const KEY_PATTERN = /^mds_[A-Za-z0-9_-]{43}$/;
const NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
export const RATE_LIMIT_MAX_PER_MINUTE = 1_000_000;


/** Upper bound of the lookup cache's lifetime: "revoked means refused everywhere within a second". */
const MAX_CACHE_TTL_MS = 1000;
const CACHE_MAX_ENTRIES = 10_000;
/** How soon a `last_used_at` that could not be written is tried again (by the key's next use). */
const LAST_USED_RETRY_MS = 5000;

export interface ApiKeyServiceOptions {
  store: ApiKeyStore;
  audit: AuditLog;
  logger: Logger;
  /** Carries revocations to every instance; without it, other instances wait out the cache lifetime. */
  broadcast?: Broadcast | undefined;
  /** How long a verified key is trusted without asking the store, in ms (at most 1000). Default 500. */
  cacheTtlMs?: number;
  /**
   * While the store is unavailable, a key this instance verified against it less than this many ms
   * ago is still accepted (revocations announced meanwhile still drop it); 0 accepts none. Default 600000.
   */
  outageGraceMs?: number | undefined;
  /** `last_used_at` is written at most once per this many ms per key. Default 60000. */
  lastUsedIntervalMs?: number;
  /** Clock in ms since the epoch; tests move it. Default `Date.now`. */
  now?: () => number;
}

/** SHA-256 of the whole key, lowercase hex: what the store keeps instead of the key. */
export function apiKeyDigest(key: string): string {
  return hash('sha256', key, 'hex');
}

function toApiKey(record: ApiKeyRecord): ApiKey {
  return {
    id: record.id,
    name: record.name,
    role: record.role,
    rate_limit_per_minute: record.rateLimitPerMinute,
    expires_at: record.expiresAt?.toISOString() ?? null,
    created_at: record.createdAt.toISOString(),
    last_used_at: record.lastUsedAt?.toISOString() ?? null,
    created_by: record.createdBy,
  };
}

function principalOf(record: ApiKeyRecord): Principal {
  const principal: Principal = { username: `api-key:${record.name}`, isAdmin: record.role === 'admin', kind: 'api-key', id: apiKeyIdentity(record.id) };
  if (record.rateLimitPerMinute !== null) principal.rateLimitPerMinute = record.rateLimitPerMinute;
  if (record.expiresAt !== null) principal.expiresAtMs = record.expiresAt.getTime();
  return principal;
}

/** Issues, lists, revokes and verifies managed API keys. */
export class ApiKeyService implements ApiKeyVerifier {
  readonly #store: ApiKeyStore;
  readonly #audit: AuditLog;
  readonly #logger: Logger;
  readonly #broadcast: Broadcast | undefined;
  readonly #cacheTtlMs: number;
  readonly #lastUsedIntervalMs: number;
  readonly #now: () => number;
  /** digest -> the record; dropped by a revocation here or, through the broadcast, elsewhere. */
  readonly #cache: LocalMemory<string, ApiKeyRecord>;
  /**
   * digest -> the record as the store last answered it, for the outage grace only: dropped by the same
   * revocations as `#cache`, and by everything when the broadcast resyncs after a gap.
   */
  readonly #lastVerified: LocalMemory<string, ApiKeyRecord>;
  /** id -> when this instance last wrote (or tried to write) `last_used_at`. */
  readonly #lastTouchedMs = new Map<string, number>();

  constructor(options: ApiKeyServiceOptions) {
    this.#store = options.store;
    this.#audit = options.audit;
    this.#logger = options.logger;
    this.#broadcast = options.broadcast;
    this.#cacheTtlMs = Math.min(Math.max(0, options.cacheTtlMs ?? 500), MAX_CACHE_TTL_MS);
    this.#lastUsedIntervalMs = options.lastUsedIntervalMs ?? 60_000;
    this.#now = options.now ?? Date.now;
    const memory = (maxAgeMs: number) =>
      new LocalMemory<string, ApiKeyRecord>({
        maxEntries: CACHE_MAX_ENTRIES,
        maxAgeMs,
        invalidation: this.#broadcast && {
          broadcast: this.#broadcast,
          channel: channels.identityChanged,
          // The event also carries users' identities: only keys concern this cache.
          onMessage: (identity) => {
            const id = apiKeyIdOf(identity);
            if (id !== undefined) this.#forget(id);
          },
        },
        now: this.#now,
      });
    this.#cache = memory(this.#cacheTtlMs);
    this.#lastVerified = memory(Math.max(0, options.outageGraceMs ?? 600_000));
  }

  /**
   * Issues a key and returns it with its secret, the only time the secret is ever available. Throws
   * `InvalidRequestError` for a bad name, a rate limit outside 1..1000000, or an expiry not in the future.
   */
  async create(input: CreateApiKeyInput, context: ActionContext): Promise<CreatedApiKey> {
    const violations: Array<{ path: string; message: string }> = [];
    if (!NAME_PATTERN.test(input.name)) violations.push({ path: 'body.name', message: 'must be 1 to 64 letters, digits, dots, dashes or underscores' });
    if (input.role !== 'read' && input.role !== 'admin') violations.push({ path: 'body.role', message: 'must be read or admin' });
    const limit = input.rate_limit_per_minute;
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > RATE_LIMIT_MAX_PER_MINUTE)) {
      violations.push({ path: 'body.rate_limit_per_minute', message: `must be a whole number from 1 to ${RATE_LIMIT_MAX_PER_MINUTE}` });
    }
    let expiresAt: Date | null = null;
    if (input.expires_at !== undefined) {
      const at = parseInstant(input.expires_at);
      expiresAt = at === undefined ? null : new Date(at);
      if (expiresAt === null) violations.push({ path: 'body.expires_at', message: 'must be an ISO 8601 date-time that exists (2027-01-01T00:00:00Z)' });
      else if (expiresAt.getTime() <= this.#now()) violations.push({ path: 'body.expires_at', message: 'must lie in the future' });
    }
    if (violations.length > 0) throw new InvalidRequestError(violations);

    const key = `${API_KEY_PREFIX}${randomBytes(SECRET_BYTES).toString('base64url')}`;
    const record = await this.#store.create({
      id: randomUUID(),
      name: input.name,
      role: input.role as ApiKeyRole,
      digest: apiKeyDigest(key),
      rateLimitPerMinute: limit ?? null,
      expiresAt,
      createdAt: new Date(this.#now()),
      lastUsedAt: null,
      createdBy: context.actor,
    });
    this.#audit.record(
      { action: 'api_key.created', target: `key:${record.id}`, details: { key_name: record.name, role: record.role, expires_at: record.expiresAt?.toISOString() ?? null } },
      context,
    );
    return { ...toApiKey(record), key };
  }

  /** Every managed key, newest first, without secrets or digests. */
  async list(): Promise<ApiKey[]> {
    return (await this.#store.list()).map(toApiKey);
  }

  /**
   * Revokes the key everywhere: this instance at once, the others through the broadcast, which also
   * closes the key's open streams on every instance. Throws `ApiKeyNotFoundError`.
   */
  async revoke(id: string, context: ActionContext): Promise<void> {
    if (!(await this.#store.delete(id))) throw new ApiKeyNotFoundError(id);
    this.#forget(id);
    await this.#broadcast?.publish(channels.identityChanged, apiKeyIdentity(id));
    this.#audit.record({ action: 'api_key.revoked', target: `key:${id}` }, context);
  }

  /**
   * The principal of a live managed key, else `undefined` (malformed, unknown, revoked or expired).
   * Records the use in `last_used_at`, at most once per interval per key and without waiting for it.
   * While the store is unavailable, a key verified within the outage grace is still accepted; any
   * other key throws `DatabaseUnavailableError` (it may well be good: 503, not 401).
   */
  async verify(key: string): Promise<Principal | undefined> {
    // Not shaped like ours: no database round trip for a key that cannot exist.
    if (!KEY_PATTERN.test(key)) return undefined;
    const digest = apiKeyDigest(key);
    let record = this.#cache.get(digest);
    if (!record) {
      record = await this.#read(digest);
      if (!record) return undefined;
    }
    // The caller holds the key, so saying it expired tells them nothing they could not know.
    if (record.expiresAt && record.expiresAt.getTime() <= this.#now()) throw new InvalidCredentialsError(EXPIRED_KEY_MESSAGE);
    this.#touch(record.id);
    return principalOf(record);
  }

  /** The record of `digest` from the store (remembered for the next second and for an outage), or the one remembered when the store is unavailable. */
  async #read(digest: string): Promise<ApiKeyRecord | undefined> {
    const version = this.#cache.version;
    const record = await lastAnswer(this.#lastVerified, digest, () => this.#store.findByDigest(digest));
    if (record) this.#cache.set(digest, record, Infinity, version);
    return record;
  }

  /**
   * Whether the key `id` still exists, asked of the store (see `ApiKeyVerifier.exists`); while the
   * store is unavailable, whether it was verified within the outage grace and not revoked since.
   */
  async exists(id: string): Promise<boolean> {
    try {
      return (await this.#store.findById(id)) !== undefined;
    } catch (err) {
      if (!(err instanceof DatabaseUnavailableError)) throw err;
      if (this.#lastVerified.find((record) => record.id === id) === undefined) throw err;
      return true;
    }
  }

  /** Stops listening for revocations. */
  close(): void {
    this.#cache.close();
    this.#lastVerified.close();
  }

  #forget(id: string): void {
    this.#lastTouchedMs.delete(id);
    this.#cache.deleteWhere((record) => record.id === id);
    this.#lastVerified.deleteWhere((record) => record.id === id);
  }

  #touch(id: string): void {
    const nowMs = this.#now();
    const last = this.#lastTouchedMs.get(id);
    if (last !== undefined && nowMs - last < this.#lastUsedIntervalMs) return;
    this.#lastTouchedMs.set(id, nowMs);
    this.#store.touchLastUsed(id, new Date(nowMs), this.#lastUsedIntervalMs).catch((err: unknown) => {
      // Tried again by a use of the key a few seconds later, with that use's time, not a minute later.
      if (this.#lastTouchedMs.get(id) === nowMs) this.#lastTouchedMs.set(id, nowMs - this.#lastUsedIntervalMs + LAST_USED_RETRY_MS);
      this.#logger.warn({ keyId: id, reason: err instanceof Error ? err.message : String(err) }, 'could not record when an API key was last used');
    });
  }
}
