/**
 * The usage metering ports: per-caller daily totals.
 * Adapters in `src/infra` implement them and translate their technology's errors into the errors of
 * `domain/errors.ts` at their own boundary.
 */
import type { Principal } from './accounts.js';

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
  /** Quota points charged (0 for rows written before points were counted). */
  points: number;
  /** Requests refused with 429. */
  rateLimited: number;
}

/** What one operation through one door cost a caller on one day. */
export interface UsageOperationTotals {
  door: Door;
  /** An operationId, a door action (`ws:subscribe`, `mcp:tools/list`) or `unmatched` (domain/usage-operations.ts). */
  operation: string;
  /** Actions counted, refused ones included. */
  requests: number;
  /** Quota points charged. */
  points: number;
  /** Actions refused for the quota (429). */
  rateLimited: number;
}

/** One caller's use of one operation through one door on one UTC day. */
export interface UsageOperationRow extends UsageOperationTotals {
  /** `YYYY-MM-DD`, UTC. */
  day: string;
  callerKind: UsageCallerKind;
  caller: string;
}

/** A caller's day as the report shows it: the totals, and what each door and operation took of them. */
export interface UsageReportRow extends UsageRow {
  /** By door, then operation. */
  operations: UsageOperationTotals[];
}

/** The ways into mds (DESIGN 24): REST (and its SSE stream), MCP, the WebSocket API. */
export type Door = 'rest' | 'sse' | 'mcp' | 'ws';

/** One action a caller took, as the usage report counts it. */
export interface UsageAction {
  /** The door it came through. */
  door: Door;
  /** The operationId it was (REST, a tool call), or the door's own action (`ws:subscribe`, `mcp:tools/list`); `unmatched` when none. */
  operation: string;
  /** The quota points it was charged (0 when refused before any was). */
  points: number;
  /** It was refused for its quota (429). */
  limited: boolean;
}

/**
 * Counts the actions of authenticated callers for the usage report. Called on the hot path: it
 * must be synchronous, cheap and never throw (counts are batched and written later).
 */
export interface UsageRecorder {
  /** One action by `principal`. */
  record(principal: Principal, action: UsageAction): void;
}

/** A recorder that counts nothing (usage metering off, tests of other parts). */
export const NO_USAGE: UsageRecorder = { record: () => undefined };

/** Daily usage totals in the database, shared by every instance. Throws `AppError` when the database fails. */
export interface UsageStore {
  /**
   * Raises each row's counts to at least the given totals, creating missing rows: the callers' rows,
   * then the rows per door and operation. Totals only grow within a day, so any instance may write the
   * fleet-wide totals it read, in any order.
   */
  raiseTotals(rows: readonly UsageRow[], operations?: readonly UsageOperationRow[]): Promise<void>;
  /** Every caller row of `sinceDay` (`YYYY-MM-DD`) and later, newest day first, then by caller. */
  list(sinceDay: string): Promise<UsageRow[]>;
  /** Every door-and-operation row of `sinceDay` and later, newest day first, then by caller, door and operation. */
  listOperations(sinceDay: string): Promise<UsageOperationRow[]>;
  /** Deletes the rows (caller and operation rows alike) of days before `day`; resolves to how many caller rows went. */
  deleteBefore(day: string): Promise<number>;
}
