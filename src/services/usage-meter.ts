/**
 * Usage metering (DESIGN.md sections 17 and 24): actions, quota points and quota refusals (429) per
 * API key and per user per UTC day, in total and by door and operation. `record` only adds to a map in
 * memory, so the request path never waits; every few seconds `flush` adds the batch to the shared
 * counters (fleet-wide totals in Redis, or this instance's own in memory mode) and writes the totals
 * they answer to the database, where any instance may raise them and they are kept 90 days.
 * Operation names are folded into a fixed set first (domain/usage-operations.ts), so no caller can
 * make the counters or the tables grow by sending names of its own.
 *
 * Totals the database did not take (it was unavailable, DESIGN 27) wait in memory and go with every
 * later flush until it takes them, so an outage of minutes loses no count even for a caller that makes
 * no request after it. At most `maxUnwrittenRows` rows wait; past that the oldest are dropped, counted
 * and logged (`droppedRows`), and the shared counters still hold their totals.
 */
import { keys, utcDay } from '../domain/key-space.js';
import { DOORS, usageOperationNamer } from '../domain/usage-operations.js';
import type { CounterWindow, SharedCounters } from '../domain/ports/counters.js';
import type { Logger } from '../domain/ports/logger.js';
import type { Principal } from '../domain/ports/accounts.js';
import type { Door, UsageAction, UsageCallerKind, UsageOperationRow, UsageOperationTotals, UsageRecorder, UsageReportRow, UsageRow, UsageStore } from '../domain/ports/usage.js';
import { DAY_MS } from '../domain/durations.js';

export interface UsageMeterOptions {
  counters: SharedCounters;
  store: UsageStore;
  logger: Logger;
  /** The contract's operationIds: with the doors' own actions, every name an action is counted under; any other is `unmatched`. */
  operations: Iterable<string>;
  /** How often counts are written, in ms. Default 5,000. */
  flushMs?: number;
  /** Days of usage kept in the database. Default 90. */
  retentionDays?: number;
  /** Rows (caller and operation rows together) that wait in memory while the database refuses them. Default 100,000. */
  maxUnwrittenRows?: number;
  /** Epoch ms; `Date.now` by default. */
  now?: () => number;
}

/** Counts not yet added to the shared counters. */
interface Counts {
  requests: number;
  points: number;
  limited: number;
}

type What = keyof Counts;
const WHATS: readonly What[] = ['requests', 'points', 'limited'];

interface PendingOperation extends Counts {
  door: Door;
  operation: string;
}

interface Pending extends Counts {
  day: string;
  callerKind: UsageCallerKind;
  caller: string;
  /** By `<door> <operation>`. */
  operations: Map<string, PendingOperation>;
}

/** The counters need a limit; usage is never refused, so it is one no day reaches. */
const USAGE_WINDOW: CounterWindow = { limit: 2_000_000_000, windowMs: 'utc-day' };
/** How often old rows are deleted. */
const PRUNE_EVERY_MS = 3_600_000;

/** The usage-report identity of a principal: a key by its id, a user by name. */
export function usageCallerOf(principal: Principal): { callerKind: UsageCallerKind; caller: string } {
  if (principal.kind === 'api-key') {
    const id = principal.id ?? '';
    return { callerKind: 'api-key', caller: id.startsWith('key:') ? id.slice('key:'.length) : id };
  }
  return { callerKind: 'user', caller: principal.username };
}

const emptyCounts = (counts: Counts): boolean => counts.requests === 0 && counts.points === 0 && counts.limited === 0;

/** Adds `from`'s counts to `to`'s. */
function addCounts(to: Counts, from: Counts): void {
  to.requests += from.requests;
  to.points += from.points;
  to.limited += from.limited;
}

export class UsageMeter implements UsageRecorder {
  readonly #counters: SharedCounters;
  readonly #store: UsageStore;
  readonly #logger: Logger;
  readonly #operationName: (operation: string) => string;
  readonly #flushMs: number;
  readonly #retentionDays: number;
  readonly #now: () => number;
  #pending = new Map<string, Pending>();
  /** Totals the database has not taken yet, by row; a later total of the same row replaces an earlier one. */
  #unwritten = new Map<string, UsageRow>();
  #unwrittenOperations = new Map<string, UsageOperationRow>();
  readonly #maxUnwrittenRows: number;
  #droppedRows = 0;
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;
  #prunedAt = 0;
  /** The UTC day of now, and when it ends: one Date per day rather than per request. */
  #day = { name: '', endsAt: 0 };

