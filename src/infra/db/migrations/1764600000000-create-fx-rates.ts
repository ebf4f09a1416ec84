/**
 * Creates `fx_rates`: reference rates by source, currency and publication day (units of the currency
 * per euro for the ECB), kept for good so the full history is fetched once (DESIGN 25).
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { Table } from '../typeorm.js';

// Kept local rather than imported from the store: a migration must keep meaning what it meant the day it shipped.
const TABLE = 'fx_rates';

export class CreateFxRates1764600000000 implements MigrationInterface {
  readonly name = 'CreateFxRates1764600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: TABLE,
        columns: [
          { name: 'source', type: 'varchar', length: '16', isPrimary: true, isNullable: false },
          { name: 'currency', type: 'varchar', length: '3', isPrimary: true, isNullable: false },
          // The publication date as `YYYY-MM-DD`: sorts as it reads, the same text in both databases.
          { name: 'day', type: 'varchar', length: '10', isPrimary: true, isNullable: false },
          // Doubles hold every published rate (at most 6 significant digits) exactly as parsed.
          { name: 'rate', type: 'double precision', isNullable: false },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable(TABLE);
  }
}
