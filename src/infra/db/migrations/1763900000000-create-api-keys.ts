/**
 * Creates the `api_keys` table for managed API keys. The key itself is never stored: `key_digest` is
 * its SHA-256 (hex), unique, so a presented key is found by one indexed lookup.
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { Table } from '../typeorm.js';

// Kept local rather than imported from the entity: a migration must keep meaning what it meant the day
// it shipped, even after the entity changes.
const TABLE = 'api_keys';

export class CreateApiKeys1763900000000 implements MigrationInterface {
  readonly name = 'CreateApiKeys1763900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const postgres = queryRunner.connection.options.type === 'postgres';
    const timestamp = postgres ? 'timestamptz' : 'datetime';
    const now = postgres ? 'now()' : 'CURRENT_TIMESTAMP';
    await queryRunner.createTable(
      new Table({
        name: TABLE,
        columns: [
          { name: 'id', type: 'varchar', length: '36', isPrimary: true, primaryKeyConstraintName: 'PK_api_keys' },
          { name: 'name', type: 'varchar', length: '64', isNullable: false },
          { name: 'role', type: 'varchar', length: '16', isNullable: false },
          { name: 'key_digest', type: 'varchar', length: '64', isNullable: false },
          { name: 'rate_limit_per_minute', type: 'integer', isNullable: true },
          { name: 'expires_at', type: timestamp, isNullable: true },
          { name: 'created_at', type: timestamp, isNullable: false, default: now },
          { name: 'last_used_at', type: timestamp, isNullable: true },
          { name: 'created_by', type: 'varchar', length: '80', isNullable: false },
        ],
        uniques: [{ name: 'UQ_api_keys_key_digest', columnNames: ['key_digest'] }],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable(TABLE);
  }
}
