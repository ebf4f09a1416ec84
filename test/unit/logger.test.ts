import { closeSync, openSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createLogger, logFormatFor } from '../../src/infra/logger.js';
import { captureLogs } from '../helpers/log-capture.js';

describe('logged errors', () => {
  it('when an error with a code and a cause is logged, then the line has their types, messages and code, and no stack', () => {
    const { logger, lines } = captureLogs('info');
    const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    class StoreError extends Error {}
    logger.error({ err: new StoreError('user store query failed', { cause }) }, 'failed');
    logger.warn({ err: 'already a message' }, 'as given');

    expect(lines[0]?.err).toEqual({
      type: 'StoreError',
      message: 'user store query failed',
      cause: { type: 'Error', message: 'connect ECONNREFUSED 127.0.0.1:5432', code: 'ECONNREFUSED' },
    });
    expect(lines[1]?.err).toBe('already a message');
    expect(JSON.stringify(lines)).not.toMatch(/\n\s+at |logger\.test\.ts/);
  });

  it('when causes nest deeper than five, then the line stops at five and is still written', () => {
    const { logger, lines } = captureLogs('info');
    let err = new Error('level 0');
    for (let i = 1; i <= 8; i++) err = new Error(`level ${i}`, { cause: err });
    logger.error({ err }, 'deep');

    let depth = 0;
    for (let at = lines[0]?.err as { cause?: unknown } | undefined; at?.cause !== undefined; at = at.cause as { cause?: unknown }) depth += 1;
    expect(depth).toBe(5);
  });
});

describe('log format', () => {
  const written = (format: 'json' | 'pretty') => {
    const out: string[] = [];
    const logger = createLogger({ level: 'info', name: 'test', format, colorize: false }, { write: (line: string) => void out.push(line) });
    logger.info({ user: { password: 'hunter2-secret' }, access_token: 'eyJ.token.value', symbol: 'AAPL' }, 'quote served');
    return out.join('');
  };

  it('when the format is pretty, then the line is human-readable text, still redacted', () => {
    const text = written('pretty');
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(test\): quote served /);
    expect(text).toContain('"symbol":"AAPL"');
    expect(text).not.toMatch(/^\{/);
    expect(text).not.toContain('hunter2-secret');
    expect(text).not.toContain('eyJ.token.value');
    expect(text).toContain('[redacted]');
  });

  it('when the format is json (or not given), then the line is one JSON object', () => {
    const line = JSON.parse(written('json')) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 30, msg: 'quote served', symbol: 'AAPL', access_token: '[redacted]' });
  });

  it('when no format is configured, then a terminal gets pretty and anything else JSON; a configured one wins', () => {
    const notATerminal = openSync('/dev/null', 'w');
    try {
      expect(logFormatFor('auto', notATerminal)).toBe('json');
      expect(logFormatFor('pretty', notATerminal)).toBe('pretty');
      expect(logFormatFor('json', notATerminal)).toBe('json');
    } finally {
      closeSync(notATerminal);
    }
  });
});

describe('LOG_FORMAT', () => {
  it('when LOG_FORMAT is unset, pretty or json, then the config says auto, pretty or json; anything else stops startup naming it', () => {
    expect(loadConfig({}, { readFile: false }).log.format).toBe('auto');
    expect(loadConfig({ LOG_FORMAT: 'pretty' }, { readFile: false }).log.format).toBe('pretty');
    expect(loadConfig({ LOG_FORMAT: 'json' }, { readFile: false }).log.format).toBe('json');
    expect(() => loadConfig({ LOG_FORMAT: 'fancy' }, { readFile: false })).toThrow(/LOG_FORMAT/);
  });
});
