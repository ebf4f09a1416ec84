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

/**
 * A logger writing JSON lines to `destination`; by default stdout, written asynchronously (a write
 * in flight batches the lines behind it) so request logging never waits on the terminal or a pipe.
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
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
