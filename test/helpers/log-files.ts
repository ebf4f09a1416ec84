/**
 * Every log line the suite's services write is also appended to a file of this run, and every secret a
 * test hands them is noted beside it, so the last test group can scan the whole run's logs for leaks
 * (test/final/log-scan.test.ts). The run's directory comes from vitest.config.ts (MDS_TEST_LOG_DIR);
 * without it nothing is written.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

/** Secrets shorter than this are not noted: they would match innocent text. */
const MIN_SECRET_LENGTH = 8;
/** Log files end in `.log`; the noted secrets live in `.secrets` files next to them. */
export const LOG_SUFFIX = '.log';
export const SECRETS_SUFFIX = '.secrets';

/** The directory of this run's log files, or `undefined` when the run does not collect them. */
export function runLogDir(): string | undefined {
  const dir = process.env.MDS_TEST_LOG_DIR;
  if (!dir) return undefined;
  mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * A sink for one stream of one log source (`service`, `serve-stdout`, `cli-stderr`): each call appends the
 * text exactly as written (a chunk may end mid-line), synchronously, so nothing is lost when a worker
 * exits. A no-op outside a collecting run.
 */
export function logFile(source: string): (text: string) => void {
  const dir = runLogDir();
  if (!dir) return () => undefined;
  const file = join(dir, `${source}-${process.pid}-${randomBytes(4).toString('hex')}${LOG_SUFFIX}`);
  return (text) => appendFileSync(file, text);
}

/** Notes secrets a test used (passwords, keys, tokens, signing secrets) for the scan to look for. */
export function noteSecrets(...secrets: Array<string | undefined>): void {
  const dir = runLogDir();
  if (!dir) return;
  const worthy = secrets.filter((s): s is string => typeof s === 'string' && s.length >= MIN_SECRET_LENGTH && !s.includes('\n'));
  if (worthy.length > 0) appendFileSync(join(dir, `noted-${process.pid}${SECRETS_SUFFIX}`), `${worthy.join('\n')}\n`);
}
