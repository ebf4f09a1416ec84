/**
 * Request quotas: every /api request but health counts against its caller's
 * quota, per client address (an IPv6 address's /64, the address the caller step found) for anonymous
 * callers and per user or API key otherwise. Called once per request, by the caller step (caller.ts): it counts the request, adds the
 * IETF httpapi `RateLimit-Policy` and `RateLimit` headers, and rejects with `RateLimitedError` past
 * the quota (the 429 envelope with `Retry-After`).
 */
import type { ServerResponse } from 'node:http';
import { RateLimitedError } from '../domain/errors.js';
import { addressGroup } from '../domain/address-group.js';
import { NO_METRICS, type Metrics } from '../domain/ports/metrics.js';
import type { Principal } from '../domain/ports/accounts.js';
import type { QuotaUsage, RequestCounter } from '../domain/ports/counters.js';

export interface RateLimitOptions {
  counter: RequestCounter;
  /** Requests per minute of one anonymous client address; 0 = no limit (RATE_LIMIT_ANONYMOUS_PER_MINUTE). */
  anonymousPerMinute: number;
  /** Requests per minute of one user or API key; 0 = no limit (RATE_LIMIT_AUTHENTICATED_PER_MINUTE). */
  authenticatedPerMinute: number;
  /** Counts every refusal under the quota's name (`anonymous`, `authenticated`, `key`). */
  metrics?: Pick<Metrics, 'rateLimitRejected'> | undefined;
}

/** Whom a charge is counted against: the caller step's address and principal (caller.ts `RequestContext`). */
export interface Payer {
  address: string;
  principal: Principal | undefined;
}

/** Counts quota points against callers; see the module comment. */
export interface RateLimit {
  /**
   * Charges `points` (default 1) to `payer` (its principal, or its client address when there is none),
   * sets the rate-limit headers on `res` (or puts them into `into`), and resolves when the action may
   * go on. Rejects with `RateLimitedError` when the payer cannot pay: nothing was done. Resolves at
   * once, without headers, when that quota is off.
   */
  apply(payer: Payer, res: ServerResponse | undefined, points?: number, into?: Record<string, string>): Promise<void>;
  /**
   * `apply` of one point without waiting, for the hot paths: true when the action may go on now (its
   * quota is off, or it was counted and allowed from what this instance knows; the headers are set);
   * false when the answer needs the shared counter, and then nothing was counted: call `apply`. With
   * `into`, the headers are put there (for a caller that writes all its headers at once) instead of
   * being set on `res`.
   */
  tryApply(payer: Payer, res: ServerResponse | undefined, into?: Record<string, string>): boolean;
}

/** True for the requests quotas apply to: every /api path except health. */
export function isRateLimitedPath(path: string): boolean {
  if (path.startsWith('/api/')) return path.length > 12 || !HEALTH.test(path);
  // Routing is case-insensitive (Express's default): /API/quotes is the same operation, counted the same.
  return API_PREFIX.test(path) && !HEALTH.test(path);
}

const API_PREFIX = /^\/api\//i;
const HEALTH = /^\/api\/health\/?$/i;

interface Quota {
  name: 'anonymous' | 'authenticated' | 'key';
  key: string;
  limit: number;
  /** The `RateLimit-Policy` value. */
  policy: string;
}

/** Addresses whose anonymous quota is remembered; past it the memory starts again empty. */
const REMEMBERED_ADDRESSES = 10_000;

export function createRateLimit(options: RateLimitOptions): RateLimit {
  const { counter, anonymousPerMinute, authenticatedPerMinute } = options;
  const metrics = options.metrics ?? NO_METRICS;
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
  const quota = (name: Quota['name'], key: string, limit: number): Quota => ({ name, key, limit, policy: policyHeader(name, limit) });

  // The anonymous quota depends on the address alone: built once per address, so a request composes
  // no key string and the counter finds its estimate under a string whose hash is already known.
  const anonymousLimit = perWindow(anonymousPerMinute);
  const anonymous = new Map<string, Quota>();
  const anonymousQuota = (address: string): Quota => {
    let known = anonymous.get(address);
    if (known === undefined) {
      if (anonymous.size >= REMEMBERED_ADDRESSES) anonymous.clear();
      known = quota('anonymous', `ip:${addressGroup(address)}`, anonymousLimit);
      anonymous.set(address, known);
    }
    return known;
  };

  const quotaOf = ({ address, principal }: Payer): Quota | undefined => {
    if (!principal) {
      if (anonymousPerMinute === 0) return undefined;
      return anonymousQuota(address);
    }
    const key = principal.id ?? `user:${principal.username}`;
    if (principal.rateLimitPerMinute !== undefined) {
      if (principal.rateLimitPerMinute === 0) return undefined;
      return quota('key', key, perWindow(principal.rateLimitPerMinute));
    }
    if (authenticatedPerMinute === 0) return undefined;
    return quota('authenticated', key, perWindow(authenticatedPerMinute));
  };

  const setHeaders = (res: ServerResponse | undefined, quota: Quota, usage: QuotaUsage, into?: Record<string, string>): number => {
    const resetSeconds = Math.max(0, Math.ceil(usage.resetMs / 1000));
    const policy = quota.policy;
    const state = `"${quota.name}";r=${usage.remaining};t=${resetSeconds}`;
    if (into) {
      into['RateLimit-Policy'] = policy;
      into.RateLimit = state;
    } else if (res !== undefined) {
      res.setHeader('RateLimit-Policy', policy);
      res.setHeader('RateLimit', state);
    }
    return resetSeconds;
  };

  return {
    tryApply(payer, res, into) {
      const quota = quotaOf(payer);
      if (!quota) return true;
      const state = counter.consumeNow?.(quota.key, quota.limit);
      if (state === undefined || !state.allowed) return false;
      setHeaders(res, quota, state, into);
      return true;
    },
    async apply(payer, res, points = 1, into) {
      const quota = quotaOf(payer);
      if (!quota) return;
      const state = await counter.consume(quota.key, quota.limit, points);
      const resetSeconds = setHeaders(res, quota, state, into);
      if (!state.allowed) {
        metrics.rateLimitRejected(quota.name);
        throw new RateLimitedError(resetSeconds);
      }
    },
  };
}
