/**
 * The one place that reads the environment. `loadConfig` parses every variable once, reports every
 * problem in one message naming the variables, and returns a frozen, nested, typed object.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { z } from 'zod';
import { ConfigError } from './domain/errors.js';

/** Placeholder values shipped in `.env.example`; startup warns while they are in use. */
export const PLACEHOLDERS = {
  secretKey: 'change-me-to-a-long-random-string',
  adminPassword: 'admin123456',
} as const;

export const DEFAULT_INDICES = ['^GSPC', '^DJI', '^IXIC', '^FTSE', '^GDAXI', '^N225', '^HSI', '000001.SS', '000300.SS', '^STOXX50E'];

const int = (min: number, max: number) => z.coerce.number({ error: 'must be a number' }).int('must be a whole number').min(min, `must be at least ${min}`).max(max, `must be at most ${max}`);
const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no', '']).transform((v) => v === 'true' || v === '1' || v === 'yes');
const csv = z.string().transform((v) => v.split(',').map((s) => s.trim()).filter((s) => s.length > 0));

/** `host:port` (a bracketed IPv6 host allowed), port 1 to 65535. */
function isHostPort(text: string): boolean {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]/]+):(\d{1,5})$/.exec(text);
  return match !== null && Number(match[2]) >= 1 && Number(match[2]) <= 65535;
}

function toHostPort(text: string): { host: string; port: number } {
  const at = text.lastIndexOf(':');
  return { host: text.slice(0, at).replace(/^\[(.*)\]$/, '$1'), port: Number(text.slice(at + 1)) };
}

/** Every variable, its default and its check. Empty strings count as unset. */
const schema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: int(0, 65535).default(8000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z.enum(['pretty', 'json']).optional(),
  BODY_LIMIT_BYTES: int(1, 10 * 1024 * 1024).default(16 * 1024),

  DATABASE_URL: z
    .string()
    .default('sqlite:./data/mds.sqlite')
    .refine((v) => /^sqlite:.+/.test(v) || /^postgres(ql)?:\/\/.+/.test(v), 'must be sqlite:<path> or postgres://user:pass@host:port/db'),

  CACHE_HOST: z.string().min(1).default('127.0.0.1'),
  CACHE_PORT: int(1, 65535).default(6379),
  CACHE_DB: int(0, 15).default(0),
  CACHE_PASSWORD: z.string().default(''),
  CACHE_URL: z
    .string()
    .optional()
    .refine((v) => v === undefined || isRedisUrl(v), 'must be redis[s]://[[user]:password@]host[:port][/db] with a port of 1-65535 and a db of 0-15'),
  CACHE_SENTINELS: csv.default([]).refine((list) => list.every(isHostPort), 'must be host:port pairs, comma-separated'),
  CACHE_SENTINEL_NAME: z.string().min(1).max(200).default('mymaster'),
  CACHE_SENTINEL_PASSWORD: z.string().default(''),
  CACHE_CLUSTER_NODES: csv.default([]).refine((list) => list.every(isHostPort), 'must be host:port pairs, comma-separated'),
  CACHE_TTL_SECONDS: int(1, 86_400).default(60),
  CACHE_MEMORY_MAX_ENTRIES: int(1, 1_000_000).default(1000),
  CACHE_STALE_IF_ERROR_SECONDS: int(0, 86_400).default(0),

  SECRET_KEY: z.string().optional(),
  ACCESS_TOKEN_EXPIRE_MINUTES: int(1, 525_600).default(10080),
  API_KEYS: csv.default([]),
  DEFAULT_ADMIN_USERNAME: z.string().min(1).max(64).default('admin'),
  DEFAULT_ADMIN_PASSWORD: z.string().min(1).default(PLACEHOLDERS.adminPassword),
  BCRYPT_ROUNDS: int(4, 15).default(12),
  LOGIN_MAX_FAILURES: int(1, 1000).default(5),
  /** Unset: four times LOGIN_MAX_FAILURES (one address may be many users behind one NAT). */
  LOGIN_MAX_FAILURES_PER_ADDRESS: int(1, 100_000).optional(),
  LOGIN_BLOCK_SECONDS: int(1, 86_400).default(300),
  AUTH_CACHE_SECONDS: int(0, 300).default(5),

  MARKET_DATA_PROVIDER: z.enum(['simulated', 'yahoo']).default('simulated'),
  MARKET_DATA_BASE_URL: z.url({ error: 'must be an http(s) URL' }).default('https://query1.finance.yahoo.com'),
  MARKET_INDICES: csv.default(DEFAULT_INDICES),
  MARKET_DATA_TIMEOUT_MS: int(100, 60_000).default(5000),
  MARKET_DATA_BREAKER_RESET_SECONDS: int(1, 3600).default(10),
  /** Upstream (yahoo) requests per second for the whole fleet, shared through Redis; 0 = no budget. */
  UPSTREAM_MAX_RPS: int(0, 1000).default(5),
  /** Upstream (yahoo) requests in flight at once, per instance. */
  UPSTREAM_MAX_CONCURRENCY: int(1, 256).default(4),
  REFRESH_INTERVAL_SECONDS: int(0, 86_400).default(30),
  TRUST_PROXY: bool.default(false),
  /** Requests per minute of one anonymous client address on /api (not health); 0 = no limit. */
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: int(0, 10_000_000).default(300),
  /** Requests per minute of one user or API key (a managed key may carry its own); 0 = no limit. */
  RATE_LIMIT_AUTHENTICATED_PER_MINUTE: int(0, 10_000_000).default(3000),
  /** When true, market-data operations answer 401 without a token or an API key. */
  DATA_REQUIRES_AUTH: bool.default(false),
  STREAM_MAX_CLIENTS: int(1, 100_000).default(1000),
  STREAM_MAX_PER_ADDRESS: int(0, 100_000).default(5),
  // At least 64 KiB: a stream's first events (up to 50 quotes, ~25 KB) are written in one go.
  STREAM_MAX_BUFFER_BYTES: int(64 * 1024, 64 * 1024 * 1024).default(256 * 1024),
  STREAM_HEARTBEAT_SECONDS: int(1, 3600).default(15),
  STREAM_REFRESH_SECONDS: int(0, 3600).default(5),
  STREAM_RECONNECT_MARGIN_SECONDS: int(0, 3600).default(5),
  CORS_ORIGINS: csv
    .default([])
    .refine((list) => list.every((o) => o === '*' || /^https?:\/\/[^/\s]+$/.test(o)), 'must be * or origins like https://app.example.com, comma-separated'),

  /** Address of the Prometheus metrics listener; loopback, so metrics are not public unless chosen. */
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /** Port of the metrics listener, never the API's; 0 turns metrics off (no listener, nothing recorded). */
  METRICS_PORT: int(0, 65535).default(9464),
});

