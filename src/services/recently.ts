/**
 * Shares one answer of a slow probe between the callers of a short period: the health check's
 * database ping is asked on every request, but an answer a second old is as true for a monitor, and
 * under load one query a second replaces one per request. (Not for values a caller just changed,
 * such as the user count an administrator reads right after creating a user.)
 */

import { LocalMemory } from './local-memory.js';

/**
 * Wraps `probe` so that calls within `maxAgeMs` of the last answer (or while one is being computed)
 * get that answer instead of a new call. A failure is never kept: the next call asks again.
 */
export function recently<T>(probe: () => Promise<T>, maxAgeMs: number, now: () => number = Date.now): () => Promise<T> {
  const memory = new LocalMemory<'answer', T>({ maxEntries: 1, maxAgeMs, now });
  return async () => memory.load('answer', probe);
}
