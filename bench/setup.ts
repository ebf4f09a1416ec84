/**
 * What every bench program starts `mds serve` with: one environment and one `mds init`, so the
 * profile and the bench measure the same service.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { MDS_BIN } from '../test/helpers/serve-process.js';

export const API_KEY = 'bench-api-key-0123456789';
export const ADMIN = { username: 'admin', password: 'bench-admin-password' };

/**
 * A production-mode environment over `dir` (SQLite file, HOME) and `redisUrl`. Quotas are off (one
 * address at these rates would be refused; the scenarios that measure them turn them on) and so are
 * metrics (every server would otherwise want port 9464; one scenario turns them on).
 */
export function benchEnv(dir: string, redisUrl: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: dir,
    NODE_ENV: 'production',
    SECRET_KEY: 'bench-secret-key-0123456789abcdef0123456789',
    DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
    CACHE_URL: redisUrl,
    API_KEYS: API_KEY,
    DEFAULT_ADMIN_USERNAME: ADMIN.username,
    DEFAULT_ADMIN_PASSWORD: ADMIN.password,
    LOG_LEVEL: 'info',
    CACHE_TTL_SECONDS: '600',
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
    RATE_LIMIT_AUTHENTICATED_PER_MINUTE: '0',
    METRICS_PORT: '0',
  };
}

/** Runs `mds init` in `env`; throws with its stderr when it fails. */
export function initService(env: NodeJS.ProcessEnv): void {
  const init = spawnSync(process.execPath, [MDS_BIN, 'init'], { env, encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`mds init failed: ${init.stderr}`);
}
