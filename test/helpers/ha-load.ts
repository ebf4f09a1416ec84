/**
 * A bounded read load for the high-availability tests: keep-alive loops against one or more
 * running services mixing cached quotes, the indices, health, admin status, and history and search
 * reads that miss (a fresh window or query each time, over a pool of symbols), each request timed.
 */
import { performance } from 'node:perf_hooks';

/** One request of the load: what it asked for, how it was answered and how long it took. */
export interface LoadSample {
  kind: string;
  url: string;
  /** 0 when no HTTP answer came (network error or the client's own timeout). */
  status: number;
  ms: number;
  /** When the request started, ms on the `performance.now()` clock. */
  at: number;
}

/** Something the load can call: a base URL's fetch. */
export interface LoadTarget {
  fetch(path: string, init?: RequestInit): Promise<Response>;
}

const SYMBOLS = ['AAPL', 'MSFT', 'NVDA', 'AMZN', 'GOOGL', 'META', 'TSLA', 'JPM', 'V', 'KO', 'IBM', 'PEP', 'XOM', 'WMT', 'DIS', 'NKE'];
const DAY_MS = 86_400_000;
/** Longer than a Sentinel failover takes (down-after 1 s, election, promotion) and shorter than a fill lock lives. */
const REREAD_AFTER_MS = 3_000;
/** No request of the load may take longer than this on the client side; past it, it counts as failed. */
const CLIENT_TIMEOUT_MS = 10_000;

export interface LoadOptions {
  /** Concurrent keep-alive loops per target. Default 4. */
  workers?: number;
  /** Bearer token for admin status; without it admin status is left out. */
  token?: string;
  /** Stop by itself after this many requests in all (a bound, in case `stop()` never comes). Default 200,000. */
  maxRequests?: number;
}

/** Starts the loops; `stop()` ends them and resolves once every request in flight has answered. */
export function startLoad(targets: readonly LoadTarget[], options: LoadOptions = {}) {
  const samples: LoadSample[] = [];
  const workers = options.workers ?? 4;
  const maxRequests = options.maxRequests ?? 200_000;
  let running = true;
  let sequence = 0;
  let fresh = 0;
  // Every window or query is asked for a second time REREAD_AFTER_MS after the first: usually a hit
  // then, but when the first read's fill was cut by an outage (its lock taken in the store, its value
  // never stored), the second read is the one that used to wait out the whole fill wait.
  const firstReads: Array<{ m: number; at: number }> = [];
  const missKey = (): number => {
    const due = firstReads[0];
    if (due !== undefined && performance.now() - due.at >= REREAD_AFTER_MS) return firstReads.shift()!.m;
    const m = fresh++;
    firstReads.push({ m, at: performance.now() });
    return m;
  };
  const auth = options.token ? { authorization: `Bearer ${options.token}` } : undefined;
  const next = (): { kind: string; url: string; init?: RequestInit } => {
    const n = sequence++;
    const symbol = SYMBOLS[n % SYMBOLS.length]!;
    switch (n % 7) {
      case 0:
        return { kind: 'quote', url: `/api/quotes/${encodeURIComponent(SYMBOLS[n % 4]!)}` };
      case 1:
        return { kind: 'indices', url: '/api/indices' };
      case 2:
        return { kind: 'health', url: '/api/health' };
      case 3:
        return auth ? { kind: 'status', url: '/api/admin/status', init: { headers: auth } } : { kind: 'health', url: '/api/health' };
      case 4:
      case 5: {
        // A window no one asked for yet (a miss in every cache layer, filled through the fill lock),
        // or one asked for REREAD_AFTER_MS ago.
        const m = missKey();
        const start = new Date(Date.UTC(2020, 0, 1) + (m % 1500) * DAY_MS + Math.floor(m / 1500) * 3_600_000);
        return { kind: 'history', url: `/api/history/${encodeURIComponent(SYMBOLS[m % SYMBOLS.length]!)}?interval=1d&start=${start.toISOString()}` };
      }
      default: {
        const m = missKey();
        return { kind: 'search', url: `/api/search?q=${symbol.slice(0, 2)}${m.toString(36)}` };
      }
    }
  };
  const loops = targets.flatMap((target) =>
    Array.from({ length: workers }, async () => {
      while (running && sequence < maxRequests) {
        const call = next();
        const at = performance.now();
        let status = 0;
        try {
          const res = await target.fetch(call.url, { ...call.init, signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) });
          await res.arrayBuffer();
          status = res.status;
        } catch {
          status = 0;
        }
        samples.push({ kind: call.kind, url: call.url, status, ms: performance.now() - at, at });
      }
    }),
  );
  return {
    samples,
    async stop(): Promise<LoadSample[]> {
      running = false;
      await Promise.all(loops);
      return samples;
    },
  };
}

/** Figures of a load run: requests, answers outside 2xx, the slowest, the 99th percentile, those over `limitMs`. */
export function summarize(samples: readonly LoadSample[], limitMs = 1000) {
  const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
  const p99 = sorted.length > 0 ? sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)]! : 0;
  const non2xx = samples.filter((s) => s.status < 200 || s.status >= 300);
  const slow = samples.filter((s) => s.ms > limitMs);
  const byKind: Record<string, number> = {};
  for (const s of samples) byKind[s.kind] = (byKind[s.kind] ?? 0) + 1;
  return {
    requests: samples.length,
    non2xx: non2xx.length,
    max: Math.round(sorted.at(-1) ?? 0),
    p99: Math.round(p99),
    slow: slow.length,
    byKind,
    /** A few offenders, for the failure message. */
    examples: [...slow, ...non2xx].slice(0, 8).map((s) => `${s.status} ${Math.round(s.ms)} ms ${s.url}`),
  };
}
