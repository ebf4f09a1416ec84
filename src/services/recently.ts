/**
 * Shares one answer of a slow probe between the callers of a short period: the health check's
 * database ping is asked on every request, but an answer a second old is as true for a monitor, and
 * under load one query a second replaces one per request. (Not for values a caller just changed,
 * such as the user count an administrator reads right after creating a user.)
 */

import { LocalMemory } from './local-memory.js';

export interface RecentlyOptions {
  /**
   * A probe still running after this long is answered with the last answer instead (when there is one
   * younger than `lastAnswerMaxAgeMs`); the probe goes on, and its answer serves the next callers. For
   * a probe that queues behind other work (SQLite's one connection serves one operation at a time):
   * health keeps its latency while the database is busy, and still turns false within
   * `lastAnswerMaxAgeMs` when it does not answer at all.
   */
  answerWithinMs?: number;
  /** How old the last answer may be to stand in for a slow probe, ms (default 5,000). */
  lastAnswerMaxAgeMs?: number;
}

/**
 * Wraps `probe` so that calls within `maxAgeMs` of the last answer (or while one is being computed)
 * get that answer instead of a new call. A failure is never kept: the next call asks again.
 */
export function recently<T>(probe: () => Promise<T>, maxAgeMs: number, now: () => number = Date.now, options: RecentlyOptions = {}): () => Promise<T> {
  const memory = new LocalMemory<'answer', T>({ maxEntries: 1, maxAgeMs, now });
  const { answerWithinMs } = options;
  const lastAnswerMaxAgeMs = options.lastAnswerMaxAgeMs ?? 5000;
  let last: { value: T; atMs: number } | undefined;
  const ask = () =>
    memory.load('answer', async () => {
      const value = await probe();
      last = { value, atMs: now() };
      return value;
    });
  return async () => {
    const answer = ask();
    const standIn = last;
    if (answerWithinMs === undefined || standIn === undefined) return answer;
    const ageMs = now() - standIn.atMs;
    // Within `maxAgeMs` the answer is the remembered one, already there; past the bound there is no stand-in.
    if (ageMs < maxAgeMs || ageMs > lastAnswerMaxAgeMs) return answer;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<T>((resolve) => {
      timer = setTimeout(() => resolve(standIn.value), answerWithinMs);
    });
    try {
      return await Promise.race([answer, late]);
    } finally {
      clearTimeout(timer);
    }
  };
}
