/**
 * Keeps the shared counter off the hot path while a caller is far from its limit. Each instance
 * holds an estimate per key (what the shared counter last said, minus what this instance counted
 * since); while the estimate leaves more than a margin, a request is answered from it at once and
 * its point is added to the shared counter in a batch a few milliseconds later (one INCRBY-like
 * call per key per flush instead of one per request). Near the limit, or without a fresh estimate,
 * every request waits for the shared counter, so refusals stay exact there; so does a request that
 * finds too many of this instance's points still unconfirmed. What other instances counted shows up
 * with each flush's answer.
 */
import QuickLRU from 'quick-lru';
import type { QuotaUsage, RequestCounter } from '../../domain/ports/counters.js';

export interface BatchedRequestCounterOptions {
  /** How long points wait before they are sent together, in ms. Default 10. */
  flushMs?: number;
  /** Keys with an estimate kept in memory (least recently used go first). Default 10,000. */
  maxKeys?: number;
}

interface Estimate {
  limit: number;
  /** Requests left as of the last shared answer, minus what this instance counted after it. */
  remaining: number;
  /** When the window ends (epoch ms). */
  resetAt: number;
  /** Points counted here and not yet sent. */
  unsent: number;
  /** Points sent and not yet answered. */
  inFlight: number;
}

/**
 * Requests left below which every request waits for the shared counter: a tenth of the limit, and at
 * least 10. Small limits are therefore always exact.
 */
function exactBelow(limit: number): number {
  return Math.max(10, Math.ceil(limit / 10));
}

/**
 * Points one instance may have counted without the shared counter's answer. Other instances cannot see
 * them, so this bounds how stale their estimates are: with up to 5 instances, what they hide from each
 * other is at most the margin of `exactBelow`, and refusals stay exact.
 */
function maxUnconfirmed(limit: number): number {
  return Math.max(2, Math.floor(exactBelow(limit) / 4));
}

/** A `RequestCounter` in front of another (shared) one; see the module comment. */
export class BatchedRequestCounter implements RequestCounter {
  readonly windowMs: number;
  readonly #shared: RequestCounter;
  readonly #flushMs: number;
  readonly #estimates: QuickLRU<string, Estimate>;
  readonly #due = new Set<string>();
  #timer: NodeJS.Timeout | undefined;

  constructor(shared: RequestCounter, options: BatchedRequestCounterOptions = {}) {
    this.#shared = shared;
    this.windowMs = shared.windowMs;
    this.#flushMs = options.flushMs ?? 10;
    this.#estimates = new QuickLRU({ maxSize: options.maxKeys ?? 10_000 });
  }

  consumeNow(key: string, limit: number): QuotaUsage | undefined {
    const mapKey = `${limit}:${key}`;
    const now = Date.now();
    const estimate = this.#estimates.get(mapKey);
    if (estimate && estimate.resetAt > now && estimate.remaining > exactBelow(limit) && estimate.unsent + estimate.inFlight < maxUnconfirmed(limit)) {
      estimate.remaining -= 1;
      estimate.unsent += 1;
      this.#schedule(mapKey);
      return { allowed: true, remaining: estimate.remaining, resetMs: estimate.resetAt - now };
    }
    return undefined;
  }

  async consume(key: string, limit: number): Promise<QuotaUsage> {
    const now = this.consumeNow(key, limit);
    if (now !== undefined) return now;
    const mapKey = `${limit}:${key}`;
    const estimate = this.#estimates.get(mapKey);
    // Points still waiting for a flush travel with this request, so the shared counter decides on
    // everything this instance has allowed.
    const carried = estimate?.unsent ?? 0;
    if (estimate) estimate.unsent = 0;
    const usage = await this.#shared.consume(key, limit, 1 + carried);
    this.#learn(mapKey, limit, usage);
    return usage;
  }

  /** Takes a shared answer as the new estimate, less what this instance counted that it does not include yet. */
  #learn(mapKey: string, limit: number, usage: QuotaUsage): void {
    const current = this.#estimates.get(mapKey);
    const pending = (current?.unsent ?? 0) + (current?.inFlight ?? 0);
    this.#estimates.set(mapKey, {
      limit,
      remaining: usage.allowed ? Math.max(0, usage.remaining - pending) : 0,
      resetAt: Date.now() + usage.resetMs,
      unsent: current?.unsent ?? 0,
      inFlight: current?.inFlight ?? 0,
    });
  }

  #schedule(mapKey: string): void {
    this.#due.add(mapKey);
    if (this.#timer) return;
    this.#timer = setTimeout(() => this.#flush(), this.#flushMs);
    // Never keeps the process alive: a point lost at exit only makes a quota a little kinder.
    this.#timer.unref();
  }

  #flush(): void {
    this.#timer = undefined;
    const keys = [...this.#due];
    this.#due.clear();
    for (const mapKey of keys) {
      const estimate = this.#estimates.get(mapKey);
      if (!estimate || estimate.unsent === 0) continue;
      const points = estimate.unsent;
      estimate.unsent = 0;
      estimate.inFlight += points;
      const key = mapKey.slice(mapKey.indexOf(':') + 1);
      this.#shared.consume(key, estimate.limit, points).then(
        (usage) => {
          const current = this.#estimates.get(mapKey);
          if (current) current.inFlight -= points;
          this.#learn(mapKey, estimate.limit, usage);
        },
        () => {
          // The shared counter failed outright (its own fallback failed too): forget the estimate, so
          // the next request asks it directly and its failure is seen.
          this.#estimates.delete(mapKey);
        },
      );
    }
  }
}