  constructor(options: UsageMeterOptions) {
    this.#counters = options.counters;
    this.#store = options.store;
    this.#logger = options.logger;
    this.#operationName = usageOperationNamer(options.operations);
    this.#flushMs = options.flushMs ?? 5000;
    this.#retentionDays = options.retentionDays ?? 90;
    this.#maxUnwrittenRows = Math.max(1, options.maxUnwrittenRows ?? 100_000);
    this.#now = options.now ?? Date.now;
  }

  record(principal: Principal, action: UsageAction): void {
    const { callerKind, caller } = usageCallerOf(principal);
    const day = this.#today();
    const id = `${day} ${callerKind} ${caller}`;
    let entry = this.#pending.get(id);
    if (entry === undefined) {
      entry = { day, callerKind, caller, requests: 0, points: 0, limited: 0, operations: new Map() };
      this.#pending.set(id, entry);
    }
    const operation = this.#operationName(action.operation);
    const opId = `${action.door} ${operation}`;
    let op = entry.operations.get(opId);
    if (op === undefined) {
      op = { door: action.door, operation, requests: 0, points: 0, limited: 0 };
      entry.operations.set(opId, op);
    }
    // The counters take whole points; a price is one already, this only keeps a bad one out.
    const counted = { requests: 1, points: action.points > 0 ? Math.ceil(action.points) : 0, limited: action.limited ? 1 : 0 };
    addCounts(entry, counted);
    addCounts(op, counted);
  }

  #today(): string {
    const now = this.#now();
    if (now >= this.#day.endsAt || now < this.#day.endsAt - DAY_MS) this.#day = { name: utcDay(now), endsAt: Math.floor(now / DAY_MS) * DAY_MS + DAY_MS };
    return this.#day.name;
  }

