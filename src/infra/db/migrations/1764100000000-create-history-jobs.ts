/** Creates `history_jobs`: backfill jobs, their progress and the heartbeat of the instance running each. */
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { Table } from '../typeorm.js';

// Kept local rather than imported from the entity: a migration must keep meaning what it meant the day it shipped.
const TABLE = 'history_jobs';

export class CreateHistoryJobs1764100000000 implements MigrationInterface {
  readonly name = 'CreateHistoryJobs1764100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    const timestamp = queryRunner.connection.options.type === 'postgres' ? 'timestamptz' : 'datetime';
    await queryRunner.createTable(
      new Table({
        name: TABLE,
        columns: [
          { name: 'id', type: 'varchar', length: '36', isPrimary: true, primaryKeyConstraintName: 'PK_history_jobs' },
          { name: 'symbols', type: 'text', isNullable: false },
          { name: 'bar_interval', type: 'varchar', length: '4', isNullable: false },
          { name: 'since', type: timestamp, isNullable: false },
          { name: 'state', type: 'varchar', length: '16', isNullable: false },
          { name: 'done_symbols', type: 'integer', isNullable: false },
          { name: 'candles', type: 'integer', isNullable: false },
          { name: 'current_symbol', type: 'varchar', length: '32', isNullable: true },
          { name: 'failures', type: 'text', isNullable: false },
          { name: 'created_by', type: 'varchar', length: '80', isNullable: false },
          { name: 'created_at', type: timestamp, isNullable: false },
          { name: 'updated_at', type: timestamp, isNullable: false },
          { name: 'owner', type: 'varchar', length: '64', isNullable: true },
          { name: 'heartbeat_at', type: timestamp, isNullable: true },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable(TABLE);
  }
}
