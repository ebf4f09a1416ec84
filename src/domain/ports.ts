/**
 * The ports: what the services need from the outside world. Adapters in `src/infra` implement them
 * and translate their technology's errors into the errors of `domain/errors.ts` at their own boundary.
 */
import type { Logger } from 'pino';
import type { components } from '../generated/api.js';

/** The structured logger (pino) every part writes to; built once in `infra/logger.ts`. */
export type { Logger };

/** One market quote, exactly as the API spells it. */
export type Quote = components['schemas']['Quote'];

/** A cached value with the time it has left to live. */
export interface CacheEntry {
  /** The stored string, unchanged. */
  value: string;
  /** Milliseconds left before the entry expires (0 when it expires now). */
  ttlMs: number;
}

/**
 * A key-value store for strings with per-entry time to live.
 * Every method throws `CacheUnavailableError` when the store cannot answer; a miss is never an error.
 */
export interface CacheStore {
  /** The entry under `key` with its remaining TTL, or `undefined` on a miss or an expired entry. */
  get(key: string): Promise<CacheEntry | undefined>;
  /** Stores `value` under `key` for `ttlMs` milliseconds, replacing any previous entry. */
  set(key: string, value: string, ttlMs: number): Promise<void>;
  /** Removes `key`; resolves to true when something was removed. */
  delete(key: string): Promise<boolean>;
  /** Removes every key that starts with `prefix` (never anything else); resolves to how many were removed. */
  deleteByPrefix(prefix: string): Promise<number>;
  /**
   * Takes a lock named `key` for `ttlMs` milliseconds if nobody holds it.
   * Resolves to a token to pass to `releaseLock`, or `undefined` when the lock is held elsewhere.
   */
  acquireLock(key: string, ttlMs: number): Promise<string | undefined>;
  /** Releases a lock taken with `acquireLock`, only if `token` still owns it. */
  releaseLock(key: string, token: string): Promise<void>;
}

/**
 * Best-effort messages to every instance sharing the cache store (this one included). A message
 * may be lost while the store is away; subscribers must treat it as a hint, never as the only truth.
 */
export interface Broadcast {
  /** Delivers `message` to every subscriber of `channel`, here at once and elsewhere through the store. */
  publish(channel: string, message: string): Promise<void>;
  /** Calls `listener` for each message on `channel`; returns a function that stops it. */
  subscribe(channel: string, listener: (message: string) => void): () => void;
  /**
   * True while messages other instances publish reach this one (or no other instance can exist: no
   * shared store is configured). While false, anything kept because "another instance would tell us
   * when it changes" must not be trusted.
   */
  live(): boolean;
  /**
   * Calls `listener` each time delivery becomes live again after a gap, when messages may have been
   * missed: whatever was kept on the strength of those messages must be dropped. Returns a function that stops it.
   */
  onResync(listener: () => void): () => void;
}

/** A stored user account. `passwordHash` never leaves the services layer. */
export interface User {
  username: string;
  isAdmin: boolean;
  /** bcrypt hash of the password. */
  passwordHash: string;
  createdAt: Date;
  updatedAt: Date;
}

/** Where user accounts live. Throws `UsernameTakenError` / `UserNotFoundError` as documented. */
export interface UserStore {
  /** The user named `username`, or `undefined` when there is none. */
  findByUsername(username: string): Promise<User | undefined>;
  /** Every user, ordered by username. */
  list(): Promise<User[]>;
  /** How many users exist; with `{ admins: true }` only administrators. */
  count(filter?: { admins?: boolean }): Promise<number>;
  /** Creates a user. Throws `UsernameTakenError` when the name exists. */
  create(input: { username: string; passwordHash: string; isAdmin: boolean }): Promise<User>;
  /** Replaces the password hash. Throws `UserNotFoundError` when there is no such user. */
  updatePasswordHash(username: string, passwordHash: string): Promise<User>;
  /**
   * Deletes a user. Throws `UserNotFoundError` when there is none, and `LastAdminError` when it is
   * the last administrator (checked in the same transaction as the delete).
   */
  delete(username: string): Promise<void>;
  /** True when the database answers a trivial query. */
  ping(): Promise<boolean>;
}

