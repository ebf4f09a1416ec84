/**
 * Creates `data_issues`: each bar an upstream answer gave that the data-quality checks repaired, dropped
 * or suspect (symbol, interval, bar start, rule, what was done, the bar before and after as JSON, the
 * providers involved), kept for good so a repaired bar's raw value outlives a restart.
 */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { Table, TableIndex } from '../typeorm.js';

// Kept local rather than imported from the store: a migration must keep meaning what it meant the day it shipped.
const TABLE = 'data_issues';

export class CreateDataIssues1764300000000 implements MigrationInterface {
  readonly name = 'CreateDataIssues1764300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: TABLE,
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'symbol', type: 'varchar', length: '32', isNullable: false },
          { name: 'bar_interval', type: 'varchar', length: '4', isNullable: false },
          { name: 't', type: 'bigint', isNullable: false },
          { name: 'rule', type: 'varchar', length: '32', isNullable: false },
          { name: 'action', type: 'varchar', length: '16', isNullable: false },
          { name: 'flag', type: 'varchar', length: '64', isNullable: true },
          { name: 'before_bar', type: 'text', isNullable: true },
          { name: 'after_bar', type: 'text', isNullable: true },
          { name: 'providers', type: 'varchar', length: '200', isNullable: false },
          { name: 'recorded_at', type: 'bigint', isNullable: false },
        ],
      }),
    );
    await queryRunner.createIndex(TABLE, new TableIndex({ name: 'IDX_data_issues_bar', columnNames: ['symbol', 'bar_interval', 't'] }));
    await queryRunner.createIndex(TABLE, new TableIndex({ name: 'IDX_data_issues_recorded', columnNames: ['recorded_at'] }));
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable(TABLE);
  }
}
