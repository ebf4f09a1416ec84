/**
 * The `api_keys` table as TypeORM sees it: an EntitySchema with every column type spelled out, as
 * for users. Only the SHA-256 digest of a key is stored. This row type never leaves `src/infra/db`.
 */
import { EntitySchema } from './typeorm.js';
import { DIALECT, type DatabaseKind } from './user-entity.js';

/** One row of `api_keys`. */
export interface ApiKeyRow {
  id: string;
  name: string;
  role: string;
  keyDigest: string;
  rateLimitPerMinute: number | null;
  expiresAt: Date | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  createdBy: string;
}

/** Entity name to ask a DataSource for its repository. */
export const API_KEY_ENTITY = 'ApiKeyRow';
export const API_KEYS_TABLE = 'api_keys';

function buildApiKeyEntity(kind: DatabaseKind): EntitySchema<ApiKeyRow> {
  const dialect = DIALECT[kind];
  return new EntitySchema<ApiKeyRow>({
    name: API_KEY_ENTITY,
    tableName: API_KEYS_TABLE,
    columns: {
      id: { type: 'varchar', length: 36, primary: true },
      name: { type: 'varchar', length: 64, nullable: false },
      role: { type: 'varchar', length: 16, nullable: false },
      keyDigest: { name: 'key_digest', type: 'varchar', length: 64, nullable: false },
      rateLimitPerMinute: { name: 'rate_limit_per_minute', type: 'integer', nullable: true },
      expiresAt: { name: 'expires_at', type: dialect.timestamp, nullable: true },
      createdAt: { name: 'created_at', type: dialect.timestamp, nullable: false, default: () => dialect.now },
      lastUsedAt: { name: 'last_used_at', type: dialect.timestamp, nullable: true },
      createdBy: { name: 'created_by', type: 'varchar', length: 80, nullable: false },
    },
    uniques: [{ name: 'UQ_api_keys_key_digest', columns: ['keyDigest'] }],
  });
}

const ENTITIES: Record<DatabaseKind, EntitySchema<ApiKeyRow>> = {
  sqlite: buildApiKeyEntity('sqlite'),
  postgres: buildApiKeyEntity('postgres'),
};

/** The entity schema for `kind`; the same object every time. */
export function apiKeyEntity(kind: DatabaseKind): EntitySchema<ApiKeyRow> {
  return ENTITIES[kind];
}
