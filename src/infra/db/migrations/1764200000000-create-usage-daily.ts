/** Creates `usage_daily`: requests and quota refusals per caller per UTC day, for the usage report. */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { Table } from '../typeorm.js';

// Kept local rather than imported from the store: a migration must keep meaning what it meant the day it shipped.
const TABLE = 'usage_daily';

export class CreateUsageDaily1764200000000 implements MigrationInterface {
  readonly name = 'CreateUsageDaily1764200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: TABLE,
        columns: [
          { name: 'day', type: 'varchar', length: '10', isPrimary: true },
          { name: 'caller_kind', type: 'varchar', length: '8', isPrimary: true },
          { name: 'caller', type: 'varchar', length: '128', isPrimary: true },
          { name: 'requests', type: 'bigint', isNullable: false, default: 0 },
          { name: 'rate_limited', type: 'bigint', isNullable: false, default: 0 },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable(TABLE);
  }
}
