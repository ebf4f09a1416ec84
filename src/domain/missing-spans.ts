/**
 * The parts of a history window an answer lacks, each with why (DESIGN 19, 26): the upstream does
 * not keep them and the store does not hold them, the upstream failed, or they were to be answered
 * by bars built from a push stream and the stream has no bar for them (socket down, no leader, no
 * trade): such minutes are listed, never invented.
 */
import type { TimeSpan } from './ports/history-store.js';

export type MissingReason = 'beyond_reach' | 'upstream_failed' | 'no_stream_data';

/** A missing part of a window and why it is missing. */
export interface MissingSpan extends TimeSpan {
  reason: MissingReason;
}

/** Merges spans that overlap or touch and give the same reason; oldest first (new objects). */
export function mergeMissing(spans: readonly MissingSpan[]): MissingSpan[] {
  const merged: MissingSpan[] = [];
  for (const span of [...spans].sort((a, b) => a.startMs - b.startMs)) {
    const last = merged.at(-1);
    if (last !== undefined && last.reason === span.reason && span.startMs <= last.endMs) last.endMs = Math.max(last.endMs, span.endMs);
    else merged.push({ startMs: span.startMs, endMs: span.endMs, reason: span.reason });
  }
  return merged;
}

/** The most spans an answer's `missing` lists (the contract's bound). */
const MAX_LISTED = 100;

/** `spans` (merged, oldest first) within the contract's bound: past it, the last span reaches to the end of the rest, with the reason of its first part. */
export function capMissing(spans: readonly MissingSpan[]): MissingSpan[] {
  if (spans.length <= MAX_LISTED) return [...spans];
  const kept = spans.slice(0, MAX_LISTED - 1);
  const tail = spans.slice(MAX_LISTED - 1);
  kept.push({ startMs: tail[0]!.startMs, endMs: Math.max(...tail.map((s) => s.endMs)), reason: tail[0]!.reason });
  return kept;
}