  /** Writes every `flushMs` until `close`. */
  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.flush(), this.#flushMs);
    this.#timer.unref();
  }

  /**
   * Adds what was recorded since the last flush to the shared counters and writes the totals to the
   * database. Counts that could not be added are kept for the next flush; never rejects.
   */
  flush(): Promise<void> {
    // One flush at a time: a second one would read totals the first has not written yet.
    this.#flushing ??= this.#flushOnce().finally(() => {
      this.#flushing = undefined;
    });
    return this.#flushing;
  }

  /**
   * The rows of the last `days` UTC days, today included, newest first, each with its doors and
   * operations (by door, then operation); counts not yet flushed are written first.
   */
  async report(days: number): Promise<UsageReportRow[]> {
    await this.flush();
    const since = utcDay(this.#now() - (days - 1) * DAY_MS);
    const [rows, operations] = await Promise.all([this.#store.list(since), this.#store.listOperations(since)]);
    const byCaller = new Map<string, UsageOperationTotals[]>();
    for (const op of operations) {
      const id = `${op.day} ${op.callerKind} ${op.caller}`;
      let list = byCaller.get(id);
      if (list === undefined) byCaller.set(id, (list = []));
      list.push({ door: op.door, operation: op.operation, requests: op.requests, points: op.points, rateLimited: op.rateLimited });
    }
    const doorOrder = (door: Door): number => DOORS.indexOf(door);
    return rows.map((row) => ({
      ...row,
      operations: (byCaller.get(`${row.day} ${row.callerKind} ${row.caller}`) ?? []).sort((a, b) => doorOrder(a.door) - doorOrder(b.door) || (a.operation < b.operation ? -1 : a.operation > b.operation ? 1 : 0)),
    }));
  }

  /** Stops the timer and writes what is left. */
  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }

  async #flushOnce(): Promise<void> {
    const batch = this.#pending;
    this.#pending = new Map();
    const totals: UsageRow[] = [];
    const operationTotals: UsageOperationRow[] = [];
    for (const [id, entry] of batch) {
      const { day, callerKind, caller } = entry;
      const ops = [...entry.operations.values()];
      const added = await Promise.allSettled([
        this.#add(entry, (what) => keys.usage(day, callerKind, caller, what)),
        ...ops.map((op) => this.#add(op, (what) => keys.usageOperation(day, op.door, op.operation, what, callerKind, caller))),
      ]);
      const failed = added.find((result) => result.status === 'rejected');
      if (failed !== undefined) {
        // What was added is zero in the entry now; the rest waits, and the next flush reads every total again.
        this.#keep(id, entry);
        this.#logger.warn({ err: failed.reason }, 'usage counts could not be added to the shared counters; kept for the next flush');
        continue;
      }
      const [own, ...perOperation] = added.map((result) => (result as PromiseFulfilledResult<Counts>).value);
      totals.push({ day, callerKind, caller, requests: own!.requests, points: own!.points, rateLimited: own!.limited });
      perOperation.forEach((counts, i) => {
        const op = ops[i]!;
        operationTotals.push({ day, callerKind, caller, door: op.door, operation: op.operation, requests: counts.requests, points: counts.points, rateLimited: counts.limited });
      });
    }
    // Re-inserted, so the map's order is the order rows were last raised: the bound drops the stalest.
    const wait = <Row>(map: Map<string, Row>, id: string, row: Row) => {
      map.delete(id);
      map.set(id, row);
    };
    for (const row of totals) wait(this.#unwritten, `${row.day} ${row.callerKind} ${row.caller}`, row);
    for (const row of operationTotals) wait(this.#unwrittenOperations, `${row.day} ${row.callerKind} ${row.caller} ${row.door} ${row.operation}`, row);
    this.#bound();
    try {
      if (this.#unwritten.size + this.#unwrittenOperations.size > 0) {
        const rows = [...this.#unwritten.values()];
        const operations = [...this.#unwrittenOperations.values()];
        await this.#store.raiseTotals(rows, operations);
        // Only what was written goes: totals read meanwhile by a concurrent caller are newer objects.
        for (const row of rows) if (this.#unwritten.get(`${row.day} ${row.callerKind} ${row.caller}`) === row) this.#unwritten.delete(`${row.day} ${row.callerKind} ${row.caller}`);
        for (const row of operations) {
          const id = `${row.day} ${row.callerKind} ${row.caller} ${row.door} ${row.operation}`;
          if (this.#unwrittenOperations.get(id) === row) this.#unwrittenOperations.delete(id);
        }
      }
      const now = this.#now();
      if (now - this.#prunedAt >= PRUNE_EVERY_MS) {
        this.#prunedAt = now;
        await this.#store.deleteBefore(utcDay(now - (this.#retentionDays - 1) * DAY_MS));
      }
    } catch (err) {
      this.#logger.warn({ err, waiting: this.#unwritten.size + this.#unwrittenOperations.size }, 'usage totals could not be written to the database; kept in memory for the next flush');
    }
  }

  /** How many waiting rows were dropped past `maxUnwrittenRows` since the start (their totals stay in the shared counters). */
  get droppedRows(): number {
    return this.#droppedRows;
  }

  /** Rows waiting for the database. */
  get unwrittenRows(): number {
    return this.#unwritten.size + this.#unwrittenOperations.size;
  }

  /** Drops the oldest waiting rows past the bound, operation rows first (the caller rows carry the totals). */
  #bound(): void {
    let excess = this.#unwritten.size + this.#unwrittenOperations.size - this.#maxUnwrittenRows;
    if (excess <= 0) return;
    const dropped = excess;
    for (const map of [this.#unwrittenOperations, this.#unwritten] as Array<Map<string, unknown>>) {
      for (const id of map.keys()) {
        if (excess === 0) break;
        map.delete(id);
        excess -= 1;
      }
    }
    this.#droppedRows += dropped;
    this.#logger.warn({ dropped, droppedTotal: this.#droppedRows, bound: this.#maxUnwrittenRows }, 'usage rows waiting for the database passed the bound; the oldest were dropped (the shared counters still hold their totals)');
  }

  /**
   * Adds `counts` to the shared counters named by `keyOf` and resolves to their totals. Each count is
   * zeroed once added, so it is never added twice whatever happens to the others; rejects when any
   * could not be added (the rest stay in `counts`).
   */
  async #add(counts: Counts, keyOf: (what: What) => string): Promise<Counts> {
    const results = await Promise.allSettled(
      WHATS.map(async (what) => {
        const key = keyOf(what);
        const n = counts[what];
        const usage = n > 0 ? await this.#counters.consume(key, USAGE_WINDOW, n) : await this.#counters.peek(key, USAGE_WINDOW);
        counts[what] = 0;
        return usage.used;
      }),
    );
    const failed = results.find((result) => result.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    const [requests, points, limited] = results.map((result) => (result as PromiseFulfilledResult<number>).value);
    return { requests: requests!, points: points!, limited: limited! };
  }

  /** Puts counts back for the next flush, added to any recorded meanwhile. */
  #keep(id: string, entry: Pending): void {
    for (const [opId, op] of entry.operations) if (emptyCounts(op)) entry.operations.delete(opId);
    if (emptyCounts(entry) && entry.operations.size === 0) return;
    const current = this.#pending.get(id);
    if (current === undefined) {
      this.#pending.set(id, entry);
      return;
    }
    addCounts(current, entry);
    for (const [opId, op] of entry.operations) {
      const known = current.operations.get(opId);
      if (known === undefined) current.operations.set(opId, op);
      else addCounts(known, op);
    }
  }
}
