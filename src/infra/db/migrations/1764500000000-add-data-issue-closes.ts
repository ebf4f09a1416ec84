/**
 * Adds `closes` to `data_issues`: for a `divergent` record, JSON of the closes compared (the stored
 * bar's and each disagreeing provider's, each with its provider); null for every other rule and for
 * the records written before it.
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { TableColumn } from '../typeorm.js';

// Kept local rather than imported from the store: a migration must keep meaning what it meant the day it shipped.
const TABLE = 'data_issues';

export class AddDataIssueCloses1764500000000 implements MigrationInterface {
  readonly name = 'AddDataIssueCloses1764500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumn(TABLE, new TableColumn({ name: 'closes', type: 'text', isNullable: true }));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn(TABLE, 'closes');
  }
}
