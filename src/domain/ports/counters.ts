/**
 * The counter ports: per-caller request quotas and the shared counters every instance counts in.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
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