export type Env = Record<string, string | undefined>;

function readEnvFile(env: Env, cwd: string): Env {
  const file = env.ENV_FILE && env.ENV_FILE.length > 0 ? env.ENV_FILE : '.env';
  const path = resolve(cwd, file);
  if (!existsSync(path)) {
    if (env.ENV_FILE) throw new ConfigError(`ENV_FILE: ${path} does not exist`);
    return {};
  }
  return parseDotenv(readFileSync(path));
}

function redisFromParts(v: z.infer<typeof schema>) {
  if (v.CACHE_URL) {
    const url = new URL(v.CACHE_URL);
    const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : v.CACHE_DB;
    return {
      host: url.hostname || v.CACHE_HOST,
      port: url.port ? Number(url.port) : 6379,
      db: Number.isInteger(db) ? db : v.CACHE_DB,
      password: url.password ? decodeURIComponent(url.password) : v.CACHE_PASSWORD,
      username: url.username ? decodeURIComponent(url.username) : undefined,
      tls: url.protocol === 'rediss:',
    };
  }
  return { host: v.CACHE_HOST, port: v.CACHE_PORT, db: v.CACHE_DB, password: v.CACHE_PASSWORD, username: undefined, tls: false };
}

/** A `redis://` or `rediss://` URL with a host, a port of 1-65535 if any, and a database of 0-15 if any. */
function isRedisUrl(value: string): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if ((url.protocol !== 'redis:' && url.protocol !== 'rediss:') || url.hostname === '') return false;
  if (url.pathname === '' || url.pathname === '/') return true;
  const db = /^\/(\d{1,2})$/.exec(url.pathname)?.[1];
  return db !== undefined && Number(db) <= 15;
}

/** Variables whose values are secrets: an error names them without their value. */
const SECRET_VARIABLES = new Set(['SECRET_KEY', 'API_KEYS', 'DEFAULT_ADMIN_PASSWORD', 'CACHE_PASSWORD', 'CACHE_SENTINEL_PASSWORD']);

/** What an error may quote of a variable's value: secrets as `***`, a URL's password as `***`. */
function shownValue(name: string, value: string): string {
  if (SECRET_VARIABLES.has(name)) return '***';
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@/]*@/i, '$1***@');
}

