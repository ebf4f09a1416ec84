/**
 * Builds the TypeORM DataSource for DATABASE_URL: `sqlite:<path>` (better-sqlite3) or
 * `postgres://user:pass@host:port/db` (pg). The schema comes from migrations only.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createRequire } from 'node:module';
import type pg from 'pg';
import { DataSource } from './typeorm.js';
import { AppError } from '../../domain/errors.js';
import { apiKeyEntity } from './api-key-entity.js';
import { CreateUsers1763726400000 } from './migrations/1763726400000-create-users.js';
import { CreateApiKeys1763900000000 } from './migrations/1763900000000-create-api-keys.js';
import { CreateCandles1764000000000 } from './migrations/1764000000000-create-candles.js';
import { CreateHistoryJobs1764100000000 } from './migrations/1764100000000-create-history-jobs.js';
import { CreateUsageDaily1764200000000 } from './migrations/1764200000000-create-usage-daily.js';
import { CreateDataIssues1764300000000 } from './migrations/1764300000000-create-data-issues.js';
import { AddHistoryJobKind1764350000000 } from './migrations/1764350000000-add-history-job-kind.js';
import { CreateUsageOperations1764400000000 } from './migrations/1764400000000-create-usage-operations.js';
import { AddDataIssueCloses1764500000000 } from './migrations/1764500000000-add-data-issue-closes.js';
import { CreateFxRates1764600000000 } from './migrations/1764600000000-create-fx-rates.js';
import { PartitionCandles1764700000000 } from './migrations/1764700000000-partition-candles.js';
import { historyJobEntity } from './history-job-entity.js';
import { userEntity, type DatabaseKind } from './user-entity.js';

/** Options beyond the URL, for callers that must isolate themselves (tests, shared databases). */
export interface DataSourceOptions {
  /** PostgreSQL schema holding the tables (it must exist); ignored for SQLite. Default: the search path. */
  schema?: string;
}

/** What a database URL points at. */
export type DatabaseTarget = { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string };

const POSTGRES_CONNECT_TIMEOUT_MS = 5000;

const require = createRequire(import.meta.url);
let guardedPgClient: typeof pg.Client | undefined;

/**
 * pg's client with an `error` listener for its whole life. pg-pool and TypeORM each listen only while
 * they hold a client, and a server that dies (a killed postmaster) can send its last FATAL to a client
 * in between: an `error` event nobody listens to throws, and would end the process. The owners still
 * hear every error; this listener only keeps the orphan from being fatal. Made on first use, so a
 * process on SQLite (the CLI's commands above all) never loads pg.
 */
function GuardedPgClient(): typeof pg.Client {
  if (guardedPgClient === undefined) {
    const { Client } = require('pg') as typeof pg;
    guardedPgClient = class GuardedPgClient extends Client {
      constructor(config?: string | pg.ClientConfig) {
        super(config);
        this.on('error', () => undefined);
      }
    };
  }
  return guardedPgClient;
}

/**
 * Parses DATABASE_URL. `sqlite:./data/mds.sqlite`, `sqlite:/abs/file`, `sqlite:///abs/file` and
 * `sqlite::memory:` are SQLite; `postgres://` and `postgresql://` are PostgreSQL.
 * Throws `AppError` with code `DATABASE_URL_INVALID` for anything else.
 */
export function parseDatabaseUrl(databaseUrl: string): DatabaseTarget {
  if (databaseUrl.startsWith('sqlite:')) {
    let path = databaseUrl.slice('sqlite:'.length);
    // `sqlite:///abs` is the URL spelling of `/abs`; `sqlite://rel` of `rel`.
    if (path.startsWith('//')) path = path.slice(2);
    if (path.length === 0) throw new AppError('DATABASE_URL_INVALID', `DATABASE_URL '${databaseUrl}' names no SQLite file`);
    return { kind: 'sqlite', path };
  }
  if (/^postgres(ql)?:\/\/./.test(databaseUrl)) return { kind: 'postgres', url: databaseUrl };
  throw new AppError('DATABASE_URL_INVALID', `DATABASE_URL '${redactDatabaseUrl(databaseUrl)}' must be sqlite:<path> or postgres://user:pass@host:port/db`);
}

/** The URL with its password replaced by `***`, fit for logs and error messages. */
export function redactDatabaseUrl(databaseUrl: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(databaseUrl)) return databaseUrl;
  try {
    const url = new URL(databaseUrl);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    // Unparsable: show only the scheme so a password can never slip through.
    return `${databaseUrl.split(':')[0] ?? 'database'}://…`;
  }
}

/**
 * A DataSource for `databaseUrl`, not yet initialized. It never synchronizes the schema and never runs
 * migrations by itself: call `initialize()` then `runMigrations()`. SQLite creates the file's parent
 * directory on `initialize()`.
 */
export function createDataSource(databaseUrl: string, options: DataSourceOptions = {}): DataSource {
  const target = parseDatabaseUrl(databaseUrl);
  const common = {
    entities: [userEntity(target.kind), apiKeyEntity(target.kind), historyJobEntity(target.kind)],
    migrations: [CreateUsers1763726400000, CreateApiKeys1763900000000, CreateCandles1764000000000, CreateHistoryJobs1764100000000, CreateUsageDaily1764200000000, CreateDataIssues1764300000000, AddHistoryJobKind1764350000000, CreateUsageOperations1764400000000, AddDataIssueCloses1764500000000, CreateFxRates1764600000000, PartitionCandles1764700000000],
    synchronize: false,
    migrationsRun: false,
    logging: false,
  };
  if (target.kind === 'sqlite') {
    if (target.path !== ':memory:') ensureDirectory(target.path);
    return new DataSource({
      ...common,
      type: 'better-sqlite3',
      database: target.path,
      // WAL lets the CLI write while the server reads the same file.
      enableWAL: target.path !== ':memory:',
    });
  }
  return new DataSource({
    ...common,
    type: 'postgres',
    url: target.url,
    ...(options.schema ? { schema: options.schema } : {}),
    // pg waits forever for an unreachable host by default.
    connectTimeoutMS: POSTGRES_CONNECT_TIMEOUT_MS,
    applicationName: 'mds',
    // pg-pool's option: the client class it creates.
    extra: { Client: GuardedPgClient() },
  });
}

/**
 * Creates the SQLite file's directory, level by level, or says why it cannot. Node's recursive mkdir
 * (and TypeORM's, which uses it) loops at full CPU without a word on a parent that exists but takes no
 * directories (`/proc/nope/x.sqlite`).
 */
function ensureDirectory(file: string): void {
  const missing: string[] = [];
  for (let directory = dirname(resolve(file)); !existsSync(directory); directory = dirname(directory)) {
    missing.unshift(directory);
    if (dirname(directory) === directory) break;
  }
  for (const directory of missing) {
    try {
      mkdirSync(directory);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'EEXIST') continue;
      const reason = typeof code === 'string' ? code : err instanceof Error ? err.message : String(err);
      throw new AppError('DATABASE_URL_INVALID', `DATABASE_URL: cannot create the directory '${directory}' for the SQLite file (${reason}); point DATABASE_URL at a writable path`);
    }
  }
}

/** Which entity/migration dialect a DataSource speaks. */
export function databaseKindOf(dataSource: DataSource): DatabaseKind {
  return dataSource.options.type === 'postgres' ? 'postgres' : 'sqlite';
}
