import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

const noFile = { readFile: false } as const;

describe('config', () => {
  it('when nothing is set, then every variable takes its documented default', () => {
    const c = loadConfig({}, noFile);
    expect(c.server).toMatchObject({ host: '127.0.0.1', port: 8000, bodyLimitBytes: 16384 });
    expect(c.cache.redis).toMatchObject({ host: '127.0.0.1', port: 6379, db: 0, password: '' });
    expect(c.cache.ttlMs).toBe(60_000);
    expect(c.auth.tokenTtlMs).toBe(10080 * 60_000);
    expect(c.auth.apiKeys).toEqual([]);
    expect(c.auth.defaultAdmin.username).toBe('admin');
    expect(c.auth.bcryptRounds).toBe(12);
    expect(c.database.url).toBe('sqlite:./data/mds.sqlite');
    expect(c.market.provider).toBe('simulated');
    expect(c.market.refreshIntervalMs).toBe(30_000);
    expect(c.auth.secretKey).toBeUndefined();
    expect(c.metrics).toEqual({ enabled: true, host: '127.0.0.1', port: 9464 });
  });

  it('when METRICS_PORT is 0, then metrics are off', () => {
    expect(loadConfig({ METRICS_PORT: '0' }, noFile).metrics.enabled).toBe(false);
  });

  it('when METRICS_PORT equals PORT, then loading fails naming both', () => {
    expect(() => loadConfig({ PORT: '9000', METRICS_PORT: '9000' }, noFile)).toThrow(/METRICS_PORT=9000 must differ from PORT/);
  });

  it('when CACHE_PORT is not a number, then loading fails with one message naming it', () => {
    expect(() => loadConfig({ CACHE_PORT: 'abc' }, noFile)).toThrow(ConfigError);
    expect(() => loadConfig({ CACHE_PORT: 'abc' }, noFile)).toThrow(/CACHE_PORT="abc"/);
  });

  it('when several values are bad, then the one message names every variable', () => {
    let message = '';
    try {
      loadConfig({ CACHE_PORT: '70000', ACCESS_TOKEN_EXPIRE_MINUTES: '-1', MARKET_DATA_PROVIDER: 'bloomberg' }, noFile);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/CACHE_PORT/);
    expect(message).toMatch(/ACCESS_TOKEN_EXPIRE_MINUTES/);
    expect(message).toMatch(/MARKET_DATA_PROVIDER/);
  });

  it('when API_KEYS has blank entries, then they are ignored', () => {
    expect(loadConfig({ API_KEYS: ' k1, ,k2,, ' }, noFile).auth.apiKeys).toEqual(['k1', 'k2']);
  });

  it('when CACHE_URL is set, then it overrides the CACHE_* parts', () => {
    const c = loadConfig({ CACHE_URL: 'redis://:s%40cret@10.0.0.5:6380/3', CACHE_PORT: '1234' }, noFile);
    expect(c.cache.redis).toMatchObject({ host: '10.0.0.5', port: 6380, db: 3, password: 's@cret' });
  });

  it('when NODE_ENV=production and SECRET_KEY is unset, then loading refuses', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' }, noFile)).toThrow(/SECRET_KEY/);
    expect(loadConfig({ NODE_ENV: 'production', SECRET_KEY: 'x'.repeat(40) }, noFile).auth.secretKey).toHaveLength(40);
  });

  it('when an env file exists, then it is read and real environment variables win over it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mds-config-'));
    writeFileSync(join(dir, 'custom.env'), 'PORT=9100\nCACHE_DB=4\n');
    const c = loadConfig({ ENV_FILE: 'custom.env', CACHE_DB: '2' }, { cwd: dir });
    expect(c.server.port).toBe(9100);
    expect(c.cache.redis.db).toBe(2);
  });

  it('when ENV_FILE names a missing file, then loading fails naming ENV_FILE', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mds-config-'));
    expect(() => loadConfig({ ENV_FILE: 'nope.env' }, { cwd: dir })).toThrow(/ENV_FILE/);
  });

  it('then the returned object is frozen', () => {
    const c = loadConfig({}, noFile);
    expect(Object.isFrozen(c.cache.redis)).toBe(true);
  });
});
