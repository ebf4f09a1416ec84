/**
 * Request quotas: every /api request but health counts against its caller's
 * quota, per client address (an IPv6 address's /64) for anonymous callers and per user or API key
 * otherwise. One function, `apply`, is called by the Express app and by the fast path alike: it counts the request, adds the
 * IETF httpapi `RateLimit-Policy` and `RateLimit` headers, and rejects with `RateLimitedError` past
 * the quota (the 429 envelope with `Retry-After`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { RateLimitedError } from '../domain/errors.js';
import { addressGroup } from '../domain/address-group.js';
import { NO_METRICS, type Metrics } from '../domain/ports/metrics.js';
import { NO_USAGE, type UsageRecorder } from '../domain/ports/usage.js';
import type { Principal } from '../domain/ports/accounts.js';
import type { QuotaUsage, RequestCounter } from '../domain/ports/counters.js';

export interface RateLimitOptions {
  counter: RequestCounter;
  /** Requests per minute of one anonymous client address; 0 = no limit (RATE_LIMIT_ANONYMOUS_PER_MINUTE). */
  anonymousPerMinute: number;
  /** Requests per minute of one user or API key; 0 = no limit (RATE_LIMIT_AUTHENTICATED_PER_MINUTE). */
  authenticatedPerMinute: number;
  /** Take the client address from X-Forwarded-For (TRUST_PROXY), as Express's `trust proxy: true` does. */
  trustProxy: boolean;
  /** Counts every refusal under the quota's name (`anonymous`, `authenticated`, `key`). */
  metrics?: Pick<Metrics, 'rateLimitRejected'> | undefined;
  /** Counts every request of a known caller, and its refusals, for the usage report; nothing by default. */
  usage?: UsageRecorder | undefined;
}

/** Counts requests against quotas; see the module comment. */
export interface RateLimit {
  /**
   * Counts `req` against the quota of `principal` (or of the client address when there is none), sets
   * the rate-limit headers on `res`, and resolves when the request may go on. Rejects with
   * `RateLimitedError` when it is over the quota. Resolves at once, without headers, when that quota is off.
   */
  apply(req: IncomingMessage, res: ServerResponse, principal?: Principal): Promise<void>;
  /**
   * `apply` without waiting, for the hot paths: true when the request may go on now (its quota is
   * off, or it was counted and allowed from what this instance knows; the headers are set); false
   * when the answer needs the shared counter, and then nothing was counted: call `apply`. With
   * `into`, the headers are put there (for a caller that writes all its headers at once) instead of
   * being set on `res`.
   */
  tryApply(req: IncomingMessage, res: ServerResponse, principal?: Principal, into?: Record<string, string>): boolean;
}

/** True for the requests quotas apply to: every /api path except health. */
export function isRateLimitedPath(path: string): boolean {
  return path.startsWith('/api/') && path !== '/api/health' && path !== '/api/health/';
}

/**
 * The caller's address: the socket's peer, or with `trustProxy` the leftmost X-Forwarded-For entry
 * (the original client, the address Express reports as `req.ip` with `trust proxy: true`). An entry
 * that is not an IP address is ignored, so a forged header cannot mint unbounded counter keys.
 */
export function clientAddress(req: IncomingMessage, trustProxy: boolean): string {
  if (trustProxy) {
    const header = req.headers['x-forwarded-for'];
    const first = (Array.isArray(header) ? header[0] : header)?.split(',', 1)[0]?.trim();
    if (first && isIP(first) !== 0) return first;
  }
  return req.socket.remoteAddress ?? 'unknown';
}

interface Quota {
  name: 'anonymous' | 'authenticated' | 'key';
  key: string;
  limit: number;
}

export function createRateLimit(options: RateLimitOptions): RateLimit {
  const { counter, anonymousPerMinute, authenticatedPerMinute, trustProxy } = options;
  const metrics = options.metrics ?? NO_METRICS;
  const usage = options.usage ?? NO_USAGE;
  // Configured per minute, counted per window: the same rate when the window is not a minute (tests).
  const perWindow = (perMinute: number) => Math.max(1, Math.round((perMinute * counter.windowMs) / 60_000));
  const windowSeconds = Math.round(counter.windowMs / 1000);
  const policies = new Map<string, string>();
  const policyHeader = (name: string, limit: number) => {
    const id = `${name}:${limit}`;
    let value = policies.get(id);
    if (value === undefined) {
      value = `"${name}";q=${limit};w=${windowSeconds}`;
      policies.set(id, value);
    }
    return value;
  };

  const quotaOf = (req: IncomingMessage, principal: Principal | undefined): Quota | undefined => {
    if (!principal) {
      if (anonymousPerMinute === 0) return undefined;
      return { name: 'anonymous', key: `ip:${addressGroup(clientAddress(req, trustProxy))}`, limit: perWindow(anonymousPerMinute) };
    }
    const key = principal.id ?? `user:${principal.username}`;
    if (principal.rateLimitPerMinute !== undefined) {
      if (principal.rateLimitPerMinute === 0) return undefined;
      return { name: 'key', key, limit: perWindow(principal.rateLimitPerMinute) };
    }
    if (authenticatedPerMinute === 0) return undefined;
    return { name: 'authenticated', key, limit: perWindow(authenticatedPerMinute) };
  };

  const setHeaders = (res: ServerResponse, quota: Quota, usage: QuotaUsage, into?: Record<string, string>): number => {
    const resetSeconds = Math.max(0, Math.ceil(usage.resetMs / 1000));
    const policy = policyHeader(quota.name, quota.limit);
    const state = `"${quota.name}";r=${usage.remaining};t=${resetSeconds}`;
    if (into) {
      into['RateLimit-Policy'] = policy;
      into.RateLimit = state;
    } else {
      res.setHeader('RateLimit-Policy', policy);
      res.setHeader('RateLimit', state);
    }
    return resetSeconds;
  };

  return {
    tryApply(req, res, principal, into) {
      const quota = quotaOf(req, principal);
      if (!quota) {
        if (principal) usage.record(principal, false);
        return true;
      }
      const state = counter.consumeNow?.(quota.key, quota.limit);
      if (state === undefined || !state.allowed) return false;
      setHeaders(res, quota, state, into);
      // Counted only once the request is decided: a false answer sends the request on to `apply`.
      if (principal) usage.record(principal, false);
      return true;
    },
    async apply(req, res, principal) {
      const quota = quotaOf(req, principal);
      if (!quota) {
        if (principal) usage.record(principal, false);
        return;
      }
      const state = await counter.consume(quota.key, quota.limit);
      const resetSeconds = setHeaders(res, quota, state);
      if (principal) usage.record(principal, !state.allowed);
      if (!state.allowed) {
        metrics.rateLimitRejected(quota.name);
        throw new RateLimitedError(resetSeconds);
      }
    },
  };
}
