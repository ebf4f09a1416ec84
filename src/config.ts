/**
 * The one place that reads the environment. `loadConfig` parses every variable once, reports every
 * problem in one message naming the variables, and returns a frozen, nested, typed object.
 */
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import type * as Dotenv from 'dotenv';
import { distance } from 'fastest-levenshtein';
import type ProxyAddr from 'proxy-addr';
import { createRequire } from 'node:module';
import type * as Zod from 'zod';
import { ConfigError } from './domain/errors.js';
import { canonical, isSymbol, MAX_SYMBOL_LENGTH, SYMBOL_CHARS_IN_WORDS } from './domain/symbols.js';
import { isPlannedProvider, planFigures, tiersOf, type ProviderPlan } from './domain/provider-plans.js';
import { DEFAULT_KEEP, KEEP_FORMAT, KEPT_INTERVALS, keepVariable, parseKeep } from './domain/retention.js';
import type { HistoryInterval } from './domain/ports/market-data.js';

const requireHere = createRequire(import.meta.url);
// Required, not imported: zod's CommonJS build loads in two thirds of the time its ES modules take, on every start of every command.
// dotenv and proxy-addr load only when there is a .env file, or TRUST_PROXY lists addresses.
const { z } = requireHere('zod') as typeof Zod;

/** Placeholder values shipped in `.env.example`; startup warns while they are in use. */
export const PLACEHOLDERS = {
  secretKey: 'change-me-to-a-long-random-string',
  adminPassword: 'admin123456',
} as const;

/** Compute tasks that may wait per worker thread when WORKER_POOL_QUEUE is unset: about half a second of the worst request's computing per thread. */
export const WORKER_POOL_QUEUE_PER_THREAD = 4;

/** The shortest SECRET_KEY production accepts: 256 bits of HMAC key for HS256. */
export const MIN_SECRET_BYTES = 32;

export const DEFAULT_INDICES = ['^GSPC', '^DJI', '^IXIC', '^FTSE', '^GDAXI', '^N225', '^HSI', '000001.SS', '000300.SS', '^STOXX50E'];

const int = (min: number, max: number) => z.coerce.number({ error: 'must be a number' }).int('must be a whole number').min(min, `must be at least ${min}`).max(max, `must be at most ${max}`);
const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no', '']).transform((v) => v === 'true' || v === '1' || v === 'yes');
/** A keep of stored candles (`2y`, `90d`, `forever`): milliseconds, or null for forever. */
const keep = z.string().transform((v, ctx): number | null => {
  const ms = parseKeep(v);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: KEEP_FORMAT });
    return z.NEVER;
  }
  return ms;
});
const csv = z.string().transform((v) => v.split(',').map((s) => s.trim()).filter((s) => s.length > 0));

/**
 * TRUST_PROXY as Express's `trust proxy` reads it, but never `true` (which takes the address a client
 * writes itself): `false`/`0` the socket's peer, a number of trusted hops, or proxy addresses and CIDRs
 * (and proxy-addr's names `loopback`, `linklocal`, `uniquelocal`).
 */
const trustProxy = z.string().transform((v, ctx): false | number | string[] => {
  const text = v.trim().toLowerCase();
  if (text === 'false' || text === 'no' || text === '0' || text === '') return false;
  if (text === 'true' || text === 'yes') {
    ctx.addIssue({ code: 'custom', message: 'true would take the client address from whatever X-Forwarded-For the client writes itself: set the number of proxies in front of mds (TRUST_PROXY=1) or their addresses and CIDRs (TRUST_PROXY=10.0.0.1,10.1.0.0/16)' });
    return z.NEVER;
  }
  if (/^\d+$/.test(text)) {
    const hops = Number(text);
    if (hops > 32) ctx.addIssue({ code: 'custom', message: 'must be at most 32 trusted hops' });
    return hops;
  }
  const list = text.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  try {
    (requireHere('proxy-addr') as typeof ProxyAddr).compile(list);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `must be false, a number of trusted proxies, or their addresses and CIDRs separated by commas (${(err as Error).message})` });
  }
  return list;
});

