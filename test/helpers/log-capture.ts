/** A real pino logger whose JSON lines land in an array, so tests can assert on what was logged. */
import { createLogger, type Logger } from '../../src/infra/logger.js';

export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

/** pino's numeric levels. */
export const LEVEL = { debug: 20, info: 30, warn: 40, error: 50 } as const;

export function captureLogs(level: 'debug' | 'info' | 'warn' = 'debug'): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = createLogger({ level, name: 'test' }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { logger, lines };
}
