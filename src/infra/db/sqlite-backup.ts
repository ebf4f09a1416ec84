/**
 * `mds db backup`: a consistent copy of a SQLite database while the service keeps writing to it, by
 * SQLite's online backup API (through better-sqlite3).
 */
import { existsSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { AppError } from '../../domain/errors.js';

// Every page in one step: the backup reads one snapshot (WAL lets the service write meanwhile). In
// small steps, each write by the service between two steps would restart the backup from the start.
const ALL_PAGES = 0x7fffffff;

/** The backup cannot start: the file exists (and `force` was not given), or its directory does not. */
export class BackupRefusedError extends AppError {
  constructor(message: string) {
    super('DATABASE_BACKUP_REFUSED', message);
  }
}

/**
 * Copies the SQLite database at `databasePath` into `file` and resolves to its size in bytes. The copy
 * is written beside `file` under another name and renamed into place when whole, so `file` is never
 * half written. Throws `BackupRefusedError` when `file` exists without `force`, when it is the database
 * itself, or when its directory is missing; `AppError` `DATABASE_UNAVAILABLE` when there is no database.
 */
export async function backupSqlite(databasePath: string, file: string, options: { force?: boolean } = {}): Promise<{ bytes: number }> {
  const destination = resolve(file);
  if (destination === resolve(databasePath)) throw new BackupRefusedError(`${file} is the database itself: name another file`);
  if (existsSync(destination) && !options.force) throw new BackupRefusedError(`${file} exists: pass --force to replace it`);
  if (!existsSync(dirname(destination))) throw new BackupRefusedError(`The directory of ${file} does not exist`);
  if (!existsSync(databasePath)) throw new AppError('DATABASE_UNAVAILABLE', `No database at ${databasePath}`);
  let db: Database.Database;
  try {
    db = new Database(databasePath, { fileMustExist: true, readonly: true });
  } catch (err) {
    throw new AppError('DATABASE_UNAVAILABLE', `Cannot open the database at ${databasePath}: ${(err as Error).message}`, { cause: err });
  }
  const partial = join(dirname(destination), `.${basename(destination)}.${process.pid}.partial`);
  try {
    await db.backup(partial, { progress: () => ALL_PAGES });
    renameSync(partial, destination);
    return { bytes: statSync(destination).size };
  } catch (err) {
    rmSync(partial, { force: true });
    throw new AppError('DATABASE_BACKUP_FAILED', `Backing up ${databasePath} failed: ${(err as Error).message}`, { cause: err });
  } finally {
    db.close();
  }
}