/** Kinds of instrument a symbol may name. */
export type InstrumentType = components['schemas']['InstrumentType'];
/** An instrument's market now: regular session, closed, or the extended sessions around it. */
export type MarketState = components['schemas']['MarketState'];
/** Historical candles of one symbol, with dividends and splits, exactly as the API spells them. */
export type History = components['schemas']['History'];
export type Candle = components['schemas']['Candle'];
export type HistoryInterval = components['schemas']['HistoryInterval'];
export type HistoryRange = components['schemas']['HistoryRange'];
/** One instrument found by a search. */
export type SearchResult = components['schemas']['SearchResult'];

/**
 * What history to fetch. `symbol` is canonical (upper-case). Exactly one of `range` and
 * `startMs`/`endMs` is set; the service has already checked the rules an upstream cannot serve
 * (1m beyond 7 days, intraday beyond 60 days, more than 5,000 candles).
 */
export interface HistoryQuery {
  symbol: string;
  interval: HistoryInterval;
  /** A named period ending now. */
  range?: HistoryRange;
  /** Start of the window, epoch milliseconds, inclusive. */
  startMs?: number;
  /** End of the window, epoch milliseconds, exclusive. */
  endMs?: number;
}

/**
 * A source of market data. Symbols handed in are canonical (upper-case, `[A-Z0-9^.=-]{1,32}`).
 * "Unknown symbol" is an answer (`undefined`), never an error; every upstream failure (error status,
 * timeout, refused connection, unparsable body, throttling) is a `DataSourceError`.
 */
export interface MarketDataProvider {
  /** Short name reported as `source` (`simulated`, `yahoo`). */
  readonly name: string;
  /** The current quote of `symbol`, or `undefined` when the provider does not know it. */
  getQuote(symbol: string): Promise<Quote | undefined>;
  /** Candles of `query.symbol` in ascending time, or `undefined` when the provider does not know it. */
  getHistory(query: HistoryQuery): Promise<History | undefined>;
  /** Instruments matching `query` (1 to 64 characters), best first, at most `limit` (1 to 25); `[]` for none. */
  search(query: string, limit: number): Promise<SearchResult[]>;
  /**
   * For a provider that routes each read among others (the provider router): the name of the provider
   * that gave `answer` (an object or list one of the methods above resolved to); `undefined` when unknown.
   */
  sourceOf?(answer: object): string | undefined;
}

/** Asset classes a provider may serve. A plain ticker is `equity` (an ETF's symbol looks the same). */
export type AssetClass = 'equity' | 'etf' | 'index' | 'fx' | 'crypto';

/**
 * How far back a provider keeps bars of one interval, in days; `null` when it keeps them as far back
 * as the instrument goes (or documents no bound).
 */
export type RetentionDays = number | null;

/**
 * What a provider can serve, per asset class. An asset class missing from a list, or an interval
 * missing from `history[assetClass]`, is not served: the router skips the provider for it.
 */
export interface ProviderCapabilities {
  /** Asset classes whose current quote it serves. */
  quote: readonly AssetClass[];
  /** Per asset class, the history intervals it serves and each interval's retention. */
  history: Readonly<Partial<Record<AssetClass, Readonly<Partial<Record<HistoryInterval, RetentionDays>>>>>>;
  /** Asset classes its search finds. */
  search: readonly AssetClass[];
  /** Asset classes whose history carries dividends and splits (`events`); elsewhere `events` is empty. */
  events: readonly AssetClass[];
}

/** A Yahoo-style symbol as one provider spells it. */
export interface ProviderSymbol {
  /** The provider's own code (`I:SPX`, `X:BTCUSD`, `btcusd`, `EURUSD`). */
  code: string;
  assetClass: AssetClass;
}

