/**
 * Starts the real service (startService) on a free loopback port with a fresh SQLite file, the shared
 * test redis-server, and response validation on: every response the suite receives is checked
 * against openapi.yaml, and `close()` fails the test file when one broke the contract. Every log line
 * also goes to this run's log files, with the secrets the service was given noted for the leak scan.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { inject } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { createLogger, type Logger } from '../../src/infra/logger.js';
import { openAccounts } from '../../src/cli/open-accounts.js';
import { startService, type RunningService, type StartOptions } from '../../src/main.js';
import { logFile, noteSecrets } from './log-files.js';

export interface TestService extends RunningService {
  config: Config;
  /** Every JSON log line the service wrote. */
  logs: Array<Record<string, unknown>>;
  /** Contract violations of responses, as reported by the validator. */
  violations: string[];
  dir: string;
  /** Fetch relative to the service URL. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** Logs in and returns the access token. */
  login(username: string, password: string): Promise<string>;
}

export const ADMIN = { username: 'admin', password: 'admin-password-1' } as const;

export function captureLogger(level: 'info' | 'debug' = 'info'): { logger: Logger; logs: Array<Record<string, unknown>> } {
  const logs: Array<Record<string, unknown>> = [];
  const toFile = logFile('service');
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      const text = chunk.toString('utf8');
      toFile(text);
      for (const line of text.split('\n')) if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ level }, sink), logs };
}

/** Default environment of a test service; `env` overrides it. */
export function testEnv(dir: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
    CACHE_URL: `redis://127.0.0.1:${inject('redisPort')}/0`,
    SECRET_KEY: 'test-secret-key-that-is-long-enough-0123456789',
    DEFAULT_ADMIN_USERNAME: ADMIN.username,
    DEFAULT_ADMIN_PASSWORD: ADMIN.password,
    BCRYPT_ROUNDS: '4',
    // Suites share one redis-server; throttling has its own tests with their own limits.
    LOGIN_MAX_FAILURES: '1000',
    // Every suite calls from 127.0.0.1 through the same Redis; quotas have their own tests with their own Redis.
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: '0',
    RATE_LIMIT_AUTHENTICATED_PER_MINUTE: '0',
    REFRESH_INTERVAL_SECONDS: '0',
    LOG_LEVEL: 'info',
    // Off unless a test asks for it with a free port: suites run in parallel.
    METRICS_PORT: '0',
    ...env,
  };
}

export interface TestServiceOptions extends StartOptions {
  /** Directory for the SQLite file; kept after `close()` when given. */
  dir?: string;
  /** Create the default administrator first, as `mds init` would (default: no users exist). */
  init?: boolean;
}

export async function startTestService(env: Record<string, string> = {}, options: TestServiceOptions = {}): Promise<TestService> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'mds-test-'));
  const config = loadConfig(testEnv(dir, env), { readFile: false });
  noteSecrets(config.auth.secretKey, config.auth.defaultAdmin.password, ...config.auth.apiKeys);
  const { logger, logs } = captureLogger();
  const violations: string[] = [];
  if (options.init) {
    const opened = await openAccounts(config, logger);
    try {
      await opened.accounts.ensureDefaultAdmin();
    } finally {
      await opened.close();
    }
  }
  const { dir: _dir, init: _init, ...startOptions } = options;
  const running = await startService(config, logger, {
    ...startOptions,
    onResponseViolation: (message, req) => violations.push(`${req.method} ${req.originalUrl}: ${message}`),
  });
  const fetchRel = (path: string, init?: RequestInit) => fetch(`${running.url}${path}`, init);
  return {
    ...running,
    config,
    logs,
    violations,
    dir,
    fetch: fetchRel,
    async login(username, password) {
      const res = await fetchRel('/api/auth/login', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username, password }),
      });
      const body = (await res.json()) as { access_token?: string };
      noteSecrets(password, body.access_token);
      if (res.status !== 200 || !body.access_token) throw new Error(`login ${username} failed: ${res.status} ${JSON.stringify(body)}`);
      return body.access_token;
    },
    async close() {
      await running.close();
      if (!options.dir) rmSync(dir, { recursive: true, force: true });
      if (violations.length > 0) throw new Error(`responses broke openapi.yaml:\n${violations.join('\n')}`);
    },
  };
}
