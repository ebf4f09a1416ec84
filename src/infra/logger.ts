/**
 * Structured logging. Every line is JSON (pino); request lines carry `reqId`. Credentials and
 * password fields are redacted wherever they appear, and an error is logged as its type, message and
 * code (and its causes'), never its stack: a line tells what failed, not the service's source layout.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'password',
  'old_password',
  'new_password',
  'passwordHash',
  '*.password',
  '*.passwordHash',
  'access_token',
  '*.access_token',
];

/** Lines are written once this many bytes are pending, or after `LOG_FLUSH_INTERVAL_MS`. */
const LOG_BATCH_BYTES = 4096;
const LOG_FLUSH_INTERVAL_MS = 100;

/** How many causes deep an error field goes. */
const MAX_CAUSES = 5;

/** An error as a log field: type, message, code and causes, without the stack. Anything else as it is. */
export function errorField(err: unknown, depth = 0): unknown {
  if (!(err instanceof Error)) return err;
  const field: { type: string; message: string; code?: unknown; cause?: unknown } = { type: err.constructor.name || err.name, message: err.message };
  const code = (err as { code?: unknown }).code;
  if (code !== undefined) field.code = code;
  if (err.cause !== undefined && depth < MAX_CAUSES) field.cause = errorField(err.cause, depth + 1);
  return field;
}

/**
 * A logger writing JSON lines to `destination`; by default stdout, written asynchronously so request
 * logging never waits on the terminal or a pipe. Under load one write system call per line was a
 * tenth of a request's cost, so lines are batched: written once 4 KB are pending, else within 100 ms.
 * Pending lines are flushed when the process exits.
 */
export function createLogger(options: { level: LevelWithSilent; name?: string }, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      name: options.name ?? 'mds',
      level: options.level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: { err: errorField },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_INTERVAL_MS }),
  );
}