/** `host:port` (a bracketed IPv6 host allowed), port 1 to 65535. */
function isHostPort(text: string): boolean {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]/]+):(\d{1,5})$/.exec(text);
  return match !== null && Number(match[2]) >= 1 && Number(match[2]) <= 65535;
}

function toHostPort(text: string): { host: string; port: number } {
  const at = text.lastIndexOf(':');
  return { host: text.slice(0, at).replace(/^\[(.*)\]$/, '$1'), port: Number(text.slice(at + 1)) };
}

// --- market-data providers: names, per-provider variables, defaults ------------------------------

/** Every market-data provider name `MARKET_DATA_PROVIDERS` accepts. */
export const PROVIDER_NAMES = ['simulated', 'yahoo', 'polygon', 'alpha_vantage', 'tiingo', 'fmp', 'ecb'] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];
/** Providers with per-provider variables (`<P>_…`; `simulated` has none). */
type UpstreamProviderName = Exclude<ProviderName, 'simulated'>;
const UPSTREAM_PROVIDERS: readonly UpstreamProviderName[] = ['yahoo', 'polygon', 'alpha_vantage', 'tiingo', 'fmp', 'ecb'];
/** Providers that refuse every call without a key: listing one without `<P>_API_KEYS` stops startup. */
const KEYED_PROVIDERS = new Set<ProviderName>(['polygon', 'alpha_vantage', 'tiingo', 'fmp']);

/**
 * Each provider's public host, and the limits of a provider without plans: the defaults of
 * `<P>_BASE_URL`, `<P>_MAX_RPS` (fleet-wide requests per second, fractions allowed) and
 * `<P>_DAILY_LIMIT` (per key per UTC day; 0 = none). A keyed provider's limits come from its plan
 * (`<P>_PLAN`, domain/provider-plans.ts). Yahoo's come from MARKET_DATA_BASE_URL and UPSTREAM_MAX_RPS
 * when its own are unset.
 */
const PROVIDER_DEFAULTS: Readonly<Record<Exclude<UpstreamProviderName, 'yahoo'>, { baseUrl: string; maxRps: number; dailyLimit: number }>> = {
  polygon: { baseUrl: 'https://api.polygon.io', maxRps: 0.083, dailyLimit: 0 },
  alpha_vantage: { baseUrl: 'https://www.alphavantage.co', maxRps: 1, dailyLimit: 25 },
  tiingo: { baseUrl: 'https://api.tiingo.com', maxRps: 0.0138, dailyLimit: 1000 },
  fmp: { baseUrl: 'https://financialmodelingprep.com', maxRps: 5, dailyLimit: 250 },
  ecb: { baseUrl: 'https://www.ecb.europa.eu', maxRps: 1, dailyLimit: 0 },
};

/** The `<P>` of a provider's variables (`alpha_vantage` -> `ALPHA_VANTAGE`). */
function providerPrefix(name: UpstreamProviderName): string {
  return name.toUpperCase();
}

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });
const rate = z.coerce.number({ error: 'must be a number' }).min(0, 'must be at least 0').max(100_000, 'must be at most 100000');

/** The variables of each provider, all optional (defaults are applied per provider after parsing); the plan ones for keyed providers only. */
const providerVariables = Object.fromEntries(
  UPSTREAM_PROVIDERS.flatMap((name) => {
    const p = providerPrefix(name);
    const plan = isPlannedProvider(name)
      ? ([
          [`${p}_PLAN`, z.enum(tiersOf(name) as [string, ...string[]], { error: `must be one of ${tiersOf(name).join(', ')}` }).optional()],
          [`${p}_HISTORY_DAYS`, int(1, 36_600).optional()],
          [`${p}_INTRADAY_DAYS`, int(1, 36_600).optional()],
        ] as const)
      : [];
    return [
      ...plan,
      [`${p}_API_KEYS`, csv.default([])],
      [`${p}_BASE_URL`, httpUrl.optional()],
      [`${p}_MAX_RPS`, rate.optional()],
      [`${p}_DAILY_LIMIT`, int(0, 100_000_000).optional()],
      [`${p}_TIMEOUT_MS`, int(100, 60_000).optional()],
    ] as const;
  }),
) as Record<string, Zod.ZodType>;

