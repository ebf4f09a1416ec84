import { join } from 'node:path';
import { inject } from 'vitest';

/**
 * The environment of an `mds` process (a command, `mds serve`, `mds mcp`) a test starts in `dir`: its
 * own HOME and SQLite file, the run's redis-server, fast bcrypt, the default administrator, no refresh
 * timer and no metrics listener (files run in parallel: a fixed metrics port would be taken by whichever
 * started first). `extra` adds to it or overrides it.
 */
export function cliEnv(dir: string, secretKey: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: dir,
    DATABASE_URL: `sqlite:${join(dir, 'data', 'mds.sqlite')}`,
    CACHE_URL: `redis://127.0.0.1:${inject('redisPort')}/0`,
    BCRYPT_ROUNDS: '4',
    DEFAULT_ADMIN_USERNAME: 'admin',
    DEFAULT_ADMIN_PASSWORD: 'admin-password-1',
    SECRET_KEY: secretKey,
    REFRESH_INTERVAL_SECONDS: '0',
    METRICS_PORT: '0',
    ...extra,
  };
}
