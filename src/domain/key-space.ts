/**
 * The key space: every key and channel the service writes to Redis (and to its memory stand-ins),
 * built here and nowhere else, so a reader sees the whole layout at once and a version bump is one line.
 *
 * Every key and channel starts with `mds:v<N>:`, N being the format version of its family. A fleet
 * upgrades one instance at a time, so two releases share one Redis for a while; each family is one of:
 * - versioned (`FORMATS`): what is stored or sent there is read by the release that wrote it only. Its
 *   version goes up by one with any change of the value's or the message's shape (or of its meaning):
 *   the release before then never sees the new entries, nor the new one the old, and each treats the
 *   absence as a miss (a cache fill, a poll). Never reuse a number.
 * - shared on purpose (`SHARED_PREFIX`, `mds:v1:` for good): both releases must count and honour the
 *   same thing (a caller's quota, a revocation, the upstream's budget, the one lock of a job). Its
 *   value may only change in a way both releases read alike (a new key beside it is the usual way);
 *   anything else is a versioned family in disguise.
 * docs/operations.md ("Upgrading one instance at a time") has the table of both.
 *
 * Every key touched by one Redis command or script stands alone today (each command and script names
 * one key), so no key carries a hash tag and any Redis Cluster slot may hold it. Whoever adds a command
 * or script over several keys must build those keys here with one shared tag (`mds:v1:{<group>}:...`),
 * or the cluster refuses the command (CROSSSLOT).
 */

/**
 * The format version of each versioned family (above). Bump one when its stored value or message
 * changes; the test of the rolling upgrade (test/e2e/rolling-upgrade.test.ts) runs the release before
 * beside this one on one Redis.
 */
export const FORMATS = {
  /**
   * Cached representations (services/cache/cache-entry.ts's encoding: a typed header with the grace of
   * stale-if-error, then the body) and their fill locks: a lock is held while its entry is filled, so it
   * goes with the entry's format. Format 1 kept the stale copy under a second key (`stale:`) and told
   * entries apart by their first byte; format 2 has one key per entry, the grace a field of it.
   */
  representation: 2,
  /** The buckets of symbols a provider does not know (JSON `{member: expiry ms}`). */
  unknownSymbols: 1,
  /**
   * Quote changes: each symbol's record (JSON `{v, f}`, `f` a fingerprint of the quote) and the quote
   * events (JSON `{symbol, version, quote}`, the quote as its JSON text: services/stream/fleet.ts), in
   * the bus's typed envelope (infra/cache/cache-bus.ts). 1: the events were `{s, v, q}` with the quote
   * as an object, sent as `<instance id>:<message>`.
   */
  quoteChanges: 2,
  /**
   * The live channel's announcements (JSON `{i, s, u}`: instance, symbols, connected upstreams).
   * Format 2: in the bus's typed envelope.
   */
  liveAnnouncements: 2,
  /**
   * Live bars (DESIGN 26): each symbol's builder state (bar-builder.ts `SymbolBars` JSON) and the bar
   * events (a LiveBar's JSON, in the bus's typed envelope; no release before this one sent them).
   */
  liveBars: 1,
} as const;

/** What every key and channel shared across releases starts with: never changes (the header above says why). */
export const SHARED_PREFIX = 'mds:v1:';

/** What the keys of a versioned family of format `version` start with. */
function versioned(version: number): string {
  return `mds:v${version}:`;
}

/**
 * What the keys of a versioned family start with in this release's format and the one before (the
 * only two that meet in an upgrade): a flush removes both, so it empties what the release before
 * stored too.
 */
export function thisFormatAndTheOneBefore(version: number): string[] {
  return version > 1 ? [versioned(version), versioned(version - 1)] : [versioned(version)];
}

const REPRESENTATION_PREFIX = versioned(FORMATS.representation);

/** Where the failed-login counters of one kind live: `mds:v1:throttle:user:<name>`, `...:ip:<address group>`. */
export const THROTTLE_KEY_PREFIX = `${SHARED_PREFIX}throttle:`;

/** Where the request-quota counters live: `mds:v1:ratelimit:<caller>`. */
export const QUOTA_KEY_PREFIX = `${SHARED_PREFIX}ratelimit:`;