/**
 * Which Redis topology the variables name. Only one may be chosen: a single server (CACHE_URL, or
 * CACHE_HOST/CACHE_PORT other than their defaults), CACHE_SENTINELS or CACHE_CLUSTER_NODES. CACHE_PASSWORD and
 * CACHE_DB apply to the data nodes of whichever is chosen.
 */
function cacheTopology(v: z.infer<typeof schema>, input: Env): 'single' | 'sentinel' | 'cluster' {
  const chosen: string[] = [];
  // CACHE_HOST/CACHE_PORT at their defaults (as .env.example writes them) choose nothing.
  const single = [
    input.CACHE_URL !== undefined ? 'CACHE_URL' : '',
    v.CACHE_HOST !== '127.0.0.1' ? 'CACHE_HOST' : '',
    v.CACHE_PORT !== 6379 ? 'CACHE_PORT' : '',
  ].filter((k) => k.length > 0);
  if (single.length > 0) chosen.push(single.join('/'));
  if (v.CACHE_SENTINELS.length > 0) chosen.push('CACHE_SENTINELS');
  if (v.CACHE_CLUSTER_NODES.length > 0) chosen.push('CACHE_CLUSTER_NODES');
  if (chosen.length > 1) {
    throw new ConfigError(
      `Invalid configuration: ${chosen.join(' and ')} are set, but only one Redis topology may be chosen ` +
        '(a single server with CACHE_URL or CACHE_HOST/CACHE_PORT, Sentinel with CACHE_SENTINELS, or Cluster with CACHE_CLUSTER_NODES)',
    );
  }
  if (v.CACHE_CLUSTER_NODES.length > 0) {
    if (v.CACHE_DB !== 0) throw new ConfigError('Invalid configuration: CACHE_DB must be 0 with CACHE_CLUSTER_NODES (Redis Cluster has only database 0)');
    return 'cluster';
  }
  return v.CACHE_SENTINELS.length > 0 ? 'sentinel' : 'single';
}

/**
 * Reads configuration from `env` (the process environment by default) over the env file
 * (ENV_FILE, default `.env` in `cwd`). Real environment variables win over the file, and `overrides`
 * (command-line flags) win over both.
 * Throws `ConfigError` naming every invalid variable.
 */