/** One key of a provider's pool. `value` goes to the provider and nowhere else (never a log, error or answer). */
export interface ProviderKey {
  /** Position in the pool (0-based, the order of `<P>_API_KEYS`): what logs and errors name. */
  index: number;
  value: string;
}

/** Why a key was set aside. */
export type KeySetAsideReason = 'unauthorized' | 'limit_reached';

/** A key's state, fit to show an administrator. */
export interface ProviderKeyStatus {
  index: number;
  /** The key's last four characters. */
  lastFour: string;
  state: 'active' | 'set_aside';
  reason?: KeySetAsideReason;
  /** Epoch ms when a key set aside comes back by itself (a daily limit resets); absent = until restart. */
  untilMs?: number;
  /** Keys taken from this pool by this instance since the last UTC midnight. */
  usedToday: number;
}

/**
 * The API keys of one provider, used in turn. An adapter takes one key per upstream call; the router
 * sets keys aside (a 401/403 on that key, a daily limit) and may wrap the pool to count fleet-wide
 * budgets before handing a key out.
 */
export interface ProviderKeyPool {
  /** How many keys the pool holds, active or not. */
  readonly size: number;
  /**
   * The key for the next call, or `undefined` when every key is set aside (the adapter then fails
   * with `unauthorized` or `limit_reached`, whichever set the last key aside).
   */
  take(): Promise<ProviderKey | undefined>;
  /** Stops handing out key `index` (until `untilMs`, epoch ms, when given). */
  setAside(index: number, reason: KeySetAsideReason, untilMs?: number): void;
  /** Every key's state, in pool order. */
  status(): ProviderKeyStatus[];
  /** Why the pool has no key to give (`undefined` while some key is active). */
  exhaustedReason(): KeySetAsideReason | undefined;
}

/**
 * A market-data provider the router can choose among: it says what it serves and which symbols it
 * can express. Failures are `UpstreamFailureError`s (`domain/upstream-failure.ts`) with a reason
 * from a closed set; "unknown symbol" stays `undefined`.
 */
export interface ProviderAdapter extends MarketDataProvider {
  readonly capabilities: ProviderCapabilities;
  /** The provider's spelling of the Yahoo-style `symbol`, or `undefined` when it cannot express it (skip it). */
  express(symbol: string): ProviderSymbol | undefined;
  /** Its key pool, empty for a provider that needs no key. */
  readonly keys: ProviderKeyPool;
}

/** A provider's circuit breaker: `closed` lets calls through, `open` fails fast, `half-open` lets one probe through. */
export type ProviderBreakerState = 'closed' | 'open' | 'half-open';

/** One provider's health, known without I/O. */
export interface ProviderHealth {
  /** False after a failed call until the next success (true before the first call only for a local provider). */
  healthy: boolean;
  /** When its last call succeeded (epoch ms); `null` when none has. */
  lastSuccessAtMs: number | null;
  /** Why its last call failed (never a key); `null` after a success. */
  lastError: string | null;
}

/** What one provider may still be sent, read from the shared counters. */
export interface ProviderUsage {
  /** When the fleet-wide pause after its 429 ends (epoch ms); 0 when none is in force. */
  pausedUntilMs: number;
  /** Calls made this UTC day with all its keys, fleet-wide (0 for a keyless provider). */
  usedToday: number;
  /** Its keys in pool order, `usedToday` counted fleet-wide. */
  keys: ProviderKeyStatus[];
}

/**
 * One provider of the router's chain, built by the infrastructure: the adapter (what it serves, how it
 * spells symbols, its keys) whose calls go through its breaker, its fleet-wide budget, its concurrency
 * cap and its 429 pause. A call held back without reaching the provider rejects with
 * `UpstreamHeldBackError` (domain/upstream-failure.ts) at once.
 */
