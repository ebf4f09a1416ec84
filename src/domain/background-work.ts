/**
 * Which upstream calls are background work (DESIGN 19): the index refresh, keep-current and backfill
 * run inside `inBackground`, and the upstream guard asks `isBackground()` to count their calls against
 * the background share of each provider's budget and to refuse them rather than queue a caller behind
 * them. The mark follows the work through every await (an async context), so no signature changes.
 *
 * The context is switched on only while some background work runs: on Node 20 an enabled
 * AsyncLocalStorage installs promise hooks that every promise of the process pays for (a request's
 * included), about a fifth of a health call. Work that `work` starts without awaiting it and that
 * outlives it is no longer marked once the last background run has ended (it is then admitted as a
 * caller's would be).
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const context = new AsyncLocalStorage<true>();
/** Background runs under way; the context is disabled when the last one ends. */
let running = 0;

/** Runs `work` as background work: each upstream call it makes counts against BACKGROUND_BUDGET_SHARE. */
export async function inBackground<T>(work: () => Promise<T>): Promise<T> {
  running += 1;
  try {
    return await context.run(true, work);
  } finally {
    running -= 1;
    if (running === 0) context.disable();
  }
}

/** True inside `inBackground` (whatever the depth of calls and awaits since). */
export function isBackground(): boolean {
  return context.getStore() === true;
}
