/** Arithmetic on half-open spans of time (`startMs` included, `endMs` excluded), for the history store. */
import type { TimeSpan } from './ports/history-store.js';

/** Merges overlapping or touching spans; input in any order, output oldest first (new objects). */
export function mergeSpans(spans: readonly TimeSpan[]): TimeSpan[] {
  const merged: TimeSpan[] = [];
  for (const span of [...spans].sort((a, b) => a.startMs - b.startMs)) {
    const last = merged.at(-1);
    if (last !== undefined && span.startMs <= last.endMs) last.endMs = Math.max(last.endMs, span.endMs);
    else merged.push({ startMs: span.startMs, endMs: span.endMs });
  }
  return merged;
}

/** `span` less every span of `covered` (merged, oldest first): the parts left, oldest first. */
export function subtractSpans(span: TimeSpan, covered: readonly TimeSpan[]): TimeSpan[] {
  const gaps: TimeSpan[] = [];
  let from = span.startMs;
  for (const c of covered) {
    if (c.endMs <= from) continue;
    if (c.startMs >= span.endMs) break;
    if (c.startMs > from) gaps.push({ startMs: from, endMs: c.startMs });
    from = Math.max(from, c.endMs);
  }
  if (from < span.endMs) gaps.push({ startMs: from, endMs: span.endMs });
  return gaps;
}