export interface ProviderLink extends ProviderAdapter {
  /** Its fleet-wide requests per second and calls per key per UTC day (0 = no limit). */
  readonly budget: { maxRps: number; dailyLimit: number };
  /** The breaker's state now, without I/O. */
  readonly breakerState: ProviderBreakerState;
  health(): ProviderHealth;
  /** Its pause and its keys' use, fleet-wide. Never rejects (the shared counters fall back to memory). */
  usage(): Promise<ProviderUsage>;
  /** Stops its timers; later calls reject. */
  close(): void;
}

/** Who is calling: a user logged in with a token, or the service account of an API key. */
export interface Principal {
  username: string;
  isAdmin: boolean;
  kind: 'user' | 'api-key';
  /**
   * Stable quota and audit identity: `user:<username>`, `key:<keyId>` for a managed key,
   * `key:static:<first 8 hex of sha256(key)>` for a key from API_KEYS.
   */
  id?: string;
  /** A managed key's own requests-per-minute limit; absent means the default for its kind. */
  rateLimitPerMinute?: number;
}

/**
 * How a credential check ends, exactly once: with the principal, or with why there is none. A check
 * that needs no I/O calls it before returning (no promise, no later turn of the event loop).
 */
export type AuthCallback = (err: unknown, principal?: Principal) => void;

/** What a managed API key may do: `read` calls the data endpoints, `admin` is an administrator. */
export type ApiKeyRole = 'read' | 'admin';

/** A stored managed API key. Only the SHA-256 digest of the secret is kept; the secret itself never is. */
export interface ApiKeyRecord {
  /** UUID; appears in principals (`key:<id>`), lists and the revoke path. */
  id: string;
  name: string;
  role: ApiKeyRole;
  /** Lowercase hex SHA-256 of the whole key (`mds_...`). Never leaves the services layer. */
  digest: string;
  rateLimitPerMinute: number | null;
  expiresAt: Date | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  /** Actor id of the creator (`user:admin`, `cli`, ...). */
  createdBy: string;
}

/** Where managed API keys live. */
export interface ApiKeyStore {
  /** Stores a new key. The id and digest are unique (random UUID, digest of 256 random bits). */
  create(record: ApiKeyRecord): Promise<ApiKeyRecord>;
  /** The key whose digest is `digest`, or `undefined` (revoked keys are gone). */
  findByDigest(digest: string): Promise<ApiKeyRecord | undefined>;
  /** Every key, newest first. */
  list(): Promise<ApiKeyRecord[]>;
  /** Removes the key; resolves to false when there was none with that id. */
  delete(id: string): Promise<boolean>;
  /**
   * Sets `lastUsedAt` to `at` unless it is already later than `at - minIntervalMs`, so instances
   * sharing the database write it at most once per interval. Resolves to true when it wrote.
   */
  touchLastUsed(id: string, at: Date, minIntervalMs: number): Promise<boolean>;
}

/** Turns a presented managed key into the caller it stands for. */
export interface ApiKeyVerifier {
  /**
   * The principal of `key` when it is a managed key that exists and has not expired, `undefined` when
   * no such key exists (never created, or revoked). Throws `InvalidCredentialsError` for an expired
   * key, and any other error when the store cannot answer.
   */
  verify(key: string): Promise<Principal | undefined>;
}

/** Password hashing and the password rules, as the accounts service needs them. */
export interface Passwords {
  /** A one-way hash of `password`; does not check the rules. */
  hash(password: string): Promise<string>;
  /** True when `password` matches `hash`. */
  verify(password: string, hash: string): Promise<boolean>;
  /** Costs what `verify` costs and resolves to false: the path for an unknown user. */
  verifyUnknownUser(password: string): Promise<false>;
  /** Warms up whatever `verifyUnknownUser` needs, so the first call does not pay for it. */
  dummyHash(): Promise<string>;
  /** Throws `InvalidRequestError` (one violation at `path`) unless `password` follows the rules. */
  assertAcceptable(password: string, path: string): void;
}

