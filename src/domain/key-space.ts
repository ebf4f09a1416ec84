/**
 * The key space: every key and channel the service writes to Redis (and to its memory stand-ins),
 * built here and nowhere else, so a reader sees the whole layout at once and a version bump is one line.
 *
 * Every key touched by one Redis command or script stands alone today (each command and script names
 * one key), so no key carries a hash tag and any Redis Cluster slot may hold it. Whoever adds a command
 * or script over several keys must build those keys here with one shared tag (`mds:v1:{<group>}:...`),
 * or the cluster refuses the command (CROSSSLOT).
 */

/**
 * What every key and channel of the service starts with. The version changes when a stored value
 * changes shape, so instances of an older release never read what a newer one wrote.
 */
export const KEY_PREFIX = 'mds:v1:';

/** Where the failed-login counters of one kind live: `mds:v1:throttle:user:<name>`, `...:ip:<address group>`. */
export const THROTTLE_KEY_PREFIX = `${KEY_PREFIX}throttle:`;

/** Where the request-quota counters live: `mds:v1:ratelimit:<caller>`. */
export const QUOTA_KEY_PREFIX = `${KEY_PREFIX}ratelimit:`;

/** Where every upstream budget and pause lives: `mds:v1:upstream:<provider>:...`. */
export const UPSTREAM_KEY_PREFIX = `${KEY_PREFIX}upstream:`;

