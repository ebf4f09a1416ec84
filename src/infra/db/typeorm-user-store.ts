/**
 * `UserStore` over TypeORM, on SQLite (better-sqlite3) or PostgreSQL. TypeORM rows and errors stop
 * here: callers get `User` values and the errors of `src/errors.ts`.
 */
import type { DataSource, Repository } from 'typeorm';
import { isUniqueViolation, reasonOf } from './db-errors.js';
import { AppError, DatabaseUnavailableError, LastAdminError, UserNotFoundError, UsernameTakenError } from '../../domain/errors.js';
import type { User, UserStore } from '../../domain/ports/accounts.js';
import { TypeormApiKeyStore } from './typeorm-api-key-store.js';
import type { TypeormCandleStore } from './typeorm-candle-store.js';
import type { TypeormHistoryJobStore } from './typeorm-history-job-store.js';
import type { TypeormFxRateStore } from './typeorm-fx-rate-store.js';
import type { TypeormDataIssueStore } from './typeorm-data-issue-store.js';
import type { TypeormUsageStore } from './typeorm-usage-store.js';
import { createDataSource, databaseKindOf, parseDatabaseUrl, redactDatabaseUrl, type DataSourceOptions } from './data-source.js';
import { storeOperations } from './serial-queue.js';
import { USER_ENTITY, type DatabaseKind, type UserRow } from './user-entity.js';

function toUser(row: UserRow): User {
  return {
    username: row.username,
    isAdmin: row.isAdmin,
    passwordHash: row.passwordHash,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

/** Users in a TypeORM DataSource that `runMigrations()` has brought up to date. */
export class TypeormUserStore implements UserStore {
  readonly #dataSource: DataSource;
  readonly #kind: DatabaseKind;
  readonly #op: <T>(job: () => Promise<T>) => Promise<T>;

  /** `dataSource` must be initialized; the store never closes it. */
  constructor(dataSource: DataSource) {
    this.#dataSource = dataSource;
    this.#kind = databaseKindOf(dataSource);
    this.#op = storeOperations(dataSource, { table: 'users', store: 'User store' });
  }

  #repo(): Repository<UserRow> {
    return this.#dataSource.getRepository<UserRow>(USER_ENTITY);
  }


  /** The user named `username` (exact, case-sensitive match), or `undefined`. */
  findByUsername(username: string): Promise<User | undefined> {
    return this.#op(async () => {
      const row = await this.#repo().findOne({ where: { username } });
      return row ? toUser(row) : undefined;
    });
  }

  /** Every user, ordered by username bytewise (the same order on SQLite and PostgreSQL). */
  list(): Promise<User[]> {
    return this.#op(async () => {
      const rows = await this.#repo().find({ order: { username: 'ASC' } });
      return rows.map(toUser);
    });
  }

  /** How many users exist; with `{ admins: true }` only administrators. */
  count(filter: { admins?: boolean } = {}): Promise<number> {
    return this.#op(() => this.#repo().count(filter.admins ? { where: { isAdmin: true } } : {}));
  }

  /** Creates a user. Throws `UsernameTakenError` when the name exists (decided by the unique constraint, so races are safe). */
  create(input: { username: string; passwordHash: string; isAdmin: boolean }): Promise<User> {
    return this.#op(async () => {
      const now = new Date();
      const row: Omit<UserRow, 'id'> = { ...input, createdAt: now, updatedAt: now };
      try {
        await this.#repo().insert(row);
      } catch (err) {
        if (isUniqueViolation(err)) throw new UsernameTakenError(input.username);
        throw err;
      }
      return toUser({ id: 0, ...row });
    });
  }

  /** Replaces the password hash and bumps `updatedAt`. Throws `UserNotFoundError` when there is no such user. */
  updatePasswordHash(username: string, passwordHash: string): Promise<User> {
    return this.#op(async () => {
      const repo = this.#repo();
      const result = await repo.update({ username }, { passwordHash, updatedAt: new Date() });
      if (!result.affected) throw new UserNotFoundError(username);
      const row = await repo.findOne({ where: { username } });
      if (!row) throw new UserNotFoundError(username);
      return toUser(row);
    });
  }

  /**
   * Deletes a user. Throws `UserNotFoundError` when there is none and `LastAdminError` when it is the
   * last administrator; the check and the delete share one transaction, so two concurrent deletes of the
   * last two administrators cannot both succeed.
   */
  delete(username: string): Promise<void> {
    return this.#op(() =>
      this.#dataSource.transaction(async (manager) => {
        const repo = manager.getRepository<UserRow>(USER_ENTITY);
        if (this.#kind === 'postgres') {
          // Row locks on every administrator make concurrent admin deletions take turns; each then
          // counts what the previous one left.
          await repo.createQueryBuilder('u').select('u.id').where('u.isAdmin = :admin', { admin: true }).setLock('pessimistic_write').getMany();
        }
        // On SQLite the first statement is a write, so the transaction holds the write lock from the
        // start and no other process can change the administrators until it ends.
        const plain = await repo.delete({ username, isAdmin: false });
        if (plain.affected) return;
        const admin = await repo.delete({ username, isAdmin: true });
        if (!admin.affected) throw new UserNotFoundError(username);
        const remaining = await repo.count({ where: { isAdmin: true } });
        if (remaining === 0) throw new LastAdminError(username);
      }),
    );
  }

  /** True when the database answers `SELECT 1`; never throws. */
  async ping(): Promise<boolean> {
    try {
      await this.#op(() => this.#dataSource.query('SELECT 1'));
      return true;
    } catch {
      return false;
    }
  }
}

