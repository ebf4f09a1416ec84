import { describe, expect, it } from 'vitest';
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
