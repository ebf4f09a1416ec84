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
import { NO_USAGE, type Door, type UsageRecorder } from '../domain/ports/usage.js';
import { InvalidRequestError, NotAuthenticatedError, RateLimitedError } from '../domain/errors.js';
import { isRateLimitedPath, type Payer, type RateLimit } from './rate-limit.js';
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
  /** The door it came through (usage report): REST unless a door says otherwise. */
  door: Door;
  /** The operation it was, once known (the rights step, the shortcut, a door's action). */
  operation?: string;
  /** Quota points charged so far. */
  points: number;
  /** Refused for its quota (429). */
  limited: boolean;
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

/**
 * Requests made inside the service for a caller whose identity a door already decided (an MCP tool
 * call's operation, made in-process): the caller step takes that caller's context instead of reading
 * the request, and counts the request as usual.
 */
const adopted = new WeakMap<IncomingMessage, CallerOf>();

/** Who an in-process request acts for: the address, credentials and principal of the door's own caller, and its door. */
export interface CallerOf {
  address: string;
  /** The credentials that passed (the rights step matches the operation's requirements against them). */
  credentials: readonly Credential[];
  principal: Principal | undefined;
  door: Door;
}

/** Marks `req` (made in-process, before it reaches the app) as acting for `caller`; see `adopted`. */
export function actFor(req: IncomingMessage, caller: CallerOf): void {
  adopted.set(req, caller);
}

export interface CallerStepOptions {
  address: (req: IncomingMessage) => string;
  /** `credentialCheck` of the contract. */
  checkCredentials: (req: IncomingMessage, done: CredentialsDone) => void;
  /** Request quotas; none when absent. */
  rateLimit?: RateLimit | undefined;
  /**
   * Paths whose callers are identified but not charged here: a door that prices each of its messages
   * itself (`/mcp`). A bad credential is still charged to the address, as everywhere.
   */
  identifyOnly?: ReadonlySet<string> | undefined;
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
  const identifyOnly = options.identifyOnly ?? new Set<string>();
  return (req, path, res, headers, done) => {
    const actingFor = adopted.get(req);
    const context: RequestContext =
      actingFor === undefined
        ? { address: address(req), credentials: [], principal: undefined, door: 'rest', points: 0, limited: false }
        : { address: actingFor.address, credentials: actingFor.credentials, principal: actingFor.principal, door: actingFor.door, points: 0, limited: false };
    req.caller = context;
    const charge = (payer: Payer, end: () => void) => {
      if (rateLimit === undefined || rateLimit.tryApply(payer, res, headers)) end();
      else
        rateLimit.apply(payer, res).then(end, (err: unknown) => {
          if (err instanceof RateLimitedError) context.limited = true;
          done(err);
        });
    };
    if (actingFor !== undefined) {
      charge(context, () => {
        context.points = 1;
        done();
      });
      return;
    }
    const counted = isRateLimitedPath(path);
    // Outside /api (the documents, the console) and on health nothing is counted, and no credential is asked for.
    if (!counted && !identifyOnly.has(path)) {
      done();
      return;
    }
    checkCredentials(req, (refusal, passed) => {
      const credentialsRefused = refusal !== null && refusal !== undefined;
      if (!credentialsRefused) {
        context.credentials = passed;
        context.principal = passed[0]?.principal;
        if (!counted) {
          done();
          return;
        }
      }
      charge(context, () => {
        context.points = 1;
        done(credentialsRefused ? refusal : undefined);
      });
    });
  };
}

/** A credential that arrived inside a message rather than a header (a WebSocket `auth` action). */
export interface MessageCredential {
  scheme: 'bearer' | 'apiKey';
  value: string;
}

/**
 * The caller step for the actions of the doors that are not one HTTP request each (DESIGN 24): a
 * WebSocket's actions, an MCP message. The same identity, price and quota as a request: a door hands
 * its action here with the context its connection's caller step yielded, and never reads a
 * credential, an address or a quota itself.
 */
export interface Admission {
  /**
   * Checks a credential sent in a message, as the caller step checks a header: resolves with its
   * principal. A bad one is charged 1 point to the context's address (so guessing through any door is
   * throttled like REST) and rejects with its 401, or with 429 once the address cannot pay.
   */
  authenticate(context: Pick<RequestContext, 'address'>, credential: MessageCredential, door: Door): Promise<Principal>;
  /**
   * Charges `points` for `operation` through `door` to the context's payer (its principal, else its
   * address) and meters it; resolves when the action may go on, rejects with `RateLimitedError` when
   * the payer cannot pay (nothing is to be done then).
   */
  charge(context: Pick<RequestContext, 'address' | 'principal'>, door: Door, operation: string, points: number, into?: Record<string, string>): Promise<void>;
}

export interface AdmissionOptions {
  /** `credentialCheck` of the contract. */
  checkCredentials: (req: IncomingMessage, done: CredentialsDone) => void;
  /** The (lower-case) header of the contract's API-key scheme; none when the contract has none. */
  apiKeyHeader: string | undefined;
  rateLimit?: RateLimit | undefined;
  usage?: UsageRecorder | undefined;
}

export function createAdmission(options: AdmissionOptions): Admission {
  const { checkCredentials, apiKeyHeader, rateLimit } = options;
  const usage = options.usage ?? NO_USAGE;
  const charge: Admission['charge'] = async (context, door, operation, points, into) => {
    try {
      if (rateLimit !== undefined) await rateLimit.apply(context, undefined, points, into);
    } catch (err) {
      if (context.principal !== undefined) usage.record(context.principal, { door, operation, points: 0, limited: err instanceof RateLimitedError });
      throw err;
    }
    if (context.principal !== undefined) usage.record(context.principal, { door, operation, points, limited: false });
  };
  return {
    charge,
    authenticate(context, credential, door) {
      const header = credential.scheme === 'bearer' ? 'authorization' : apiKeyHeader;
      if (header === undefined) return Promise.reject(new InvalidRequestError([{ path: 'auth', message: 'this service takes no API keys' }]));
      const value = credential.scheme === 'bearer' ? `Bearer ${credential.value}` : credential.value;
      // The same check as a request's headers: a stand-in request that carries this one credential.
      const carrier = { headers: { [header]: value } } as unknown as IncomingMessage;
      return new Promise<Principal>((resolve, reject) => {
        checkCredentials(carrier, (refusal, passed) => {
          const principal = passed[0]?.principal;
          if ((refusal === null || refusal === undefined) && principal !== undefined) {
            resolve(principal);
            return;
          }
          // Refused: charged to the address, like a request with a bad credential.
          charge({ address: context.address, principal: undefined }, door, 'auth', 1).then(
            () => reject(refusal ?? new NotAuthenticatedError()),
            reject,
          );
        });
      });
    },
  };
}
