/**
 * Which upstream calls are background work (DESIGN 19): the index refresh, keep-current and backfill
 * run inside `inBackground`, and the upstream guard asks `isBackground()` to count their calls against
 * the background share of each provider's budget and to refuse them rather than queue a caller behind
 * them. The mark follows the work through every await (an async context), so no signature changes.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const context = new AsyncLocalStorage<true>();

/** Runs `work` as background work: each upstream call it makes counts against BACKGROUND_BUDGET_SHARE. */
export function inBackground<T>(work: () => Promise<T>): Promise<T> {
  return context.run(true, work);
}

/** True inside `inBackground` (whatever the depth of calls and awaits since). */
export function isBackground(): boolean {
  return context.getStore() === true;
}
