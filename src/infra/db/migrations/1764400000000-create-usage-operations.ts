/**
 * Usage by door and operation (DESIGN 24): `usage_operations` holds each caller's actions, quota points
 * and quota refusals per UTC day, door and operation, and `usage_daily` gains the caller's points of the
 * day. Only adds: a release before this one keeps writing `usage_daily` as it did (its rows get 0 points).
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { Table, TableColumn } from '../typeorm.js';

// Kept local rather than imported from the store: a migration must keep meaning what it meant the day it shipped.
const TABLE = 'usage_operations';
const DAILY = 'usage_daily';

export class CreateUsageOperations1764400000000 implements MigrationInterface {
  readonly name = 'CreateUsageOperations1764400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: TABLE,
        columns: [
          { name: 'day', type: 'varchar', length: '10', isPrimary: true },
          { name: 'caller_kind', type: 'varchar', length: '8', isPrimary: true },
          { name: 'caller', type: 'varchar', length: '128', isPrimary: true },
          { name: 'door', type: 'varchar', length: '8', isPrimary: true },
          { name: 'operation', type: 'varchar', length: '96', isPrimary: true },
          { name: 'requests', type: 'bigint', isNullable: false, default: 0 },
          { name: 'points', type: 'bigint', isNullable: false, default: 0 },
          { name: 'rate_limited', type: 'bigint', isNullable: false, default: 0 },
        ],
      }),
    );
    await queryRunner.addColumn(DAILY, new TableColumn({ name: 'points', type: 'bigint', isNullable: false, default: 0 }));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn(DAILY, 'points');
    await queryRunner.dropTable(TABLE);
  }
}