/** One provider's settings, as the adapters and the router read them. */
export interface ProviderSettings {
  /** The key pool, in the order given; empty for a keyless provider. */
  apiKeys: readonly string[];
  /** Scheme and host, no trailing slash. */
  baseUrl: string;
  /** Fleet-wide requests per second; 0 = no budget. */
  maxRps: number;
  /** Requests per key per UTC day, fleet-wide; 0 = no limit. */
  dailyLimit: number;
  timeoutMs: number;
  /** The plan of a keyed provider (`<P>_PLAN`, its reach after `<P>_HISTORY_DAYS`/`<P>_INTRADAY_DAYS`); absent for yahoo and ecb. */
  plan?: ProviderPlan | undefined;
}

/**
 * The ordered provider chain and each provider's settings. Throws `ConfigError` (one line naming the
 * variable) for an unknown or repeated name and a keyed provider listed without a key.
 */
function providerChain(merged: Env, v: { MARKET_DATA_PROVIDER: ProviderName; MARKET_DATA_BASE_URL: string; MARKET_DATA_TIMEOUT_MS: number; UPSTREAM_MAX_RPS: number }, extra: Record<string, unknown>) {
  const listed = merged.MARKET_DATA_PROVIDERS;
  const names: string[] = listed !== undefined && listed.trim() !== '' ? listed.split(',').map((s) => s.trim().toLowerCase()) : [v.MARKET_DATA_PROVIDER];
  for (const name of names) {
    if (name === '') throw new ConfigError(`Invalid configuration: MARKET_DATA_PROVIDERS=${JSON.stringify(listed)}: has an empty name`);
    if (!(PROVIDER_NAMES as readonly string[]).includes(name)) {
      throw new ConfigError(`Invalid configuration: MARKET_DATA_PROVIDERS=${JSON.stringify(listed)}: unknown provider '${name}' (known: ${PROVIDER_NAMES.join(', ')})`);
    }
  }
  const duplicate = names.find((name, i) => names.indexOf(name) !== i);
  if (duplicate !== undefined) throw new ConfigError(`Invalid configuration: MARKET_DATA_PROVIDERS=${JSON.stringify(listed)}: '${duplicate}' is listed twice`);
  const chain = names as ProviderName[];
  const settings = {} as Record<UpstreamProviderName, ProviderSettings>;
  for (const name of UPSTREAM_PROVIDERS) {
    const p = providerPrefix(name);
    const apiKeys = extra[`${p}_API_KEYS`] as string[];
    if (chain.includes(name) && KEYED_PROVIDERS.has(name) && apiKeys.length === 0) {
      throw new ConfigError(`Invalid configuration: ${p}_API_KEYS must hold at least one key: '${name}' is listed in MARKET_DATA_PROVIDERS and refuses calls without a key`);
    }
    const tier = isPlannedProvider(name) ? ((extra[`${p}_PLAN`] as string | undefined) ?? tiersOf(name)[0]) : undefined;
    const figures = isPlannedProvider(name) ? planFigures(name, tier) : undefined;
    const base = name === 'yahoo' ? { baseUrl: v.MARKET_DATA_BASE_URL, maxRps: v.UPSTREAM_MAX_RPS, dailyLimit: 0 } : PROVIDER_DEFAULTS[name];
    // A plan's rate and daily limit are the defaults of <P>_MAX_RPS and <P>_DAILY_LIMIT.
    const defaults = figures === undefined ? base : { ...base, maxRps: figures.maxRps, dailyLimit: figures.dailyLimit };
    const plan: ProviderPlan | undefined =
      figures === undefined || tier === undefined
        ? undefined
        : {
            name: tier,
            historyDays: (extra[`${p}_HISTORY_DAYS`] as number | undefined) ?? figures.historyDays,
            intradayDays: (extra[`${p}_INTRADAY_DAYS`] as number | undefined) ?? figures.intradayDays,
          };
    settings[name] = {
      plan,
      apiKeys,
      baseUrl: ((extra[`${p}_BASE_URL`] as string | undefined) ?? defaults.baseUrl).replace(/\/+$/, ''),
      maxRps: (extra[`${p}_MAX_RPS`] as number | undefined) ?? defaults.maxRps,
      dailyLimit: (extra[`${p}_DAILY_LIMIT`] as number | undefined) ?? defaults.dailyLimit,
      timeoutMs: (extra[`${p}_TIMEOUT_MS`] as number | undefined) ?? v.MARKET_DATA_TIMEOUT_MS,
    };
  }
  return { chain, settings };
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
  /** The most unknown symbols remembered per provider, in memory and in Redis (64 keys at most either way). */
  CACHE_UNKNOWN_MAX_SYMBOLS: int(64, 1_000_000).default(10_000),
  QUALITY_DIVERGENCE_BPS: int(1, 10_000).default(50),
  /** HISTORY_KEEP_<INTERVAL>: how long stored candles of each interval are kept (domain/retention.ts). */
  ...Object.fromEntries(KEPT_INTERVALS.map((interval) => [keepVariable(interval), keep.default(parseKeep(DEFAULT_KEEP[interval]) as number | null)])),

  SECRET_KEY: z.string().optional(),
  ACCESS_TOKEN_EXPIRE_MINUTES: int(1, 525_600).default(10080),
  API_KEYS: csv.default([]),
  DEFAULT_ADMIN_USERNAME: z.string().min(1).max(64).default('admin'),
  DEFAULT_ADMIN_PASSWORD: z.string().min(1).default(PLACEHOLDERS.adminPassword),
  BCRYPT_ROUNDS: int(4, 15).default(12),
  /** Unset: four per hashing worker. Logins past it are answered 503 with Retry-After at once. */
  BCRYPT_MAX_QUEUE: int(1, 100_000).optional(),
  /** Worker threads of the compute pool (indicators, exports, large history answers); unset: the cores this process may use. */
  WORKER_POOL_THREADS: int(1, 256).optional(),
  /** Compute tasks that may wait for a thread; unset: four per thread. Past it the request is answered 503 with Retry-After. */
  WORKER_POOL_QUEUE: int(0, 100_000).optional(),
  /** How much lower the worker threads' CPU priority is than the event loop's (a nice(2) increment, 0-19). */
  WORKER_POOL_NICE: int(0, 19).default(19),
  LOGIN_MAX_FAILURES: int(1, 1000).default(5),
  /** Unset: four times LOGIN_MAX_FAILURES (one address may be many users behind one NAT). */
  LOGIN_MAX_FAILURES_PER_ADDRESS: int(1, 100_000).optional(),
  LOGIN_BLOCK_SECONDS: int(1, 86_400).default(300),
  AUTH_CACHE_SECONDS: int(0, 300).default(5),
  AUTH_OUTAGE_GRACE_SECONDS: int(0, 86_400).default(600),
  /** The API key `mds mcp` (stdio) acts with: a managed key or one of API_KEYS; unset: anonymous. */
  MCP_API_KEY: z.string().min(1).max(512).optional(),

  MARKET_DATA_PROVIDER: z.enum(PROVIDER_NAMES).default('simulated'),
  /** The ordered provider chain (`polygon,tiingo,yahoo`); checked by `providerChain`, which also reads the `<P>_…` variables. */
  MARKET_DATA_PROVIDERS: z.string().optional(),
  ...providerVariables,
  MARKET_DATA_BASE_URL: z.url({ error: 'must be an http(s) URL' }).default('https://query1.finance.yahoo.com'),
  MARKET_INDICES: csv
    .default(DEFAULT_INDICES)
    .refine((list) => list.every(isSymbol), `must be symbols of 1 to ${MAX_SYMBOL_LENGTH} characters of ${SYMBOL_CHARS_IN_WORDS}, comma-separated`)
    .transform((list) => list.map(canonical)),
  MARKET_DATA_TIMEOUT_MS: int(100, 60_000).default(5000),
  MARKET_DATA_BREAKER_RESET_SECONDS: int(1, 3600).default(10),
  /** The most of each provider's budget (rate and daily limit) that background work (index refresh, keep-current, backfill) may use. */
  BACKGROUND_BUDGET_SHARE: z.coerce.number({ error: 'must be a number' }).min(0, 'must be at least 0').max(1, 'must be at most 1').default(0.5),
  /** Upstream (yahoo) requests per second for the whole fleet, shared through Redis; 0 = no budget. */
  UPSTREAM_MAX_RPS: int(0, 1000).default(5),
  /** Upstream (yahoo) requests in flight at once, per instance. */
  UPSTREAM_MAX_CONCURRENCY: int(1, 256).default(4),
  REFRESH_INTERVAL_SECONDS: int(0, 86_400).default(30),
  TRUST_PROXY: trustProxy.default(false),
  /** Requests per minute of one anonymous client address on /api (not health); 0 = no limit. */
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: int(0, 10_000_000).default(300),
  /** Requests per minute of one user or API key (a managed key may carry its own); 0 = no limit. */
  RATE_LIMIT_AUTHENTICATED_PER_MINUTE: int(0, 10_000_000).default(3000),
  /** When true, market-data operations answer 401 without a token or an API key. */
  DATA_REQUIRES_AUTH: bool.default(false),
  STREAM_MAX_CLIENTS: int(1, 100_000).default(1000),
  STREAM_MAX_PER_ADDRESS: int(0, 100_000).default(5),
  /** Open streams per user or API key; default a tenth of STREAM_MAX_CLIENTS (rounded up); 0 = no limit. */
  STREAM_MAX_PER_CALLER: int(0, 100_000).optional(),
  // At least 64 KiB: a stream's first events (up to 50 quotes, ~25 KB) are written in one go.
  STREAM_MAX_BUFFER_BYTES: int(64 * 1024, 64 * 1024 * 1024).default(256 * 1024),
  STREAM_HEARTBEAT_SECONDS: int(1, 3600).default(15),
  STREAM_REFRESH_SECONDS: int(0, 3600).default(5),
  STREAM_RECONNECT_MARGIN_SECONDS: int(0, 3600).default(5),
  /** Push upstreams (DESIGN 23): `yahoo,polygon`; none by default (polling only). */
  STREAM_UPSTREAMS: csv
    .default([])
    .refine((list) => list.every((u) => u === 'yahoo' || u === 'polygon') && new Set(list).size === list.length, 'must be yahoo and/or polygon, comma-separated, each once'),
  /** Yahoo's streamer URL (tests point it at a local replay). */
  YAHOO_STREAM_URL: z.string().regex(/^wss?:\/\/\S+$/, 'must be a ws:// or wss:// URL').optional(),
  /** Polygon/Massive's WebSocket URL; default the host of POLYGON_STREAM_FEED. */
  POLYGON_STREAM_URL: z.string().regex(/^wss?:\/\/\S+$/, 'must be a ws:// or wss:// URL').optional(),
  /** Polygon's plan: `delayed` (15-minute delayed plans, delayed.polygon.io) or `realtime` (socket.polygon.io). */
  POLYGON_STREAM_FEED: z.enum(['delayed', 'realtime']).default('delayed'),
  /** Largest message a WebSocket API client may send, in bytes. */
  WS_MAX_MESSAGE_BYTES: int(256, 1024 * 1024).default(16 * 1024),
  /** How long after its minute's end a live bar becomes final (DESIGN 26): late trades within it need no revision. */
  LIVE_BAR_GRACE_MS: int(0, 60_000).default(2000),
  /** How long after it became final a live bar may still be revised by a late trade; later ones are dropped. */
  LIVE_BAR_REVISION_SECONDS: int(0, 3600).default(300),
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
  return (requireHere('dotenv') as typeof Dotenv).parse(readFileSync(path));
}

