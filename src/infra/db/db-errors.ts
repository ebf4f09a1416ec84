/** Reading driver errors the same way on SQLite and PostgreSQL, for the stores' translations. */
import { QueryFailedError } from 'typeorm';

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