/** An access token just issued. */
export interface IssuedAccessToken {
  token: string;
  /** Seconds from issue to expiry. */
  expiresInSeconds: number;
}

/** Issues access tokens for users. */
export interface TokenIssuer {
  /** A token for `user`, valid for `options.ttlMs` (default: the issuer's own lifetime) and tied to its password hash. */
  sign(user: Pick<User, 'username' | 'isAdmin' | 'passwordHash'>, options?: { ttlMs?: number }): IssuedAccessToken;
}

/** One login attempt's failure slot, taken before the password is checked. */
export interface LoginSlot {
  /** The password was right: the slot is given back and the username's failures from that address forgotten. */
  succeeded(): Promise<void>;
  /** The password was never checked (hashing was busy): the slot is given back. */
  abandoned(): Promise<void>;
}

/** Counts failed logins before the work, and refuses attempts while an address (for a username, or at all) is blocked. */
export interface LoginAttempts {
  /**
   * Takes a failure slot for `username` from `ip` (an address group), kept as a failure unless given
   * back; may wait first (a username failing from elsewhere). Throws `TooManyRequestsError` (with
   * `retryAfterSeconds`) while that address is blocked.
   */
  begin(username: string, ip: string): Promise<LoginSlot>;
}

/** Where a security-relevant action came from, for the audit log. */
export interface ActionContext {
  /** Actor id: a principal's `id` (`user:admin`, `key:<id>`), `cli`, or `anonymous`. */
  actor: string;
  /** Client address, when the action came over HTTP. */
  ip?: string | undefined;
  /** The request id (`X-Request-Id`), when the action came over HTTP. */
  requestId?: string | undefined;
}

/** One security event. Never carries a password, hash, token or key. */
export interface AuditEvent {
  /** What happened, dotted: `login.succeeded`, `api_key.revoked`, `cache.flushed`, ... */
  action: string;
  /** What it happened to (`user:bob`, `key:<id>`, `cache`). */
  target: string;
  /** Extra non-secret facts (`reason`, `role`, `removed`). */
  details?: Record<string, string | number | boolean | null>;
}

/** The audit trail of security events. */
export interface AuditLog {
  /** Records `event` done by `context.actor`; never throws. */
  record(event: AuditEvent, context: ActionContext): void;
}

/** Where one request stands against its caller's quota after it was counted. */
export interface QuotaUsage {
  /** False when this request is over the quota and must be refused. */
  allowed: boolean;
  /** Requests still allowed in the current window (0 once the quota is used up). */
  remaining: number;
  /** Milliseconds until the current window ends and the quota is whole again. */
  resetMs: number;
}

/**
 * Counts requests per caller in fixed windows, shared by every instance where the adapter can.
 * Never rejects for a failing store: it keeps counting somewhere (process memory at worst).
 */
export interface RequestCounter {
  /** The window length in milliseconds. */
  readonly windowMs: number;
  /** Counts `points` requests (default 1) of `key` against `limit` requests per window. */
  consume(key: string, limit: number, points?: number): Promise<QuotaUsage>;
  /**
   * Counts one request of `key` at once when this instance can answer without asking the shared
   * counter (an allowed request far from the limit); `undefined` when it cannot, and then nothing
   * was counted: call `consume`.
   */
  consumeNow?(key: string, limit: number): QuotaUsage | undefined;
}

/** How a shared counter counts: at most `limit` points per window of one key. */
export interface CounterWindow {
  /** Points allowed per window, a whole number of at least 1. */
  limit: number;
  /**
   * A fixed window of this many ms (whole seconds) that starts with the key's first point; or
   * `utc-day`, the UTC calendar day, for keys that name their day (see `keys.upstream.daily`).
   */
  windowMs: number | 'utc-day';
  /**
   * When a point reaches the limit, the key stays used up for this many ms from then on, whatever is
   * left of its window (login throttling blocks for longer than it counts). Absent: until the window ends.
   */
  blockMs?: number;
}