export function loadConfig(env: Env = process.env, options: { cwd?: string; readFile?: boolean; overrides?: Env } = {}) {
  const fromFile = options.readFile === false ? {} : readEnvFile(env, options.cwd ?? process.cwd());
  const merged: Env = { ...fromFile };
  for (const [k, v] of Object.entries(env)) if (v !== undefined) merged[k] = v;
  for (const [k, v] of Object.entries(options.overrides ?? {})) if (v !== undefined) merged[k] = v;
  const input: Env = {};
  for (const key of Object.keys(schema.shape)) {
    const value = merged[key];
    if (value !== undefined && value !== '') input[key] = value;
  }
  if (merged.CACHE_PASSWORD !== undefined) input.CACHE_PASSWORD = merged.CACHE_PASSWORD;

  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}=${JSON.stringify(shownValue(String(i.path[0]), input[String(i.path[0])] ?? ''))}: ${i.message}`);
    throw new ConfigError(`Invalid configuration: ${lines.join('; ')}`);
  }
  const v = parsed.data;
  if (v.NODE_ENV === 'production' && !v.SECRET_KEY) {
    throw new ConfigError('Invalid configuration: SECRET_KEY must be set when NODE_ENV=production (a long random string)');
  }

  const topology = cacheTopology(v, input);
  if (v.METRICS_PORT !== 0 && v.METRICS_PORT === v.PORT) {
    throw new ConfigError(`Invalid configuration: METRICS_PORT=${v.METRICS_PORT} must differ from PORT (metrics have their own listener; 0 turns them off)`);
  }

  const config = {
    env: v.NODE_ENV,
    server: { host: v.HOST, port: v.PORT, bodyLimitBytes: v.BODY_LIMIT_BYTES, trustProxy: v.TRUST_PROXY, corsOrigins: v.CORS_ORIGINS },
    /** `format` `auto` (LOG_FORMAT unset): pretty where the log goes to a terminal, JSON elsewhere. */
    log: { level: v.LOG_LEVEL, format: v.LOG_FORMAT ?? ('auto' as const) },
    database: { url: v.DATABASE_URL },
    cache: {
      /** `single`: `redis` is the server; `sentinel`: `sentinel` finds the master; `cluster`: `clusterNodes` are the seeds. */
      topology,
      /** The single server (topology `single`); its password and db also apply to Sentinel's master and Cluster's nodes. */
      redis: redisFromParts(v),
      sentinel: {
        sentinels: v.CACHE_SENTINELS.map(toHostPort),
        name: v.CACHE_SENTINEL_NAME,
        /** Empty: the sentinels need no AUTH. */
        password: v.CACHE_SENTINEL_PASSWORD,
      },
      clusterNodes: v.CACHE_CLUSTER_NODES.map(toHostPort),
      ttlMs: v.CACHE_TTL_SECONDS * 1000,
      memoryMaxEntries: v.CACHE_MEMORY_MAX_ENTRIES,
      staleIfErrorMs: v.CACHE_STALE_IF_ERROR_SECONDS * 1000,
    },
    auth: {
      /** Undefined when SECRET_KEY is unset: a random per-process key is generated at startup. */
      secretKey: v.SECRET_KEY,
      tokenTtlMs: v.ACCESS_TOKEN_EXPIRE_MINUTES * 60_000,
      apiKeys: v.API_KEYS,
      defaultAdmin: { username: v.DEFAULT_ADMIN_USERNAME, password: v.DEFAULT_ADMIN_PASSWORD },
      bcryptRounds: v.BCRYPT_ROUNDS,
      loginMaxFailures: v.LOGIN_MAX_FAILURES,
      loginMaxFailuresPerAddress: v.LOGIN_MAX_FAILURES_PER_ADDRESS ?? v.LOGIN_MAX_FAILURES * 4,
      loginBlockMs: v.LOGIN_BLOCK_SECONDS * 1000,
      /** How long the bearer check trusts a user it read (AUTH_CACHE_SECONDS); 0 reads the database every time. */
      userCacheTtlMs: v.AUTH_CACHE_SECONDS * 1000,
      /** Market-data operations need a token or key (the contract's security is adjusted at startup). */
      dataRequiresAuth: v.DATA_REQUIRES_AUTH,
    },
    rateLimit: {
      anonymousPerMinute: v.RATE_LIMIT_ANONYMOUS_PER_MINUTE,
      authenticatedPerMinute: v.RATE_LIMIT_AUTHENTICATED_PER_MINUTE,
    },
    market: {
      provider: v.MARKET_DATA_PROVIDER,
      baseUrl: v.MARKET_DATA_BASE_URL.replace(/\/+$/, ''),
      symbols: v.MARKET_INDICES,
      timeoutMs: v.MARKET_DATA_TIMEOUT_MS,
      /** How long the circuit breaker stays open before probing the upstream again. */
      breakerResetMs: v.MARKET_DATA_BREAKER_RESET_SECONDS * 1000,
      /** Fleet-wide upstream requests per second (0 = unlimited); calls beyond it wait up to `timeoutMs`. */
      upstreamMaxRps: v.UPSTREAM_MAX_RPS,
      /** Upstream requests in flight at once on this instance. */
      upstreamMaxConcurrency: v.UPSTREAM_MAX_CONCURRENCY,
      refreshIntervalMs: v.REFRESH_INTERVAL_SECONDS * 1000,
    },
    stream: {
      /** Open streams per instance at most; beyond, 503 with Retry-After. */
      maxClients: v.STREAM_MAX_CLIENTS,
      /** Open streams per client address at most (0: no limit); beyond, 429 with Retry-After. */
      maxPerAddress: v.STREAM_MAX_PER_ADDRESS,
      /** A stream whose unsent bytes pass this is dropped. */
      maxBufferedBytes: v.STREAM_MAX_BUFFER_BYTES,
      heartbeatMs: v.STREAM_HEARTBEAT_SECONDS * 1000,
      /** How often subscribed symbols are refreshed ahead of expiry (0: only readers refresh them). */
      refreshIntervalMs: v.STREAM_REFRESH_SECONDS * 1000,
      /** On a reconnect, quotes changed this long before Last-Event-ID are sent again (instances' clocks and delays). */
      reconnectMarginMs: v.STREAM_RECONNECT_MARGIN_SECONDS * 1000,
    },
    metrics: {
      /** False when METRICS_PORT=0: no listener, and every service gets the no-op metrics. */
      enabled: v.METRICS_PORT !== 0,
      host: v.METRICS_HOST,
      port: v.METRICS_PORT,
    },
  };
  return deepFreeze(config);
}

export type Config = ReturnType<typeof loadConfig>;

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
