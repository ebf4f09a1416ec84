/**
 * Adds to `history_jobs` what a verify job needs beside a backfill: `kind` ('backfill' for every job
 * before this) and `result`, JSON of the verify's settings and findings (whether it repairs, the bars
 * compared, the divergences found); null for a backfill.
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { TableColumn } from '../typeorm.js';

// Kept local rather than imported from the entity: a migration must keep meaning what it meant the day it shipped.
const TABLE = 'history_jobs';

export class AddHistoryJobKind1764350000000 implements MigrationInterface {
  readonly name = 'AddHistoryJobKind1764350000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.addColumns(TABLE, [
      new TableColumn({ name: 'kind', type: 'varchar', length: '16', isNullable: false, default: "'backfill'" }),
      new TableColumn({ name: 'result', type: 'text', isNullable: true }),
    ]);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropColumn(TABLE, 'result');
    await queryRunner.dropColumn(TABLE, 'kind');
  }
}
