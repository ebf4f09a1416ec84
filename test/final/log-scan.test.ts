/**
 * Runs after every other group: reads every log line the run's services, `mds serve` processes and CLI
 * commands wrote (test-results/logs/<run>/) and fails on any password, token, key or signing secret a
 * test noted, and on anything shaped like a bcrypt hash, a JWT or a managed API key.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scanRunLogs, scanText } from '../helpers/log-scan.js';

const JWT = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhZG1pbiIsImFkbSI6dHJ1ZX0.c2lnbmF0dXJlLW9mLWEtdG9rZW4';
const BCRYPT = `$2b$04$${'a'.repeat(53)}`;
const KEY = `mds_${'K'.repeat(43)}`;

describe('log scan', () => {
  it('when planted lines hold a noted password, a bcrypt hash, a JWT and an mds_ key, then the scanner reports each, and passes a clean line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mds-log-scan-'));
    try {
      writeFileSync(join(dir, 'noted-1.secrets'), 'planted-password-1\n');
      writeFileSync(
        join(dir, 'service-1.log'),
        [
          JSON.stringify({ level: 30, msg: 'request completed', reqId: 'r1', url: '/api/indices' }),
          JSON.stringify({ level: 30, msg: 'login', body: { password: 'planted-password-1' } }),
          JSON.stringify({ level: 30, msg: 'user', hash: BCRYPT }),
          JSON.stringify({ level: 30, msg: 'token', authorization: `Bearer ${JWT}` }),
          JSON.stringify({ level: 30, msg: 'key', key: KEY }),
        ].join('\n'),
      );

      const result = scanRunLogs(dir);

      expect(result).toMatchObject({ files: 1, lines: 5, secrets: 1 });
      expect(result.findings.map((f) => [f.line, f.kind])).toEqual([
        [2, 'noted secret'],
        [3, 'bcrypt hash'],
        [4, 'JWT'],
        [5, 'managed API key'],
      ]);
      expect(JSON.stringify(result.findings)).not.toContain('planted-password-1');
      expect(JSON.stringify(result.findings)).not.toContain(KEY);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when a secret is split across the chunks a process wrote, then the file still holds it whole and it is found', () => {
    expect(scanText(['{"msg":"x","k":"abc', 'def-secret"}'].join(''), ['abcdef-secret'])).toHaveLength(1);
    expect(scanText('{"msg":"Invalid API key","code":401}', ['abcdef-secret'])).toEqual([]);
  });

  it('when the whole suite has run, then no log line it wrote holds a password, hash, token or key', () => {
    const dir = process.env.MDS_TEST_LOG_DIR;
    expect(dir, 'vitest.config.ts sets MDS_TEST_LOG_DIR for the run').toBeTruthy();

    const result = scanRunLogs(dir ?? '');

    // A scan of nothing proves nothing: the suite's services must have written their lines here.
    expect(result.files, 'log files of this run (run the whole suite: npm test)').toBeGreaterThan(10);
    expect(result.lines).toBeGreaterThan(500);
    expect(result.secrets).toBeGreaterThan(10);
    expect(result.findings, `credentials in the logs:\n${result.findings.map((f) => `${f.file}:${f.line} ${f.kind}: ${f.excerpt}`).join('\n')}`).toEqual([]);
  });
});
