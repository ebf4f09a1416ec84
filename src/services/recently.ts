/**
 * Shares one answer of a slow probe between the callers of a short period: the health check's
 * database ping is asked on every request, but an answer a second old is as true for a monitor, and
 * under load one query a second replaces one per request. (Not for values a caller just changed,
 * such as the user count an administrator reads right after creating a user.)
 */

/**
 * Wraps `probe` so that calls within `maxAgeMs` of the last answer (or while one is being computed)
 * get that answer instead of a new call. A failure is never kept: the next call asks again.
 */
export function recently<T>(probe: () => Promise<T>, maxAgeMs: number, now: () => number = Date.now): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    const at = now();
    if (last !== undefined && at - last.at < maxAgeMs) return last.value;
    const value = probe();
    const entry = { at, value };
    last = entry;
    value.catch(() => {
      if (last === entry) last = undefined;
    });
    return value;
  };
}
