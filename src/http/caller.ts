/**
 * The caller step: who is calling and from where, worked out once per request, before anything else
 * looks at the request (app.ts). It yields the request's context, `req.caller`, which every later step
 * reads: the client address, the credentials that passed, the principal, and its quota counted. No later
 * step reads the headers again to learn who is calling or from where.
 *
 * In order: the address (the socket's peer, or the first untrusted hop of X-Forwarded-For counted from
 * the right, as TRUST_PROXY says); every credential sent (`credentialCheck`: one bad one refuses the
 * request); the quota of every /api request but health, whatever its outcome will be, against the
 * principal when the credentials were good and the address otherwise. Over the quota: 429; else a bad
 * credential: 401 (the refusal counted first, so guessing keys is throttled like anything else).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import proxyaddr from 'proxy-addr';
import type { Principal } from '../domain/ports/accounts.js';
import { isRateLimitedPath, type RateLimit } from './rate-limit.js';
import type { Credential, CredentialsDone } from './security.js';

/** What the caller step learned about a request; see the module comment. */
export interface RequestContext {
  /** The client address (see `clientAddressOf`). */
  address: string;
  /** The credentials sent, every one of which passed (empty when none was sent). */
  credentials: readonly Credential[];
  /** Whom the request is counted against: the first credential's principal; undefined for anonymous. */
  principal: Principal | undefined;
  /** The operation admits callers without credentials (set by the rights step once the operation is known). */
  anonymousAllowed?: boolean;
  /** The route template the request was answered under, when the cached-answer shortcut answered it. */
  route?: string;
  /** True when the cached-answer shortcut answered it. */
  shortcut?: boolean;
}

declare module 'http' {
  interface IncomingMessage {
    /** The caller step's context; set on every request the app receives, before any other step. */
    caller: RequestContext;
    /** The request arrived as HEAD and is routed as GET; Node sends its answer without the body. */
    head?: boolean;
  }
}

/** TRUST_PROXY as config.ts parses it: off, a number of trusted hops, or trusted proxy addresses and CIDRs. */
export type TrustProxy = false | number | readonly string[];

/**
 * How the client address of a request is found: with `false`, the socket's peer; otherwise, walking
 * X-Forwarded-For from the right (the entry the nearest proxy appended), the first hop that is not
 * trusted (proxy-addr, as Express's `trust proxy` does with the same value). A hop that is not an IP
 * address (written by someone other than a trusted proxy) is never the address: the socket's peer is,
 * so a forged header cannot mint counter keys. Also returned: the trust function, for Express's `req.ip`.
 */
export function clientAddressOf(trust: TrustProxy): { address: (req: IncomingMessage) => string; trust: (address: string, hop: number) => boolean } {
  const peer = (req: IncomingMessage) => req.socket.remoteAddress ?? 'unknown';
  if (trust === false || trust === 0) return { address: peer, trust: () => false };
  const trusted = typeof trust === 'number' ? (_address: string, hop: number) => hop < trust : proxyaddr.compile([...trust]);
  return {
    trust: trusted,
    address: (req) => {
      // Without the header there is nothing to walk: the peer is the client (proxy-addr agrees).
      if (req.headers['x-forwarded-for'] === undefined) return peer(req);
      const found = proxyaddr(req, trusted);
      return isIP(found) !== 0 ? found : peer(req);
    },
  };
}

export interface CallerStepOptions {
  address: (req: IncomingMessage) => string;
  /** `credentialCheck` of the contract. */
  checkCredentials: (req: IncomingMessage, done: CredentialsDone) => void;
  /** Request quotas; none when absent. */
  rateLimit?: RateLimit | undefined;
}

/**
 * Runs the caller step for one request: sets `req.caller`, then calls `done` once, with the refusal
 * (429 over the quota, else 401 for a bad credential) or nothing. Headers the answer must carry
 * (`RateLimit`) are put into `headers` when decided without waiting, else set on `res`. A request
 * that needs no I/O (a configured key, a remembered token, a quota this instance can decide) ends
 * before this call returns.
 */
export function callerStep(options: CallerStepOptions): (req: IncomingMessage, path: string, res: ServerResponse, headers: Record<string, string>, done: (err?: unknown) => void) => void {
  const { address, checkCredentials, rateLimit } = options;
  return (req, path, res, headers, done) => {
    const context: RequestContext = { address: address(req), credentials: [], principal: undefined };
    req.caller = context;
    // Outside /api (the documents, the console) and on health nothing is counted, and no credential is asked for.
    if (!isRateLimitedPath(path)) {
      done();
      return;
    }
    checkCredentials(req, (refusal, passed) => {
      const credentialsRefused = refusal !== null && refusal !== undefined;
      if (!credentialsRefused) {
        context.credentials = passed;
        context.principal = passed[0]?.principal;
      }
      const end = () => done(credentialsRefused ? refusal : undefined);
      if (rateLimit === undefined || rateLimit.tryApply(req, res, context.principal, headers)) end();
      else rateLimit.apply(req, res, context.principal).then(end, done);
    });
  };
}
