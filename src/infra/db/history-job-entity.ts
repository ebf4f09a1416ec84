/**
 * The `history_jobs` table as TypeORM sees it: backfill jobs, their progress and the heartbeat of
 * the instance running each. This row type never leaves `src/infra/db`.
 */
import { EntitySchema } from './typeorm.js';
import { DIALECT, type DatabaseKind } from './user-entity.js';

/** One row of `history_jobs`. */
export interface HistoryJobRow {
  id: string;
  /** JSON array of symbols. */
  symbols: string;
  interval: string;
  since: Date;
  state: string;
  doneSymbols: number;
  candles: number;
  currentSymbol: string | null;
  /** JSON array of `{symbol, error}`. */
  failures: string;
  createdBy: string;
  createdAt: Date;
  updatedAt: Date;
  owner: string | null;
  heartbeatAt: Date | null;
  /** 'backfill' or 'verify'. */
  kind: string;
  /** A verify's settings and findings as JSON; null for a backfill. */
  result: string | null;
}

export const HISTORY_JOB_ENTITY = 'HistoryJobRow';
export const HISTORY_JOBS_TABLE = 'history_jobs';

function build(kind: DatabaseKind): EntitySchema<HistoryJobRow> {
  const dialect = DIALECT[kind];
  return new EntitySchema<HistoryJobRow>({
    name: HISTORY_JOB_ENTITY,
    tableName: HISTORY_JOBS_TABLE,
    columns: {
      id: { type: 'varchar', length: 36, primary: true },
      symbols: { type: 'text', nullable: false },
      interval: { name: 'bar_interval', type: 'varchar', length: 4, nullable: false },
      since: { type: dialect.timestamp, nullable: false },
      state: { type: 'varchar', length: 16, nullable: false },
      doneSymbols: { name: 'done_symbols', type: 'integer', nullable: false },
      candles: { type: 'integer', nullable: false },
      currentSymbol: { name: 'current_symbol', type: 'varchar', length: 32, nullable: true },
      failures: { type: 'text', nullable: false },
      createdBy: { name: 'created_by', type: 'varchar', length: 80, nullable: false },
      createdAt: { name: 'created_at', type: dialect.timestamp, nullable: false },
      updatedAt: { name: 'updated_at', type: dialect.timestamp, nullable: false },
      owner: { type: 'varchar', length: 64, nullable: true },
      heartbeatAt: { name: 'heartbeat_at', type: dialect.timestamp, nullable: true },
      kind: { type: 'varchar', length: 16, nullable: false, default: 'backfill' },
      result: { type: 'text', nullable: true },
    },
  });
}

const ENTITIES: Record<DatabaseKind, EntitySchema<HistoryJobRow>> = { sqlite: build('sqlite'), postgres: build('postgres') };

export function historyJobEntity(kind: DatabaseKind): EntitySchema<HistoryJobRow> {
  return ENTITIES[kind];
}
