/**
 * `ApiKeyStore` over TypeORM, on SQLite or PostgreSQL, in the same database as the users. TypeORM rows
 * and errors stop here: callers get `ApiKeyRecord` values and the errors of `src/errors.ts`.
 */
import type { DataSource, Repository } from 'typeorm';
import { Brackets } from './typeorm.js';
import type { ApiKeyRecord, ApiKeyRole, ApiKeyStore } from '../../domain/ports/api-keys.js';
import { API_KEY_ENTITY, type ApiKeyRow } from './api-key-entity.js';
import { storeOperations } from './serial-queue.js';

function toRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    // Written only by `create` from an `ApiKeyRole`; anything else is a key nobody may use as admin.
    role: (row.role === 'admin' ? 'admin' : 'read') satisfies ApiKeyRole,
    digest: row.keyDigest,
    rateLimitPerMinute: row.rateLimitPerMinute,
    expiresAt: row.expiresAt,
    createdAt: row.createdAt,
    lastUsedAt: row.lastUsedAt,
    createdBy: row.createdBy,
  };
}

/** Managed API keys in a TypeORM DataSource that `runMigrations()` has brought up to date. */
export class TypeormApiKeyStore implements ApiKeyStore {
  readonly #dataSource: DataSource;
  readonly #op: <T>(job: () => Promise<T>) => Promise<T>;

  /** `dataSource` must be initialized; the store never closes it. */
  constructor(dataSource: DataSource) {
    this.#dataSource = dataSource;
    this.#op = storeOperations(dataSource, { table: 'api_keys', store: 'API key store' });
  }

  #repo(): Repository<ApiKeyRow> {
    return this.#dataSource.getRepository<ApiKeyRow>(API_KEY_ENTITY);
  }


  /** Inserts the key as given (its id and digest must be fresh). */
  create(record: ApiKeyRecord): Promise<ApiKeyRecord> {
    return this.#op(async () => {
      const row: ApiKeyRow = {
        id: record.id,
        name: record.name,
        role: record.role,
        keyDigest: record.digest,
        rateLimitPerMinute: record.rateLimitPerMinute,
        expiresAt: record.expiresAt,
        createdAt: record.createdAt,
        lastUsedAt: record.lastUsedAt,
        createdBy: record.createdBy,
      };
      await this.#repo().insert(row);
      return toRecord(row);
    });
  }

  /** The key with this digest (an indexed lookup), or `undefined`. */
  findByDigest(digest: string): Promise<ApiKeyRecord | undefined> {
    return this.#op(async () => {
      const row = await this.#repo().findOne({ where: { keyDigest: digest } });
      return row ? toRecord(row) : undefined;
    });
  }

  /** The key with this id (the primary key), or `undefined`. */
  findById(id: string): Promise<ApiKeyRecord | undefined> {
    return this.#op(async () => {
      const row = await this.#repo().findOne({ where: { id } });
      return row ? toRecord(row) : undefined;
    });
  }

  /** Every key, newest first (ties by id, so the order is stable). */
  list(): Promise<ApiKeyRecord[]> {
    return this.#op(async () => {
      const rows = await this.#repo().find({ order: { createdAt: 'DESC', id: 'ASC' } });
      return rows.map(toRecord);
    });
  }

  /** Deletes the row; false when no key has this id. */
  delete(id: string): Promise<boolean> {
    return this.#op(async () => {
      const result = await this.#repo().delete({ id });
      return (result.affected ?? 0) > 0;
    });
  }

  /**
   * One conditional UPDATE, so instances racing on the same key write it once per interval between
   * them: the row changes only when `last_used_at` is empty or older than `at - minIntervalMs`.
   */
  touchLastUsed(id: string, at: Date, minIntervalMs: number): Promise<boolean> {
    const threshold = new Date(at.getTime() - minIntervalMs);
    return this.#op(async () => {
      const result = await this.#repo()
        .createQueryBuilder()
        .update()
        .set({ lastUsedAt: at })
        .where('id = :id', { id })
        .andWhere(new Brackets((qb) => qb.where('last_used_at IS NULL').orWhere('last_used_at <= :threshold', { threshold })))
        .execute();
      return (result.affected ?? 0) > 0;
    });
  }
}
