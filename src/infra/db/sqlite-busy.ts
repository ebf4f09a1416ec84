/**
 * Several processes on one SQLite file (two `mds serve` on one machine, or the CLI beside the server):
 * a statement that meets another process's write lock past the driver's busy timeout, or a read
 * snapshot that another process's commit made stale, fails with SQLITE_BUSY / SQLITE_BUSY_SNAPSHOT /
 * SQLITE_LOCKED. SQLite asks for the statement to be tried again; these helpers do that, off the event
 * loop (the driver's own busy wait blocks it), a bounded number of times.
 */

const BUSY_CODES = new Set(['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_RECOVERY', 'SQLITE_BUSY_TIMEOUT', 'SQLITE_LOCKED', 'SQLITE_LOCKED_SHAREDCACHE']);

/** Waits between tries, in milliseconds: about 2.5 s in all before the failure is reported. */
const RETRY_DELAYS_MS = [5, 20, 50, 100, 200, 400, 700, 1000];

/** SQLite said "busy": the same statement may succeed when tried again. */
export function isSqliteBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && BUSY_CODES.has(code);
}

/** Runs `work`, trying again after a short wait while SQLite answers busy. */
export async function retryWhileBusy<T>(work: () => T | Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await work();
    } catch (err) {
      const delayMs = RETRY_DELAYS_MS[attempt];
      if (!isSqliteBusy(err) || delayMs === undefined) throw err;
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}

/** `target` with every method retried while SQLite answers busy (each method is one statement or one transaction). */
export function retryingWhileBusy<T extends object>(target: T): T {
  const wrapped = {} as Record<string, unknown>;
  for (const [name, member] of Object.entries(target)) {
    wrapped[name] = typeof member === 'function' ? (...args: unknown[]) => retryWhileBusy(() => (member as (...a: unknown[]) => unknown).apply(target, args)) : member;
  }
  return wrapped as T;
}