/** A key's count in its current window. */
export interface CounterUsage {
  /** False when the points just counted went past the limit (they are refused). */
  allowed: boolean;
  /** Points counted in the window so far, refused ones included. */
  used: number;
  /** Points still allowed in the window (0 once the limit is reached). */
  remaining: number;
  /** Milliseconds until the window (or block) ends and the count starts again; 0 for an unknown key. */
  resetMs: number;
}

/**
 * Counters and instants every instance shares (in Redis), or this instance keeps alone (in memory)
 * while the shared store is away: request quotas, login throttling, upstream budgets and pauses.
 * Keys come from `key-space.ts`. No method waits on a failing store longer than its command timeout,
 * and none rejects for one: each falls back to memory. The memory answers are this instance's alone.
 */
export interface SharedCounters {
  /** Counts `points` (default 1) of `key` in its window, and says whether they fit under the limit. */
  consume(key: string, window: CounterWindow, points?: number): Promise<CounterUsage>;
  /** The key's count without adding to it (`used` 0 when the key has no count); `allowed` says whether one more point fits. */
  peek(key: string, window: CounterWindow): Promise<CounterUsage>;
  /** Forgets the key's count (a block included). */
  reset(key: string, window: CounterWindow): Promise<void>;
  /** Takes back `points` (default 1) counted by `consume` (a block already started stays). */
  release(key: string, window: CounterWindow, points?: number): Promise<void>;
  /** The end (epoch ms) of the pause recorded under `key`, or 0 when none is in force. */
  pausedUntil(key: string): Promise<number>;
  /** Records a pause until `untilMs` (epoch ms) under `key`; never shortens a longer one already recorded. */
  pauseUntil(key: string, untilMs: number): Promise<void>;
}

/** What a cache read answered with: the cached entry, a fresh fetch, or an expired copy standing in for a failed upstream. */
export type CacheResult = 'hit' | 'miss' | 'stale';

/**
 * How a call to the upstream provider ended: answered, failed, abandoned by the circuit breaker's
 * timeout, or refused by the open breaker without being sent.
 */
export type UpstreamOutcome = 'success' | 'failure' | 'timeout' | 'rejected';

/** The route of a request that matched no operation of the contract: one fixed label, never the raw URL. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * Operational measurements. Every method is cheap, synchronous and never throws, so callers on the
 * hot path record without awaiting or guarding. Label values must come from a small fixed set
 * (route templates, policy names): never a raw URL, a username or a key.
 */
export interface Metrics {
  /** One HTTP response: `route` is the contract's path template, or `UNMATCHED_ROUTE`, `seconds` from arrival to the last byte handed to the socket. */
  httpRequest(method: string, route: string, status: number, seconds: number): void;
  /** One read of a cached representation; `kind` names what was read (`indices`, ...). */
  cacheRequest(kind: string, result: CacheResult): void;
  /** One call to the upstream provider and how long it took, in seconds. */
  upstreamRequest(outcome: UpstreamOutcome, seconds: number): void;
  /**
   * One read the provider router put to `provider` and how it ended: `success`, `unknown` (it does not
   * know the symbol), or the reason it could not answer (`timeout`, `throttled`, `breaker_open`, ...).
   */
  upstreamCall(provider: string, outcome: string): void;
  /** A read `from` could not answer moved on to `to` (`none` when no provider was left). */
  failover(from: string, to: string): void;
  /** One request refused by the rate limit named `policy` (`login`, ...). */
  rateLimitRejected(policy: string): void;
  /** A stream client connected (`+1`) or went away (`-1`). */
  streamClients(delta: number): void;
  /** One event written to a stream client. */
  streamEvent(): void;
}

/** Metrics that record nothing: the default of every service, and what runs when metrics are off. */
export const NO_METRICS: Metrics = Object.freeze({
  httpRequest() {},
  cacheRequest() {},
  upstreamRequest() {},
  upstreamCall() {},
  failover() {},
  rateLimitRejected() {},
  streamClients() {},
  streamEvent() {},
});

