/**
 * Structured logging. Every line is JSON (pino); request lines carry `reqId`. Credentials and
 * password fields are redacted wherever they appear.
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
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination ?? pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_INTERVAL_MS }),
  );
}
