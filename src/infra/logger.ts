/**
 * Structured logging. Every line is JSON (pino); request lines carry `reqId`. Credentials and
 * password fields are redacted wherever they appear, and an error is logged as its type, message and
 * code (and its causes'), never its stack: a line tells what failed, not the service's source layout.
 * On a terminal the same lines can be shown human-readable (pino-pretty), after redaction.
 */
import { isatty } from 'node:tty';
import { pino, type Logger, type LevelWithSilent } from 'pino';
import { createRequire } from 'node:module';
import type PinoPretty from 'pino-pretty';

export type { Logger };

/** `json`: one JSON object per line (for collectors); `pretty`: pino-pretty's coloured lines (for people). */
export type LogFormat = 'json' | 'pretty';

/**
 * The format for a log written to file descriptor `fd`: the configured one, or when none is
 * configured (`auto`) pretty on a terminal and JSON anywhere else (a pipe, a file, a collector).
 */
export function logFormatFor(setting: LogFormat | 'auto', fd: number): LogFormat {
  if (setting !== 'auto') return setting;
  return isatty(fd) ? 'pretty' : 'json';
}

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
 * Turns each JSON line into pino-pretty's text before it reaches `destination`. Synchronous, unlike
 * pino-pretty's own stream: a line logged just before `process.exit` (a fatal startup error) is not
 * lost, and the destination's own flush on exit still applies.
 */
function prettyDestination(destination: pino.DestinationStream, colorize: boolean): pino.DestinationStream {
  // Loaded only for a pretty logger: JSON logs, and the CLI's quiet commands, never need it.
  const { prettyFactory } = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
  const prettify = prettyFactory({ colorize, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
  return { write: (line: string) => destination.write(prettify(line)) };
}

/**
 * A logger writing JSON lines (or `format: 'pretty'`, human-readable ones) to `destination`; by
 * default stdout, written asynchronously so request logging never waits on the terminal or a pipe.
 * Under load one write system call per line was a tenth of a request's cost, so lines are batched:
 * written once 4 KB are pending, else within 100 ms. Pending lines are flushed when the process exits.
 * `colorize` (pretty only) defaults to whether stdout is a terminal.
 */
export function createLogger(
  options: { level: LevelWithSilent; name?: string; format?: LogFormat; colorize?: boolean },
  destination?: pino.DestinationStream,
): Logger {
  const sink = destination ?? pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_INTERVAL_MS });
  return pino(
    {
      name: options.name ?? 'mds',
      level: options.level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: { err: errorField },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.format === 'pretty' ? prettyDestination(sink, options.colorize ?? isatty(1)) : sink,
  );
}