/** The text a scrape answers and its content type. */
export interface MetricsSource {
  contentType: string;
  /** The metrics in the Prometheus text format. Rejects when a cluster worker does not answer in time. */
  render(): Promise<string>;
}

/** One stored bar: its start (epoch ms, UTC), prices as the provider gave them, and volume when known. */
export interface StoredCandle {
  timeMs: number;
  open: number;
  high: number;
  low: number;
  close: number;
  /** Close adjusted for splits and dividends, as the provider gave it; null when it gave none. */
  adjClose: number | null;
  /** Null where the instrument has no volume (indices, some FX). */
  volume: number | null;
}

/** A dividend (amount per share) or a split (numerator for denominator) effective at `timeMs` (ex-date, UTC). */
export type CorporateAction =
  | { kind: 'dividend'; timeMs: number; amount: number }
  | { kind: 'split'; timeMs: number; numerator: number; denominator: number };

/** A half-open span of time, epoch ms: `startMs` included, `endMs` excluded. */
export interface TimeSpan {
  startMs: number;
  endMs: number;
}

/** Who gave stored data, and when. */
export interface Provenance {
  provider: string;
  fetchedAtMs: number;
}

/**
 * Candles and corporate actions kept in the database, so history is fetched from an upstream once.
 * A candle's identity is (symbol, interval, bar start): writing the same bar again replaces it.
 * "Covered" spans record what was asked of an upstream and answered, so a bar the upstream does not
 * have (inside a covered span, absent from the store) is known to be absent and is not asked again.
 * Every method throws an `AppError` (`DATABASE_ERROR`, `DATABASE_NOT_INITIALIZED`) when the database fails.
 */