/** An upstream quota day: `YYYY-MM-DD` of the UTC day holding `ms`. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Builders of every key. Parameters are inserted as given: callers pass canonical values. */
export const keys = {
  /**
   * A cached representation: `mds:v1:<kind>:<namespace>:<params>` (`mds:v1:quote:yahoo:AAPL`), the
   * namespace being the provider, so instances of different providers on one Redis stay apart.
   */
  representation: (kind: string, namespace: string, params: string): string => `${KEY_PREFIX}${kind}:${namespace}:${params}`,
  /** The first part of every representation of `kind` (what a flush removes). */
  representationsOf: (kind: string): string => `${KEY_PREFIX}${kind}:`,
  /** The kind named by a representation key (`quote` of `mds:v1:quote:yahoo:AAPL`). */
  kindOf: (representationKey: string): string => representationKey.slice(KEY_PREFIX.length, representationKey.indexOf(':', KEY_PREFIX.length)),
  /** The expired copy kept for stale-if-error: `mds:v1:stale:<kind>:<namespace>:<params>`. */
  stale: (representationKey: string): string => `${KEY_PREFIX}stale:${representationKey.slice(KEY_PREFIX.length)}`,
  /** The first part of every stale copy of `kind`. */
  staleOf: (kind: string): string => `${KEY_PREFIX}stale:${kind}:`,
  /** The single-flight lock of one fill: `mds:v1:lock:<kind>:<namespace>:<params>`. */
  fillLock: (representationKey: string): string => `${KEY_PREFIX}lock:${representationKey.slice(KEY_PREFIX.length)}`,
  /**
   * The lock one run of a scheduled job holds: `mds:v1:lock:job:<provider>:<job>`, one per provider so
   * instances of another provider on the same Redis refresh their own data.
   */
  jobLock: (provider: string, job: string): string => `${KEY_PREFIX}lock:job:${provider}:${job}`,
  /** The lease of the one push connection to `upstream` for the fleet of a provider: `mds:v1:lock:live:<provider>:<upstream>`. */
  liveLease: (provider: string, upstream: string): string => `${KEY_PREFIX}lock:live:${provider}:${upstream}`,
  /**
   * One bucket of the symbols a provider does not know: `mds:v1:unknown:<provider>:<bucket>`, a fixed
   * number of buckets per provider whatever the number of symbols asked for.
   */
  unknownSymbols: (provider: string, bucket: number): string => `${KEY_PREFIX}unknown:${provider}:${bucket}`,
  /** The first part of every bucket of a provider's unknown symbols (what a flush removes). */
  unknownSymbolsOf: (provider: string): string => `${KEY_PREFIX}unknown:${provider}:`,
  /** A symbol's last change as the live streams saw it: `mds:v1:quote-version:<provider>:<symbol>`. */
  quoteVersion: (provider: string, symbol: string): string => `${KEY_PREFIX}quote-version:${provider}:${symbol}`,
  /**
   * The request quota of one caller in the current window: `mds:v1:ratelimit:<caller>`, the caller
   * being `ip:<address group>`, `user:<name>` or an API key's id (`key:...`).
   */
  quota: (caller: string): string => `${QUOTA_KEY_PREFIX}${caller}`,
  /**
   * One caller's requests (`what` = `requests`), quota points (`points`) or quota refusals (`limited`)
   * on one UTC day, for the usage report: `mds:v1:usage:<YYYY-MM-DD>:<api-key|user>:<caller>:<what>`.
   */
  usage: (day: string, callerKind: string, caller: string, what: 'requests' | 'points' | 'limited'): string => `${KEY_PREFIX}usage:${day}:${callerKind}:${caller}:${what}`,
  /**
   * One caller's actions (`what` = `requests`), quota points (`points`) or quota refusals (`limited`)
   * of one operation through one door on one UTC day:
   * `mds:v1:usage-op:<YYYY-MM-DD>:<door>:<operation>:<what>:<api-key|user>:<caller>`. The operation is
   * one of a fixed set (domain/usage-operations.ts), so a caller has a bounded number of these a day;
   * the caller comes last, so a name holding `:` can never be read as another key's door or operation.
   */
  usageOperation: (day: string, door: string, operation: string, what: 'requests' | 'points' | 'limited', callerKind: string, caller: string): string =>
    `${KEY_PREFIX}usage-op:${day}:${door}:${operation}:${what}:${callerKind}:${caller}`,
  /** Failed logins. */
  throttle: {
    /** Of one username: `mds:v1:throttle:user:<name>`. */
    user: (username: string): string => `${THROTTLE_KEY_PREFIX}user:${username}`,
    /** Of one username from one address group: `mds:v1:throttle:pair:<address group>:<name>`. */
    pair: (username: string, addressGroup: string): string => `${THROTTLE_KEY_PREFIX}pair:${addressGroup}:${username}`,
    /** From one client address (an IPv6 address's /64): `mds:v1:throttle:ip:<address group>`. */
    ip: (addressGroup: string): string => `${THROTTLE_KEY_PREFIX}ip:${addressGroup}`,
  },
  /** What one upstream provider may still be sent, fleet-wide. */
  upstream: {
    /** Calls started in one epoch second: `mds:v1:upstream:<provider>:rps:<epoch second>`. */
    rps: (provider: string, epochSecond: number): string => `${UPSTREAM_KEY_PREFIX}${provider}:rps:${epochSecond}`,
    /** When the pause after the provider's 429 ends (epoch ms): `mds:v1:upstream:<provider>:pause-until`. */
    pauseUntil: (provider: string): string => `${UPSTREAM_KEY_PREFIX}${provider}:pause-until`,
    /**
     * Calls made with one account (API key) in one UTC day: `mds:v1:upstream:<provider>:daily:<account>:<YYYY-MM-DD>`.
     * `account` names the key without revealing it (its last four characters, or a digest).
     */
    daily: (provider: string, account: string, day: string): string => `${UPSTREAM_KEY_PREFIX}${provider}:daily:${account}:${day}`,
    /**
     * Background calls (index refresh, keep-current, backfill) in one budget window (`w<epoch s>`) or
     * one UTC day (`d<YYYY-MM-DD>`): `mds:v1:upstream:<provider>:background:<window>`.
     */
    background: (provider: string, window: string): string => `${UPSTREAM_KEY_PREFIX}${provider}:background:${window}`,
  },
} as const;

/** Builders of every publish/subscribe channel. */
export const channels = {
  /** Tells every instance to drop its in-process copies of cached representations (a flush). */
  invalidate: `${KEY_PREFIX}invalidate`,
  /**
   * The fleet-wide "identity changed" event (domain/identity.ts): carries the identity (`user:<name>`,
   * `key:<id>`) of a user whose record changed (created, deleted, new password) or of a managed API key
   * that was revoked. Every instance drops what it remembers of that identity and closes its open
   * streams and sessions.
   */
  identityChanged: `${KEY_PREFIX}auth:identity-changed`,
  /** Quote changes seen by the instances of one provider: `mds:v1:quote-events:<provider>`. */
  quoteEvents: (provider: string): string => `${KEY_PREFIX}quote-events:${provider}`,
  /** Each instance's subscribed symbols and each push leader's state: `mds:v1:live:<provider>`. */
  live: (provider: string): string => `${KEY_PREFIX}live:${provider}`,
} as const;
