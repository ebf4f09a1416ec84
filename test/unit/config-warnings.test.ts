import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mds-config-warnings-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('configuration warnings', () => {
  it('when the env file sets a mistyped and an unknown variable, then each is named, the typo with the closest known name', () => {
    writeFileSync(join(dir, '.env'), 'MARKET_DATA_PROVDER=yahoo\nFAVOURITE_COLOUR=blue\nPORT=8001\n');

    const config = loadConfig({}, { cwd: dir });

    expect(config.warnings).toEqual([
      '.env sets MARKET_DATA_PROVDER, which mds does not read (did you mean MARKET_DATA_PROVIDER?): it is ignored',
      '.env sets FAVOURITE_COLOUR, which mds does not read: it is ignored',
    ]);
    expect(config.server.port).toBe(8001);
  });

  it('when the environment holds a near miss of a known name, then it is named; the rest of the environment is not', () => {
    const config = loadConfig({ CACHE_TTL_SECOND: '30', HOSTNAME: 'box', PATH: '/usr/bin', LANGUAGE: 'en' }, { readFile: false });

    expect(config.warnings).toEqual(['the environment sets CACHE_TTL_SECOND, which mds does not read (did you mean CACHE_TTL_SECONDS?): it is ignored']);
  });

  it('when every variable is known, then there is no warning', () => {
    expect(loadConfig({ PORT: '8001', ENV_FILE: '' }, { readFile: false }).warnings).toEqual([]);
  });
});