/** An open user database: the store, its DataSource (for tests and migrations) and how to close it. */
export interface OpenedUserStore {
  store: TypeormUserStore;
  /** The managed API keys, in the same database. */
  apiKeys: TypeormApiKeyStore;
  /** The history store (candles and corporate actions), in the same database. */
  candles: TypeormCandleStore;
  /** History backfill jobs, in the same database. */
  historyJobs: TypeormHistoryJobStore;
  /** Daily API usage per caller, in the same database. */
  usage: TypeormUsageStore;
  /** What the data-quality checks repaired, dropped or suspect, in the same database. */
  dataIssues: TypeormDataIssueStore;
  /** Reference rates for currency conversion, in the same database. */
  fxRates: TypeormFxRateStore;
  dataSource: DataSource;
  /** Where the users live, fit for logs: the URL with its password replaced by `***`. */
  description: string;
  /** True when migrations exist that have not run (the table may be missing or outdated). */
  hasPendingMigrations(): Promise<boolean>;
  /** Closes the connection (pool); safe to call twice. */
  close(): Promise<void>;
}

/** The users and the managed API keys over the configured database, what the CLI's account commands need. */
export type AccountStores = Pick<OpenedUserStore, 'store' | 'apiKeys' | 'dataSource' | 'description' | 'hasPendingMigrations' | 'close'>;

/**
 * Connects to DATABASE_URL and, with `runMigrations`, brings the schema up to date (idempotent).
 * Throws `AppError` `DATABASE_UNAVAILABLE` with one line naming the URL (password hidden) when the
 * database cannot be reached or opened, `DATABASE_MIGRATION_FAILED` when a migration fails, and
 * `DATABASE_URL_INVALID` for a URL that is neither `sqlite:` nor `postgres://`. Only the account
 * stores are built (and their modules loaded): `openUserStore` adds the others.
 */
export async function openAccountStores(databaseUrl: string, options: { runMigrations: boolean } & DataSourceOptions, onClose?: () => Promise<void>): Promise<AccountStores> {
  const target = parseDatabaseUrl(databaseUrl);
  const description = target.kind === 'sqlite' ? `sqlite:${target.path}` : redactDatabaseUrl(databaseUrl);
  const dataSource = createDataSource(databaseUrl, options.schema ? { schema: options.schema } : {});
  try {
    await dataSource.initialize();
  } catch (err) {
    throw new DatabaseUnavailableError(`Cannot open the database at ${description}: ${reasonOf(err)}`, { cause: err });
  }
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await onClose?.();
    if (dataSource.isInitialized) await dataSource.destroy();
  };
  if (options.runMigrations) {
    try {
      await dataSource.runMigrations({ transaction: 'each' });
    } catch (err) {
      await close();
      throw new AppError('DATABASE_MIGRATION_FAILED', `Migrating the database at ${description} failed: ${reasonOf(err)}`, { cause: err });
    }
  }
  return {
    store: new TypeormUserStore(dataSource),
    apiKeys: new TypeormApiKeyStore(dataSource),
    dataSource,
    description,
    hasPendingMigrations: () => dataSource.showMigrations(),
    close,
  };
}

/** `openAccountStores` and every other store of the database (history, jobs, usage, data issues, rates). */
export async function openUserStore(databaseUrl: string, options: { runMigrations: boolean; readerNiceIncrement?: number } & DataSourceOptions): Promise<OpenedUserStore> {
  // Loaded here, not at the top: the CLI's account commands never load the history store's modules.
  const [{ TypeormCandleStore }, { TypeormHistoryJobStore }, { TypeormUsageStore }, { TypeormDataIssueStore }, { TypeormFxRateStore }] = await Promise.all([
    import('./typeorm-candle-store.js'),
    import('./typeorm-history-job-store.js'),
    import('./typeorm-usage-store.js'),
    import('./typeorm-data-issue-store.js'),
    import('./typeorm-fx-rate-store.js'),
  ]);
  let candles: TypeormCandleStore | undefined;
  const accounts = await openAccountStores(databaseUrl, options, async () => candles?.close());
  const { dataSource } = accounts;
  candles = new TypeormCandleStore(dataSource, { readerNiceIncrement: options.readerNiceIncrement ?? 0 });
  return {
    ...accounts,
    candles,
    historyJobs: new TypeormHistoryJobStore(dataSource),
    usage: new TypeormUsageStore(dataSource),
    dataIssues: new TypeormDataIssueStore(dataSource),
    fxRates: new TypeormFxRateStore(dataSource),
  };
}