export interface CandleStore {
  /** Writes `candles` of one symbol and interval in bulk (in one transaction per batch); resolves to how many were written. */
  putCandles(symbol: string, interval: HistoryInterval, candles: readonly StoredCandle[], source: Provenance): Promise<number>;
  /** Candles with `startMs <= timeMs < endMs`, oldest first, at most `limit` (default: all). */
  getCandles(symbol: string, interval: HistoryInterval, span: TimeSpan, limit?: number): Promise<StoredCandle[]>;
  /** How many candles `getCandles` would return for `span`. */
  countCandles(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<number>;
  /** Drops the candles of `symbol` (every interval, or one) and their coverage, so they are fetched again; resolves to how many candles went. */
  deleteCandles(symbol: string, interval?: HistoryInterval): Promise<number>;
  /** Records that `span` was asked of an upstream and answered (merged with the spans it touches). */
  markCovered(symbol: string, interval: HistoryInterval, span: TimeSpan, source: Provenance): Promise<void>;
  /** The covered spans that overlap `span`, merged and clipped to it, oldest first. */
  coverage(symbol: string, interval: HistoryInterval, span: TimeSpan): Promise<TimeSpan[]>;
  /** Writes corporate actions of `symbol` (same kind and time replaces); resolves to how many were written. */
  putActions(symbol: string, actions: readonly CorporateAction[], source: Provenance): Promise<number>;
  /** The corporate actions of `symbol` in `span`, oldest first. */
  getActions(symbol: string, span: TimeSpan): Promise<CorporateAction[]>;
  /**
   * Re-bases the stored bars of `symbol` (every interval) that start before `barsBeforeMs` and were
   * fetched before `fetchedBeforeMs` (bars fetched later already came on the new basis): prices times
   * `priceFactor`, volume divided by it (a 4-for-1 split is 0.25). Resolves to how many bars changed.
   */
  rescale(symbol: string, bars: { barsBeforeMs: number; fetchedBeforeMs: number }, priceFactor: number): Promise<number>;
  /** Records the currency and exchange time zone of `symbol`, which answers from the store carry. */
  putInstrument(symbol: string, info: InstrumentInfo, source: Provenance): Promise<void>;
  /** What `putInstrument` recorded for `symbol`, or `undefined`. */
  getInstrument(symbol: string): Promise<InstrumentInfo | undefined>;
  /** How many candles are stored and the bytes the candle tables and their indexes take on disk. */
  footprint(): Promise<{ candles: number; bytes: number }>;
}

/** What a history answer says of its instrument besides the bars. */
export interface InstrumentInfo {
  currency: string;
  /** IANA time zone of the exchange. */
  timezone: string;
}

/** Where a backfill job stands. */
export type HistoryJobState = 'queued' | 'running' | 'done' | 'failed';

/** A backfill of stored history: symbols, one interval, from `sinceMs` to when it runs. */
export interface HistoryJob {
  id: string;
  symbols: string[];
  interval: HistoryInterval;
  sinceMs: number;
  state: HistoryJobState;
  /** How many symbols are finished (stored, or failed). */
  doneSymbols: number;
  /** Bars stored by this job so far. */
  candles: number;
  /** The symbol being fetched now; null when none. */
  currentSymbol: string | null;
  /** Symbols that could not be backfilled, with why. */
  failures: Array<{ symbol: string; error: string }>;
  createdBy: string;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * Backfill jobs, shared by every instance through the database, so any instance answers for a job
 * and one whose runner died is taken over. Throws `AppError` when the database fails.
 */
export interface HistoryJobStore {
  create(job: HistoryJob): Promise<HistoryJob>;
  /** The job, or `undefined`. */
  get(id: string): Promise<HistoryJob | undefined>;
  /**
   * Takes the job for `owner` when it is queued, or running with a heartbeat before `staleBefore`
   * (its runner is gone); resolves to true when this call took it.
   */
  claim(id: string, owner: string, at: Date, staleBefore: Date): Promise<boolean>;
  /** Saves progress and the heartbeat of the owner's run. */
  update(id: string, progress: Pick<HistoryJob, 'state' | 'doneSymbols' | 'candles' | 'currentSymbol' | 'failures'>, at: Date): Promise<void>;
  /** Ids of jobs that are queued, or running with a heartbeat before `staleBefore`. */
  unfinished(staleBefore: Date): Promise<string[]>;
}

/** Who a usage row counts: a managed or static API key (by id), or a user with a token (by name). */
export type UsageCallerKind = 'api-key' | 'user';

/** One caller's requests on one UTC day. */
export interface UsageRow {
  /** `YYYY-MM-DD`, UTC. */
  day: string;
  callerKind: UsageCallerKind;
  /** A managed key's id, `static:<digest>` for a key from API_KEYS, or a username. */
  caller: string;
  /** Requests counted against the caller's quota, refused ones included. */
  requests: number;
  /** Requests refused with 429. */
  rateLimited: number;
}

/**
 * Counts the requests of authenticated callers for the usage report. Called on the hot path: it
 * must be synchronous, cheap and never throw (counts are batched and written later).
 */
export interface UsageRecorder {
  /** One request by `principal`; `limited` when it was refused for its quota (429). */
  record(principal: Principal, limited: boolean): void;
}

/** A recorder that counts nothing (usage metering off, tests of other parts). */
export const NO_USAGE: UsageRecorder = { record: () => undefined };

/** Daily usage totals in the database, shared by every instance. Throws `AppError` when the database fails. */
export interface UsageStore {
  /**
   * Raises each row's counts to at least the given totals, creating missing rows. Totals only grow
   * within a day, so any instance may write the fleet-wide totals it read, in any order.
   */
  raiseTotals(rows: readonly UsageRow[]): Promise<void>;
  /** Every row of `sinceDay` (`YYYY-MM-DD`) and later, newest day first, then by caller. */
  list(sinceDay: string): Promise<UsageRow[]>;
  /** Deletes the rows of days before `day`; resolves to how many went. */
  deleteBefore(day: string): Promise<number>;
}
