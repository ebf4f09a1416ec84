/**
 * Creates the `users` table. Written with TypeORM's Table API so one class serves SQLite and
 * PostgreSQL, and the table lands in the DataSource's configured PostgreSQL schema.
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { Table } from '../typeorm.js';

// Kept local rather than imported from the entity: a migration must keep meaning what it meant the day
// it shipped, even after the entity changes.
const TABLE = 'users';

export class CreateUsers1763726400000 implements MigrationInterface {
  readonly name = 'CreateUsers1763726400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const postgres = queryRunner.connection.options.type === 'postgres';
    const timestamp = postgres ? 'timestamptz' : 'datetime';
    const now = postgres ? 'now()' : 'CURRENT_TIMESTAMP';
    await queryRunner.createTable(
      new Table({
        name: TABLE,
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment', primaryKeyConstraintName: 'PK_users' },
          { name: 'username', type: 'varchar', length: '64', isNullable: false, ...(postgres ? { collation: 'C' } : {}) },
          { name: 'password_hash', type: 'varchar', length: '100', isNullable: false },
          { name: 'is_admin', type: 'boolean', isNullable: false, default: postgres ? 'false' : '0' },
          { name: 'created_at', type: timestamp, isNullable: false, default: now },
          { name: 'updated_at', type: timestamp, isNullable: false, default: now },
        ],
        uniques: [{ name: 'UQ_users_username', columnNames: ['username'] }],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable(TABLE);
  }
}
