/**
 * The one shutdown list of the composition root: parts close last built first, each once, and one
 * that fails to close neither stops the others nor goes unreported.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/infra/logger.js';
import { ShutdownList } from '../../src/services/shutdown-list.js';

describe('ShutdownList', () => {
  it('when closed, then the parts close in the reverse order of registration, each once', async () => {
    const closed: string[] = [];
    const list = new ShutdownList(createLogger({ level: 'silent' }));
    list.add('cache', async () => {
      await Promise.resolve();
      closed.push('cache');
    });
    list.add('database', () => {
      closed.push('database');
    });
    list.add('streams', () => {
      closed.push('streams');
    });

    await list.close();
    await list.close();

    expect(closed).toEqual(['streams', 'database', 'cache']);
  });

  it('when a part fails to close, then the others still close, the failure is logged with its name and the close rejects with it', async () => {
    const closed: string[] = [];
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger({ level: 'error' }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
    const list = new ShutdownList(logger);
    const broken = new Error('socket already gone');
    list.add('database', () => {
      closed.push('database');
    });
    list.add('metrics listener', () => Promise.reject(broken));
    list.add('scheduler', () => {
      closed.push('scheduler');
    });

    await expect(list.close()).rejects.toBe(broken);
    expect(closed).toEqual(['scheduler', 'database']);
    expect(lines).toMatchObject([{ part: 'metrics listener', msg: 'closing metrics listener failed', err: { message: 'socket already gone' } }]);
  });
});