/** Where every upstream budget and pause lives: `mds:v1:upstream:<provider>:...`. */
export const UPSTREAM_KEY_PREFIX = `${SHARED_PREFIX}upstream:`;

/** An upstream quota day: `YYYY-MM-DD` of the UTC day holding `ms`. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Builders of every key. Parameters are inserted as given: callers pass canonical values. */
export const keys = {
  /**
   * A cached representation: `mds:v2:<kind>:<namespace>:<params>` (`mds:v2:quote:yahoo:AAPL`), the
   * namespace being the provider, so instances of different providers on one Redis stay apart.
   */
  representation: (kind: string, namespace: string, params: string): string => `${REPRESENTATION_PREFIX}${kind}:${namespace}:${params}`,
  /** The kind named by a representation key (`quote` of `mds:v2:quote:yahoo:AAPL`). */
  kindOf: (representationKey: string): string => representationKey.slice(REPRESENTATION_PREFIX.length, representationKey.indexOf(':', REPRESENTATION_PREFIX.length)),
  /**
   * What a flush of `kind` removes: its entries in this format and the one before, and the one
   * before's stale copies (format 1 kept them under a second key, `mds:v1:stale:<kind>:...`).
   */
  flushOf: (kind: string): string[] => [...thisFormatAndTheOneBefore(FORMATS.representation).map((prefix) => `${prefix}${kind}:`), `${versioned(1)}stale:${kind}:`],
  /** The single-flight lock of one fill: `mds:v2:lock:<kind>:<namespace>:<params>`. */
  fillLock: (representationKey: string): string => `${REPRESENTATION_PREFIX}lock:${representationKey.slice(REPRESENTATION_PREFIX.length)}`,
  /**
   * The lock one run of a scheduled job holds: `mds:v1:lock:job:<provider>:<job>`, one per provider so
   * instances of another provider on the same Redis refresh their own data. Shared: one run per
   * interval across both releases of an upgrade (its value is an opaque token).
   */
  jobLock: (provider: string, job: string): string => `${SHARED_PREFIX}lock:job:${provider}:${job}`,
  /**
   * The lease of the one push connection to `upstream` for the fleet of a provider: `mds:v1:lock:live:<provider>:<upstream>`.
   * Shared: an upstream account takes one connection, whichever release holds it (an opaque token).
   */
  liveLease: (provider: string, upstream: string): string => `${SHARED_PREFIX}lock:live:${provider}:${upstream}`,
  /**
   * One bucket of the symbols a provider does not know: `mds:v1:unknown:<provider>:<bucket>`, a fixed
   * number of buckets per provider whatever the number of symbols asked for.
   */
  unknownSymbols: (provider: string, bucket: number): string => `${versioned(FORMATS.unknownSymbols)}unknown:${provider}:${bucket}`,
  /** What a flush of a provider's unknown symbols removes: its buckets in this format and the one before. */
  unknownSymbolsFlushOf: (provider: string): string[] => thisFormatAndTheOneBefore(FORMATS.unknownSymbols).map((prefix) => `${prefix}unknown:${provider}:`),
  /** A symbol's last change as the live streams saw it: `mds:v2:quote-version:<provider>:<symbol>`. */
  quoteVersion: (provider: string, symbol: string): string => `${versioned(FORMATS.quoteChanges)}quote-version:${provider}:${symbol}`,
  /** The live bars of a symbol being built from `upstream`'s pushes, for the next leader: `mds:v1:live-bars:<provider>:<upstream>:<symbol>`. */
  liveBarState: (provider: string, upstream: string, symbol: string): string => `${versioned(FORMATS.liveBars)}live-bars:${provider}:${upstream}:${symbol}`,
  /**
   * The request quota of one caller in the current window: `mds:v1:ratelimit:<caller>`, the caller
   * being `ip:<address group>`, `user:<name>` or an API key's id (`key:...`). Shared: a caller has one
   * quota whichever release answers (rate-limiter-flexible's counter).
   */
  quota: (caller: string): string => `${QUOTA_KEY_PREFIX}${caller}`,
  /**
   * One caller's requests (`what` = `requests`), quota points (`points`) or quota refusals (`limited`)
   * on one UTC day, for the usage report: `mds:v1:usage:<YYYY-MM-DD>:<api-key|user>:<caller>:<what>`.
   * Shared, like every usage key: whole numbers both releases add to, written to the database once.
   */
  usage: (day: string, callerKind: string, caller: string, what: 'requests' | 'points' | 'limited'): string => `${SHARED_PREFIX}usage:${day}:${callerKind}:${caller}:${what}`,
  /**
   * One caller's actions (`what` = `requests`), quota points (`points`) or quota refusals (`limited`)
   * of one operation through one door on one UTC day:
   * `mds:v1:usage-op:<YYYY-MM-DD>:<door>:<operation>:<what>:<api-key|user>:<caller>`. The operation is
   * one of a fixed set (domain/usage-operations.ts), so a caller has a bounded number of these a day;
   * the caller comes last, so a name holding `:` can never be read as another key's door or operation.
   */
  usageOperation: (day: string, door: string, operation: string, what: 'requests' | 'points' | 'limited', callerKind: string, caller: string): string =>
    `${SHARED_PREFIX}usage-op:${day}:${door}:${operation}:${what}:${callerKind}:${caller}`,
  /** Failed logins. Shared: an upgrade must not give a guesser a second set of attempts. */
  throttle: {
    /** Of one username: `mds:v1:throttle:user:<name>`. */
    user: (username: string): string => `${THROTTLE_KEY_PREFIX}user:${username}`,
    /** Of one username from one address group: `mds:v1:throttle:pair:<address group>:<name>`. */
    pair: (username: string, addressGroup: string): string => `${THROTTLE_KEY_PREFIX}pair:${addressGroup}:${username}`,
    /** From one client address (an IPv6 address's /64): `mds:v1:throttle:ip:<address group>`. */
    ip: (addressGroup: string): string => `${THROTTLE_KEY_PREFIX}ip:${addressGroup}`,
  },
  /** What one upstream provider may still be sent, fleet-wide. Shared: the upstream counts per account, not per release. */
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
  /**
   * Tells every instance to drop its in-process copies of cached representations (a flush). Shared: any
   * message means "drop", so a flush on either release reaches both (with `legacyChannels` while the
   * release before, which spoke on another name, may still run).
   */
  invalidate: `${SHARED_PREFIX}bus:invalidate`,
  /**
   * The fleet-wide "identity changed" event (domain/identity.ts): carries the identity (`user:<name>`,
   * `key:<id>`) of a user whose record changed (created, deleted, new password) or of a managed API key
   * that was revoked. Every instance drops what it remembers of that identity and closes its open
   * streams and sessions. Shared: a revocation is honoured by both releases of an upgrade (with
   * `legacyChannels` while the release before may still run). An identity
   * of a kind a release does not know matches nothing there and is ignored, so a new kind is a safe addition.
   */
  identityChanged: `${SHARED_PREFIX}bus:identity-changed`,
  /** Quote changes seen by the instances of one provider: `mds:v2:quote-events:<provider>`. */
  quoteEvents: (provider: string): string => `${versioned(FORMATS.quoteChanges)}quote-events:${provider}`,
  /** Each instance's subscribed symbols and each push leader's state: `mds:v1:live:<provider>`. */
  live: (provider: string): string => `${versioned(FORMATS.liveAnnouncements)}live:${provider}`,
  /** Live bars built by the push leaders of one provider's fleet: `mds:v1:bar-events:<provider>`. */
  liveBars: (provider: string): string => `${versioned(FORMATS.liveBars)}bar-events:${provider}`,
} as const;

/**
 * The shared channels as the release before named them, where it published `<instance id>:<message>`
 * (the bus's typed envelope came with the names above). Bridged both ways by
 * infra/cache/legacy-bus-bridge.ts for one release, so a flush or a revocation reaches both releases
 * of an upgrade; the release after this one removes the bridge and this table.
 */
export const legacyChannels: ReadonlyMap<string, string> = new Map([
  [channels.invalidate, `${SHARED_PREFIX}invalidate`],
  [channels.identityChanged, `${SHARED_PREFIX}auth:identity-changed`],
]);
