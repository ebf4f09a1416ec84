/**
 * The `users` table as TypeORM sees it. An EntitySchema (no decorators, no reflect-metadata) with every
 * column type spelled out. This row type never leaves `src/infra/db`: the store maps it to `User`.
 */
import { EntitySchema } from './typeorm.js';

/** The two SQL dialects the store runs on. */
export type DatabaseKind = 'sqlite' | 'postgres';

/** One row of `users`. */
export interface UserRow {
  id: number;
  username: string;
  passwordHash: string;
  isAdmin: boolean;
  createdAt: Date;
  updatedAt: Date;
}

/** Entity name to ask a DataSource for its repository. */
export const USER_ENTITY = 'UserRow';
export const USERS_TABLE = 'users';
export const USERNAME_UNIQUE_CONSTRAINT = 'UQ_users_username';

/**
 * Column types that differ by dialect. TypeORM's SQLite driver has no `timestamp` type and its
 * PostgreSQL driver has no `datetime`; `timestamptz` keeps instants correct whatever the server's zone.
 * `now` is spelled the way each database reports it back, so the schema builder sees no drift.
 * Usernames compare bytewise on PostgreSQL (`C`) as they do on SQLite, so both list them in one order.
 */
export const DIALECT = {
  sqlite: { timestamp: 'datetime', now: 'CURRENT_TIMESTAMP', usernameCollation: undefined },
  postgres: { timestamp: 'timestamptz', now: 'now()', usernameCollation: 'C' },
} as const satisfies Record<DatabaseKind, { timestamp: string; now: string; usernameCollation: string | undefined }>;

function buildUserEntity(kind: DatabaseKind): EntitySchema<UserRow> {
  const dialect = DIALECT[kind];
  return new EntitySchema<UserRow>({
    name: USER_ENTITY,
    tableName: USERS_TABLE,
    columns: {
      id: { type: 'integer', primary: true, generated: 'increment' },
      username: {
        type: 'varchar',
        length: 64,
        nullable: false,
        ...(dialect.usernameCollation ? { collation: dialect.usernameCollation } : {}),
      },
      passwordHash: { name: 'password_hash', type: 'varchar', length: 100, nullable: false },
      isAdmin: { name: 'is_admin', type: 'boolean', nullable: false, default: false },
      createdAt: { name: 'created_at', type: dialect.timestamp, nullable: false, default: () => dialect.now },
      updatedAt: { name: 'updated_at', type: dialect.timestamp, nullable: false, default: () => dialect.now },
    },
    uniques: [{ name: USERNAME_UNIQUE_CONSTRAINT, columns: ['username'] }],
  });
}

const ENTITIES: Record<DatabaseKind, EntitySchema<UserRow>> = {
  sqlite: buildUserEntity('sqlite'),
  postgres: buildUserEntity('postgres'),
};

/** The entity schema for `kind`; the same object every time, so one process can hold both. */
export function userEntity(kind: DatabaseKind): EntitySchema<UserRow> {
  return ENTITIES[kind];
}
