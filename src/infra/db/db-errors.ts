/** Reading driver errors the same way on SQLite and PostgreSQL, for the stores' translations. */
import { QueryFailedError } from './typeorm.js';
import { AppError, DatabaseUnavailableError } from '../../domain/errors.js';

const PG_UNIQUE_VIOLATION = '23505';
const PG_UNDEFINED_TABLE = '42P01';

function driverCode(err: QueryFailedError): string | undefined {
  const code = (err.driverError as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** A unique constraint refused the write. */
export function isUniqueViolation(err: unknown): boolean {
  if (!(err instanceof QueryFailedError)) return false;
  const code = driverCode(err);
  return code === PG_UNIQUE_VIOLATION || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/** The table does not exist (migrations have not run); from TypeORM, or from better-sqlite3 or pg used directly (the candle store). */
export function isMissingTable(err: unknown): boolean {
  if (err instanceof QueryFailedError) return driverCode(err) === PG_UNDEFINED_TABLE || /no such table/i.test(err.message);
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  return code === PG_UNDEFINED_TABLE || (code === 'SQLITE_ERROR' && /^no such table/i.test(err.message));
}

/** The first useful line of a failure; pg reports some connection failures as an AggregateError without a message. */
export function reasonOf(err: unknown): string {
  if (err instanceof AggregateError && !err.message) return reasonOf(err.errors[0]);
  if (err instanceof Error) {
    const line = err.message.split('\n')[0]?.trim();
    if (line) return line;
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    return err.name;
  }
  return String(err);
}

/** Socket-level failures of reaching PostgreSQL (Node's codes). */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);
/**
 * PostgreSQL states that say the server, not the statement, is the problem: class 08 (connection
 * exception), shutting down or starting up (57P01-57P03), too many connections (53300).
 */
const PG_UNAVAILABLE = /^(08...|57P0[123]|53300)$/;
/** pg's own words for a connection that died or never came (it sets no code on them). */
const PG_UNAVAILABLE_MESSAGE = /connection terminated|timeout expired|connection timeout|connection error|not queryable|connection is closed|cannot use a pool after calling end/i;
/** The SQLite file cannot be used: missing, unreadable, locked past the timeout, full, read-only or damaged. */
const SQLITE_UNAVAILABLE = /^SQLITE_(CANTOPEN|IOERR|BUSY|LOCKED|READONLY|FULL|CORRUPT|NOTADB|PERM)/;

/**
 * Whether `err` says the database could not be reached or used, rather than that a statement was
 * wrong: the same call may succeed once the database is back. Looks through TypeORM's wrapper, an
 * error's `cause` and pg's AggregateError (one error per address tried).
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (depth > 4 || typeof err !== 'object' || err === null) return false;
  if (err instanceof DatabaseUnavailableError) return true;
  if (err instanceof AggregateError && err.errors.some((e) => isDatabaseUnavailable(e, depth + 1))) return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && (NETWORK_CODES.has(code) || PG_UNAVAILABLE.test(code) || SQLITE_UNAVAILABLE.test(code))) return true;
  if (err instanceof Error && code === undefined && PG_UNAVAILABLE_MESSAGE.test(err.message)) return true;
  const driverError = err instanceof QueryFailedError ? (err.driverError as unknown) : undefined;
  if (driverError !== undefined && driverError !== err && isDatabaseUnavailable(driverError, depth + 1)) return true;
  return isDatabaseUnavailable((err as { cause?: unknown }).cause, depth + 1);
}

/**
 * A store's failure as the error its port promises: `DatabaseUnavailableError` (503, retry later)
 * when the database could not be reached or used, else an `AppError` with `code` naming the store and
 * the first line of the reason (never the SQL or its parameters).
 */
export function storeFailure(err: unknown, store: string, code = 'DATABASE_ERROR'): AppError {
  if (err instanceof AppError) return err;
  if (isDatabaseUnavailable(err)) return new DatabaseUnavailableError(undefined, { cause: err });
  return new AppError(code, `${store}: ${reasonOf(err)}`, { cause: err });
}