function redisFromParts(v: Zod.infer<typeof schema>) {
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
const SECRET_VARIABLES = new Set(['SECRET_KEY', 'API_KEYS', 'MCP_API_KEY', 'DEFAULT_ADMIN_PASSWORD', 'CACHE_PASSWORD', 'CACHE_SENTINEL_PASSWORD', ...UPSTREAM_PROVIDERS.map((name) => `${providerPrefix(name)}_API_KEYS`)]);

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
function cacheTopology(v: Zod.infer<typeof schema>, input: Env): 'single' | 'sentinel' | 'cluster' {
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

/** Variables mds reads besides the schema's. */
const OTHER_VARIABLES = ['ENV_FILE'];
/** At most this many edits apart, an unknown name is taken for a mistyped known one. */
const TYPO_DISTANCE = 2;

/** The known variable nearest to `name`, when it is close enough to be a typo of it. */
function nearestKnown(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const d = distance(name, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return bestDistance <= TYPO_DISTANCE ? best : undefined;
}

/**
 * Startup warnings for variables mds does not read: every one the env file sets (a file holds only
 * settings for mds), and those of the environment that look like a mistyped known name (the
 * environment holds much else). Each names the closest known variable when there is one.
 */
function unknownVariableWarnings(fromFile: Env, env: Env, envFile: string): string[] {
  const known = [...Object.keys(schema.shape), ...OTHER_VARIABLES];
  const knownSet = new Set(known);
  const warnings: string[] = [];
  for (const name of Object.keys(fromFile)) {
    if (knownSet.has(name)) continue;
    const near = nearestKnown(name, known);
    warnings.push(`${envFile} sets ${name}, which mds does not read${near ? ` (did you mean ${near}?)` : ''}: it is ignored`);
  }
  for (const name of Object.keys(env)) {
    if (knownSet.has(name) || name in fromFile || name.length < 6) continue;
    const near = nearestKnown(name, known);
    if (near) warnings.push(`the environment sets ${name}, which mds does not read (did you mean ${near}?): it is ignored`);
  }
  return warnings;
}

/**
 * Reads configuration from `env` (the process environment by default) over the env file
 * (ENV_FILE, default `.env` in `cwd`). Real environment variables win over the file, and `overrides`
 * (command-line flags) win over both.
 * Throws `ConfigError` naming every invalid variable.
 */
export function loadConfig(env: Env = process.env, options: { cwd?: string; readFile?: boolean; overrides?: Env } = {}) {
  const fromFile = options.readFile === false ? {} : readEnvFile(env, options.cwd ?? process.cwd());
  const warnings = unknownVariableWarnings(fromFile, env, env.ENV_FILE && env.ENV_FILE.length > 0 ? env.ENV_FILE : '.env');
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
  // A short or shipped secret lets anyone who reads the example (or tries a few guesses offline) forge tokens.
  if (v.NODE_ENV === 'production' && v.SECRET_KEY !== undefined && (Buffer.byteLength(v.SECRET_KEY, 'utf8') < MIN_SECRET_BYTES || v.SECRET_KEY === PLACEHOLDERS.secretKey)) {
    throw new ConfigError(`Invalid configuration: SECRET_KEY must be at least ${MIN_SECRET_BYTES} bytes of random text when NODE_ENV=production, not the example value`);
  }

  const topology = cacheTopology(v, input);
  const providers = providerChain(input, v, v as unknown as Record<string, unknown>);
  if (v.METRICS_PORT !== 0 && v.METRICS_PORT === v.PORT) {
    throw new ConfigError(`Invalid configuration: METRICS_PORT=${v.METRICS_PORT} must differ from PORT (metrics have their own listener; 0 turns them off)`);
  }

  const poolThreads = v.WORKER_POOL_THREADS ?? availableParallelism();
  const config = {
    env: v.NODE_ENV,
    /** Variables set but not read (unknown in the env file, or a likely typo in the environment): startup logs each. */
    warnings,
    server: { host: v.HOST, port: v.PORT, bodyLimitBytes: v.BODY_LIMIT_BYTES, trustProxy: v.TRUST_PROXY, corsOrigins: v.CORS_ORIGINS },
    log: {
      level: v.LOG_LEVEL,
      /** `auto` (LOG_FORMAT unset): pretty where the log goes to a terminal, JSON elsewhere. */
      format: v.LOG_FORMAT ?? ('auto' as const),
      /**
       * LOG_LEVEL is set in the environment itself, not only in the env file (a copy of `.env.example`
       * sets it for the server): a CLI command then shows its log without `--verbose`.
       */
      levelInEnvironment: (env.LOG_LEVEL ?? '') !== '',
    },
    database: { url: v.DATABASE_URL },
    /** Data quality (DESIGN 20): how far apart two providers' closes may be (basis points) before they diverge. */
    quality: { divergenceBps: v.QUALITY_DIVERGENCE_BPS },
    /** How long stored candles of each interval are kept, in ms; null keeps them forever (HISTORY_KEEP_<INTERVAL>). */
    retention: Object.fromEntries(KEPT_INTERVALS.map((interval) => [interval, (v as unknown as Record<string, number | null>)[keepVariable(interval)] ?? null])) as Record<HistoryInterval, number | null>,
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
      /** The bound of the negative answers kept per provider (unknown symbols, an hour each). */
      unknownMaxSymbols: v.CACHE_UNKNOWN_MAX_SYMBOLS,
    },
    auth: {
      /** Undefined when SECRET_KEY is unset: a random per-process key is generated at startup. */
      secretKey: v.SECRET_KEY,
      tokenTtlMs: v.ACCESS_TOKEN_EXPIRE_MINUTES * 60_000,
      apiKeys: v.API_KEYS,
      defaultAdmin: { username: v.DEFAULT_ADMIN_USERNAME, password: v.DEFAULT_ADMIN_PASSWORD },
      bcryptRounds: v.BCRYPT_ROUNDS,
      /** Logins that may wait for a hashing thread; undefined: four per thread. */
      bcryptMaxQueue: v.BCRYPT_MAX_QUEUE,
      loginMaxFailures: v.LOGIN_MAX_FAILURES,
      loginMaxFailuresPerAddress: v.LOGIN_MAX_FAILURES_PER_ADDRESS ?? v.LOGIN_MAX_FAILURES * 4,
      loginBlockMs: v.LOGIN_BLOCK_SECONDS * 1000,
      /** How long the bearer check trusts a user it read (AUTH_CACHE_SECONDS); 0 reads the database every time. */
      userCacheTtlMs: v.AUTH_CACHE_SECONDS * 1000,
      /**
       * While the database is unavailable, API keys and tokens this instance verified against it this
       * recently keep working (AUTH_OUTAGE_GRACE_SECONDS); 0 refuses them all with 503 meanwhile.
       */
      outageGraceMs: v.AUTH_OUTAGE_GRACE_SECONDS * 1000,
      /** Market-data operations need a token or key (the contract's security is adjusted at startup). */
      dataRequiresAuth: v.DATA_REQUIRES_AUTH,
    },
    /** The compute pool (DESIGN 24): CPU-heavy work off the event loop. */
    workerPool: {
      threads: poolThreads,
      /** Tasks that may wait for a thread; one more is refused with 503. */
      maxQueue: v.WORKER_POOL_QUEUE ?? poolThreads * WORKER_POOL_QUEUE_PER_THREAD,
      /** The threads' nice(2) increment over the process: the event loop gets the cores first. */
      niceIncrement: v.WORKER_POOL_NICE,
    },
    rateLimit: {
      anonymousPerMinute: v.RATE_LIMIT_ANONYMOUS_PER_MINUTE,
      authenticatedPerMinute: v.RATE_LIMIT_AUTHENTICATED_PER_MINUTE,
    },
    market: {
      /** The first provider of the chain: what the single-provider wiring builds. */
      provider: providers.chain[0] ?? v.MARKET_DATA_PROVIDER,
      /** MARKET_DATA_PROVIDERS in order of preference (MARKET_DATA_PROVIDER alone when it is unset). */
      providers: providers.chain,
      /** Per provider (`yahoo` … `ecb`): keys, base URL, budgets and timeout. */
      providerSettings: providers.settings,
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
      /** The share of each provider's budget background work may use (BACKGROUND_BUDGET_SHARE, 0 to 1). */
      backgroundShare: v.BACKGROUND_BUDGET_SHARE,
    },
    stream: {
      /** Open streams per instance at most; beyond, 503 with Retry-After. */
      maxClients: v.STREAM_MAX_CLIENTS,
      /** Open streams per client address at most (0: no limit); beyond, 429 with Retry-After. */
      maxPerAddress: v.STREAM_MAX_PER_ADDRESS,
      /** Open streams per user or API key at most (0: no limit); beyond, 429 with Retry-After. */
      maxPerCaller: v.STREAM_MAX_PER_CALLER ?? Math.ceil(v.STREAM_MAX_CLIENTS / 10),
      /** A stream whose unsent bytes pass this is dropped. */
      maxBufferedBytes: v.STREAM_MAX_BUFFER_BYTES,
      heartbeatMs: v.STREAM_HEARTBEAT_SECONDS * 1000,
      /** How often subscribed symbols are refreshed ahead of expiry (0: only readers refresh them). */
      refreshIntervalMs: v.STREAM_REFRESH_SECONDS * 1000,
      /** On a reconnect, quotes changed this long before Last-Event-ID are sent again (instances' clocks and delays). */
      reconnectMarginMs: v.STREAM_RECONNECT_MARGIN_SECONDS * 1000,
    },
    mcp: {
      /** MCP_API_KEY: the key the stdio server (`mds mcp`) sends with every tool call; undefined: anonymous. */
      apiKey: v.MCP_API_KEY,
    },
    live: {
      /** Push upstreams (STREAM_UPSTREAMS); empty: polling only. */
      upstreams: v.STREAM_UPSTREAMS as Array<'yahoo' | 'polygon'>,
      yahooUrl: v.YAHOO_STREAM_URL,
      polygonUrl: v.POLYGON_STREAM_URL,
      polygonFeed: v.POLYGON_STREAM_FEED,
      polygonKeys: providers.settings.polygon.apiKeys,
      /** Largest WebSocket API message a client may send. */
      wsMaxMessageBytes: v.WS_MAX_MESSAGE_BYTES,
      /** Live bars (DESIGN 26): final at the minute's end plus this (LIVE_BAR_GRACE_MS). */
      barGraceMs: v.LIVE_BAR_GRACE_MS,
      /** Late trades revise a final bar within this (LIVE_BAR_REVISION_SECONDS in ms). */
      barRevisionWindowMs: v.LIVE_BAR_REVISION_SECONDS * 1000,
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
