import { mkdtempSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/domain/errors.js';

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

  it('when no STREAM_* variable is set, then the live-quote limits take their documented defaults; when bad, loading names them', () => {
    expect(loadConfig({}, noFile).stream).toEqual({
      maxClients: 1000,
      maxPerAddress: 5,
      maxPerCaller: 100,
      maxBufferedBytes: 262_144,
      heartbeatMs: 15_000,
      refreshIntervalMs: 5000,
      reconnectMarginMs: 5000,
    });
    expect(loadConfig({ STREAM_MAX_PER_ADDRESS: '0', STREAM_REFRESH_SECONDS: '0' }, noFile).stream).toMatchObject({ maxPerAddress: 0, refreshIntervalMs: 0 });
    // Per caller: a tenth of the instance by default (rounded up), or as set; 0 turns it off.
    expect(loadConfig({}, noFile).stream).toMatchObject({ maxClients: 1000, maxPerCaller: 100 });
    expect(loadConfig({ STREAM_MAX_CLIENTS: '15' }, noFile).stream).toMatchObject({ maxPerCaller: 2 });
    expect(loadConfig({ STREAM_MAX_CLIENTS: '15', STREAM_MAX_PER_CALLER: '7' }, noFile).stream).toMatchObject({ maxPerCaller: 7 });
    expect(loadConfig({ STREAM_MAX_PER_CALLER: '0' }, noFile).stream).toMatchObject({ maxPerCaller: 0 });
    expect(() => loadConfig({ STREAM_MAX_PER_CALLER: '-1' }, noFile)).toThrow(/STREAM_MAX_PER_CALLER="-1"/);
    expect(() => loadConfig({ STREAM_MAX_PER_CALLER: 'ten' }, noFile)).toThrow(/STREAM_MAX_PER_CALLER="ten"/);
    expect(() => loadConfig({ STREAM_MAX_CLIENTS: '0', STREAM_HEARTBEAT_SECONDS: 'x' }, noFile)).toThrow(/STREAM_MAX_CLIENTS="0".*STREAM_HEARTBEAT_SECONDS="x"/);
    // A bound below one stream's first events (up to 50 quotes, written at once) would drop readers that keep up.
    expect(() => loadConfig({ STREAM_MAX_BUFFER_BYTES: '4096' }, noFile)).toThrow(/STREAM_MAX_BUFFER_BYTES="4096"/);
    expect(loadConfig({ STREAM_MAX_BUFFER_BYTES: '65536' }, noFile).stream).toMatchObject({ maxBufferedBytes: 65536 });
  });

  it('when no WORKER_POOL_* variable is set, then the compute pool has a thread per core, 4 waiting tasks per thread and nice 19; when bad, loading names them', () => {
    const cores = availableParallelism();
    expect(loadConfig({}, noFile).workerPool).toEqual({ threads: cores, maxQueue: 4 * cores, niceIncrement: 19 });
    expect(loadConfig({ WORKER_POOL_THREADS: '3' }, noFile).workerPool).toEqual({ threads: 3, maxQueue: 12, niceIncrement: 19 });
    expect(loadConfig({ WORKER_POOL_THREADS: '3', WORKER_POOL_QUEUE: '0', WORKER_POOL_NICE: '0' }, noFile).workerPool).toEqual({ threads: 3, maxQueue: 0, niceIncrement: 0 });
    expect(() => loadConfig({ WORKER_POOL_THREADS: '0', WORKER_POOL_QUEUE: '-1', WORKER_POOL_NICE: '20' }, noFile)).toThrow(/WORKER_POOL_THREADS="0".*WORKER_POOL_QUEUE="-1".*WORKER_POOL_NICE="20"/);
  });

  it('when no HISTORY_KEEP_* variable is set, then 1m bars are kept 2 years, 5m 10 years and the rest forever; a keep is days, weeks, years or forever, and a bad one is named', () => {
    const DAY_MS = 86_400_000;
    expect(loadConfig({}, noFile).retention).toEqual({ '1m': 730 * DAY_MS, '5m': 3650 * DAY_MS, '15m': null, '30m': null, '1h': null, '1d': null, '1wk': null, '1mo': null });
    const set = loadConfig({ HISTORY_KEEP_1M: '90d', HISTORY_KEEP_1H: '12w', HISTORY_KEEP_1D: '30y', HISTORY_KEEP_5M: 'Forever', HISTORY_KEEP_1MO: '1d' }, noFile).retention;
    expect(set).toMatchObject({ '1m': 90 * DAY_MS, '1h': 84 * DAY_MS, '1d': 30 * 365 * DAY_MS, '5m': null, '1mo': DAY_MS });
    let message = '';
    try {
      loadConfig({ HISTORY_KEEP_1M: '2 years', HISTORY_KEEP_15M: '0d', HISTORY_KEEP_1WK: '-3d' }, noFile);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/HISTORY_KEEP_1M="2 years": must be a whole number of days, weeks or years \(90d, 12w, 2y\) or forever/);
    expect(message).toMatch(/HISTORY_KEEP_15M="0d"/);
    expect(message).toMatch(/HISTORY_KEEP_1WK="-3d"/);
    // A misspelt interval is not silently ignored: the nearest variable is named.
    expect(loadConfig({ HISTORY_KEEP_1MIN: '90d' }, noFile).warnings.join(' ')).toMatch(/HISTORY_KEEP_1MIN.*did you mean HISTORY_KEEP_1M/);
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

  it('when nothing names a Redis topology, then it is a single server', () => {
    const c = loadConfig({}, noFile);
    expect(c.cache.topology).toBe('single');
    expect(c.cache.sentinel).toEqual({ sentinels: [], name: 'mymaster', password: '' });
    expect(c.cache.clusterNodes).toEqual([]);
  });

  it('when CACHE_SENTINELS is set, then the topology is sentinel with its hosts, name and password', () => {
    const c = loadConfig(
      { CACHE_SENTINELS: '10.0.0.1:26379, sentinel-b:26380,[::1]:26381', CACHE_SENTINEL_NAME: 'quotes', CACHE_SENTINEL_PASSWORD: 's3', CACHE_PASSWORD: 'p', CACHE_DB: '2' },
      noFile,
    );
    expect(c.cache.topology).toBe('sentinel');
    expect(c.cache.sentinel).toEqual({
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: 'sentinel-b', port: 26380 },
        { host: '::1', port: 26381 },
      ],
      name: 'quotes',
      password: 's3',
    });
    // The master's own password and database come from the shared variables.
    expect(c.cache.redis).toMatchObject({ password: 'p', db: 2 });
  });

  it('when CACHE_CLUSTER_NODES is set, then the topology is cluster with its seed nodes', () => {
    const c = loadConfig({ CACHE_CLUSTER_NODES: 'node-a:7000,node-b:7001' }, noFile);
    expect(c.cache.topology).toBe('cluster');
    expect(c.cache.clusterNodes).toEqual([
      { host: 'node-a', port: 7000 },
      { host: 'node-b', port: 7001 },
    ]);
  });

  it.each([
    [{ CACHE_URL: 'redis://r:6379', CACHE_SENTINELS: 's:26379' }, /CACHE_URL and CACHE_SENTINELS/],
    [{ CACHE_HOST: 'redis.internal', CACHE_CLUSTER_NODES: 'n:7000' }, /CACHE_HOST and CACHE_CLUSTER_NODES/],
    [{ CACHE_PORT: '6380', CACHE_SENTINELS: 's:26379' }, /CACHE_PORT and CACHE_SENTINELS/],
    [{ CACHE_SENTINELS: 's:26379', CACHE_CLUSTER_NODES: 'n:7000' }, /CACHE_SENTINELS and CACHE_CLUSTER_NODES/],
  ])('when two Redis topologies are set (%o), then startup refuses naming both', (env, message) => {
    expect(() => loadConfig(env, noFile)).toThrow(ConfigError);
    expect(() => loadConfig(env, noFile)).toThrow(message);
    expect(() => loadConfig(env, noFile)).toThrow(/only one Redis topology/);
  });

  it('when CACHE_HOST and CACHE_PORT hold their defaults (as .env.example writes them) beside CACHE_SENTINELS, then they do not count as a second topology', () => {
    expect(loadConfig({ CACHE_SENTINELS: 's:26379', CACHE_HOST: '' }, noFile).cache.topology).toBe('sentinel');
    expect(loadConfig({ CACHE_CLUSTER_NODES: 'n:7000', CACHE_HOST: '127.0.0.1', CACHE_PORT: '6379' }, noFile).cache.topology).toBe('cluster');
  });

  it.each(['s', 's:', 's:0', 's:70000', 'http://s:26379', 's:26379:1'])('when CACHE_SENTINELS or CACHE_CLUSTER_NODES holds %o, then loading fails naming the variable', (bad) => {
    expect(() => loadConfig({ CACHE_SENTINELS: bad }, noFile)).toThrow(/CACHE_SENTINELS=.*host:port/);
    expect(() => loadConfig({ CACHE_CLUSTER_NODES: bad }, noFile)).toThrow(/CACHE_CLUSTER_NODES=.*host:port/);
  });

  it('when CACHE_CLUSTER_NODES is set with a CACHE_DB other than 0, then loading refuses (a cluster has only database 0)', () => {
    expect(() => loadConfig({ CACHE_CLUSTER_NODES: 'n:7000', CACHE_DB: '3' }, noFile)).toThrow(/CACHE_DB must be 0/);
  });

  it('when LOGIN_MAX_FAILURES_PER_ADDRESS is unset, then the per-address limit is four times LOGIN_MAX_FAILURES; when set, it is its own', () => {
    expect(loadConfig({}, noFile).auth.loginMaxFailuresPerAddress).toBe(20);
    expect(loadConfig({ LOGIN_MAX_FAILURES: '3' }, noFile).auth.loginMaxFailuresPerAddress).toBe(12);
    expect(loadConfig({ LOGIN_MAX_FAILURES: '3', LOGIN_MAX_FAILURES_PER_ADDRESS: '7' }, noFile).auth.loginMaxFailuresPerAddress).toBe(7);
    expect(() => loadConfig({ LOGIN_MAX_FAILURES_PER_ADDRESS: '0' }, noFile)).toThrow(/LOGIN_MAX_FAILURES_PER_ADDRESS/);
  });

  it.each(['http://127.0.0.1:6379/0', 'redis://127.0.0.1:notaport/0', 'redis://127.0.0.1:70000', 'redis://127.0.0.1:6379/16', 'redis://127.0.0.1:6379/99', 'redis://127.0.0.1:6379/x', 'redis://'])(
    'when CACHE_URL is %o, then loading fails naming CACHE_URL and what it must be',
    (bad) => {
      expect(() => loadConfig({ CACHE_URL: bad }, noFile)).toThrow(/CACHE_URL=.*must be redis\[s\]:\/\/.*a db of 0-15/);
    },
  );

  it('when an invalid variable holds a password, then the error shows it as *** (a URL keeps everything but its password)', () => {
    const secret = 'Url-Secret-PW-66';
    let message = '';
    try {
      loadConfig({ CACHE_URL: `http://:${secret}@127.0.0.1:6379/0`, DATABASE_URL: `mysql://app:${secret}@db/app`, BCRYPT_ROUNDS: '99' }, noFile);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('CACHE_URL="http://:***@127.0.0.1:6379/0"');
    expect(message).toContain('DATABASE_URL="mysql://app:***@db/app"');
    expect(message).toContain('BCRYPT_ROUNDS="99"');
    expect(message).not.toContain(secret);
  });

  it('when CACHE_URL names database 0 to 15, then that database is used', () => {
    expect(loadConfig({ CACHE_URL: 'redis://127.0.0.1:6380/15' }, noFile).cache.redis).toMatchObject({ port: 6380, db: 15 });
    expect(loadConfig({ CACHE_URL: 'rediss://u:p@cache.example:6380' }, noFile).cache.redis).toMatchObject({ db: 0, tls: true, username: 'u', password: 'p' });
  });

  it('when NODE_ENV=production and SECRET_KEY is unset, then loading refuses', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' }, noFile)).toThrow(/SECRET_KEY/);
    expect(loadConfig({ NODE_ENV: 'production', SECRET_KEY: 'x'.repeat(40) }, noFile).auth.secretKey).toHaveLength(40);
  });

  it('when NODE_ENV=production and SECRET_KEY is under 32 bytes or the example value, then loading refuses with one line naming SECRET_KEY', () => {
    for (const weak of ['x', 'y'.repeat(31), 'é'.repeat(15), 'change-me-to-a-long-random-string']) {
      let message = '';
      try {
        loadConfig({ NODE_ENV: 'production', SECRET_KEY: weak }, noFile);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(/^Invalid configuration: SECRET_KEY must be at least 32 bytes/);
      expect(message).not.toContain('\n');
    }
    expect(loadConfig({ NODE_ENV: 'production', SECRET_KEY: 'z'.repeat(32) }, noFile).auth.secretKey).toHaveLength(32);
    // Development keeps accepting a short key (and a missing one becomes a random per-process key).
    expect(loadConfig({ NODE_ENV: 'development', SECRET_KEY: 'x' }, noFile).auth.secretKey).toBe('x');
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
