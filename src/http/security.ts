/**
 * The contract's security, in two halves that run at two points of the one request path (app.ts):
 *
 * - `credentialCheck` (run by the caller step, before anything else): every credential a request
 *   sends, of any scheme the contract declares, is checked, whatever the operation. One bad credential
 *   refuses the request (401) even beside a good one: sending a token means wanting it checked, and a
 *   bad one must not pass as anonymous or hide behind a good key. One exception: the same value as
 *   `Authorization: Bearer <v>` and as the API-key header is one credential sent twice (a client
 *   generated from the contract sends its one secret as every scheme an operation lists, hey-api's
 *   with `auth: () => v`), checked once, as what its shape says it is: a JWT's three parts, a token;
 *   anything else, a key. So the pair never names more than `v` alone, in its own header, would.
 * - `contractSecurity` (run once the operation is known, before its input is validated): the
 *   operation's requirements (OpenAPI: any one requirement may pass; within one, every scheme must)
 *   against the credentials the caller step found. No credential the operation takes: anonymous when
 *   it lists `{}`, else 401 "Not authenticated"; a requirement met by credentials without the role it
 *   asks (`admin`): 403. So a caller who may not call an operation learns nothing about its input rules.
 */
import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Operation } from './contract.js';
import { AUTH_MESSAGES, readBearer } from '../domain/credentials.js';
import { AppError, ForbiddenError, InvalidCredentialsError, NotAuthenticatedError, StartupError } from '../domain/errors.js';
import type { AuthCallback, Principal } from '../domain/ports/accounts.js';

/**
 * Checks the credentials of a request, one method per kind of scheme the contract may declare; ends
 * with the principal, or NotAuthenticatedError / InvalidCredentialsError worded from `AUTH_MESSAGES`.
 * Only the request's headers are read.
 */
export interface Authenticator {
  /** `Authorization: Bearer <token>`; the step has already refused another scheme. */
  authenticateBearer(req: IncomingMessage, done: AuthCallback): void;
  /** The header the contract's API-key scheme names (see `credentialSchemes`). */
  authenticateApiKey(req: IncomingMessage, done: AuthCallback): void;
}

/** A security scheme of the contract that mds can check, as the request carries it. */
export interface CredentialScheme {
  /** Its name in `components.securitySchemes`. */
  name: string;
  kind: 'bearer' | 'apiKey';
  /** The (lower-case) request header that carries its credential. */
  header: string;
}

/** A credential the request sent and that passed: which scheme, and whom it names. */
export interface Credential {
  scheme: string;
  principal: Principal;
}

interface Scheme extends CredentialScheme {
  /** The credential in words: "a bearer token", "an API key". */
  noun: string;
  authenticate(req: IncomingMessage, done: AuthCallback): void;
}

interface Requirement {
  schemes: Array<{ scheme: Scheme; adminOnly: boolean }>;
}

interface OperationSecurity {
  /** `{}` is among the requirements (or there are none): a request without credentials passes as anonymous. */
  anonymous: boolean;
  requirements: Requirement[];
  /** The schemes the operation does not take, to tell a caller who offered one of them why it was not enough. */
  refused: Scheme[];
}

/**
 * The schemes of the contract's `components.securitySchemes`, in the order declared: the one place
 * that says which header carries which credential. Throws StartupError for a scheme mds cannot check
 * (anything but bearer tokens and API keys in a header).
 */
export function credentialSchemes(document: Record<string, unknown>): CredentialScheme[] {
  type Declared = Record<string, { type?: string; scheme?: string; in?: string; name?: string }>;
  const declared: Declared = (document.components as { securitySchemes?: Declared } | undefined)?.securitySchemes ?? {};
  return Object.entries(declared).map(([name, scheme]): CredentialScheme => {
    if (scheme.type === 'http' && scheme.scheme?.toLowerCase() === 'bearer') return { name, kind: 'bearer', header: 'authorization' };
    if (scheme.type === 'apiKey' && scheme.in === 'header' && scheme.name) return { name, kind: 'apiKey', header: scheme.name.toLowerCase() };
    throw new StartupError(`The contract's security scheme '${name}' (${scheme.type ?? 'no type'}) is not one mds can check: bearer tokens and API keys in a header are`);
  });
}

/** The schemes of the contract, each bound to its authenticator. */
function schemesOf(document: Record<string, unknown>, authenticator: Authenticator): Map<string, Scheme> {
  const schemes = new Map<string, Scheme>();
  for (const scheme of credentialSchemes(document)) {
    if (scheme.kind === 'bearer') {
      schemes.set(scheme.name, {
        ...scheme,
        noun: 'a bearer token',
        authenticate: (req, done) => {
          // Another scheme (Basic, or a bare token) is not a malformed bearer token: say what is expected.
          if (readBearer(req.headers.authorization).kind === 'other-scheme') done(new InvalidCredentialsError(AUTH_MESSAGES.notBearer));
          else authenticator.authenticateBearer(req, done);
        },
      });
    } else {
      schemes.set(scheme.name, { ...scheme, noun: 'an API key', authenticate: (req, done) => authenticator.authenticateApiKey(req, done) });
    }
  }
  return schemes;
}

/** The refusal the caller should hear when credentials failed: an unexpected failure (500) first, else the first 401 reason. */
function mostTelling(failures: unknown[]): unknown {
  return failures.find((f) => !(f instanceof AppError)) ?? failures.find((f) => f instanceof InvalidCredentialsError) ?? failures[0];
}

/** How a credential check ends, exactly once: the refusal, or the credentials that passed (empty: none sent). */
export type CredentialsDone = (err: unknown, passed: readonly Credential[]) => void;

const NONE: readonly Credential[] = Object.freeze([]);

/** A JWT in compact form: three base64url parts (the last, the signature, empty only for `alg: none`, which is refused). */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * When `req` sends one value twice, as `Authorization: Bearer <v>` and as the API-key header, the one
 * scheme to check it as (see the module comment); otherwise undefined. Exactly the same value, so two
 * different secrets are still two credentials, each checked.
 */
function sentTwice(req: IncomingMessage, bearer: Scheme, apiKey: Scheme): Scheme | undefined {
  const key = req.headers[apiKey.header];
  const authorization = readBearer(req.headers.authorization);
  if (typeof key !== 'string' || authorization.kind !== 'token' || authorization.token !== key) return undefined;
  return JWT_SHAPE.test(key) ? bearer : apiKey;
}

/**
 * Checks every credential `req` sends, of every scheme of the contract, in the contract's order; ends
 * with the ones that passed, or with the most telling refusal when any failed. A check that needs no
 * I/O ends before this call returns.
 */
export function credentialCheck(document: Record<string, unknown>, authenticator: Authenticator): (req: IncomingMessage, done: CredentialsDone) => void {
  const schemes = [...schemesOf(document, authenticator).values()];
  const bearer = schemes.find((scheme) => scheme.kind === 'bearer');
  const apiKey = schemes.find((scheme) => scheme.kind === 'apiKey');
  return (req, done) => {
    // Most requests send one credential or none: no arrays for them.
    let sent: Scheme | undefined;
    let more: Scheme[] | undefined;
    for (const scheme of schemes) {
      if (req.headers[scheme.header] === undefined) continue;
      if (sent === undefined) sent = scheme;
      else (more ??= [sent]).push(scheme);
    }
    if (sent === undefined) {
      done(null, NONE);
      return;
    }
    if (more?.length === 2 && bearer !== undefined && apiKey !== undefined) {
      const once = sentTwice(req, bearer, apiKey);
      if (once !== undefined) {
        sent = once;
        more = undefined;
      }
    }
    if (more === undefined) {
      const one = sent;
      one.authenticate(req, (err, principal) => {
        if (err !== null && err !== undefined) done(err, NONE);
        else if (principal === undefined) done(new Error(`the ${one.header} check ended with neither a principal nor an error`), NONE);
        else done(null, [{ scheme: one.name, principal }]);
      });
      return;
    }
    const all = more;
    const passed: Credential[] = [];
    const failures: unknown[] = [];
    const check = (at: number) => {
      const scheme = all[at]!;
      scheme.authenticate(req, (err, principal) => {
        if (err !== null && err !== undefined) failures.push(err);
        else if (principal === undefined) failures.push(new Error(`the ${scheme.header} check ended with neither a principal nor an error`));
        else passed.push({ scheme: scheme.name, principal });
        if (at + 1 < all.length) check(at + 1);
        else if (failures.length > 0) done(mostTelling(failures), NONE);
        else done(null, passed);
      });
    };
    check(0);
  };
}

function resolve(operation: Operation, schemes: Map<string, Scheme>): OperationSecurity {
  const taken = new Set(operation.security.flatMap((requirement) => Object.keys(requirement)));
  let anonymous = operation.security.length === 0;
  const requirements: Requirement[] = [];
  for (const requirement of operation.security) {
    const names = Object.keys(requirement);
    if (names.length === 0) {
      anonymous = true;
      continue;
    }
    requirements.push({
      schemes: names.map((name) => {
        const scheme = schemes.get(name);
        if (!scheme) throw new StartupError(`Operation ${operation.operationId} requires the security scheme '${name}', which components.securitySchemes does not declare`);
        return { scheme, adminOnly: (requirement[name] ?? []).includes('admin') };
      }),
    });
  }
  const refused = [...schemes.entries()].filter(([name]) => !taken.has(name)).map(([, scheme]) => scheme);
  return { anonymous, requirements, refused };
}

/** Why a caller whose credentials the operation does not take is not authenticated, in words. */
function notTaken(security: OperationSecurity, passed: readonly Credential[]): NotAuthenticatedError {
  const sent = security.refused.find((scheme) => passed.some((c) => c.scheme === scheme.name));
  if (sent === undefined) return new NotAuthenticatedError();
  const wanted = [...new Set(security.requirements.flatMap((r) => r.schemes.map(({ scheme }) => scheme.noun)))].join(' or ');
  return new NotAuthenticatedError(`this operation takes ${wanted}, not ${sent.noun}`);
}

/** The principal of the first scheme of `requirement` when the caller passed every scheme of it; else undefined. */
function met(requirement: Requirement, passed: readonly Credential[]): { principal: Principal; forbidden: boolean } | undefined {
  let first: Principal | undefined;
  let forbidden = false;
  for (const { scheme, adminOnly } of requirement.schemes) {
    const credential = passed.find((c) => c.scheme === scheme.name);
    if (credential === undefined) return undefined;
    first ??= credential.principal;
    if (adminOnly && !credential.principal.isAdmin) forbidden = true;
  }
  return first === undefined ? undefined : { principal: first, forbidden };
}

/** An authenticator for contracts checked without credentials (no scheme is ever offered). */
const NO_AUTHENTICATOR: Authenticator = {
  authenticateBearer: (_req, done) => done(new NotAuthenticatedError()),
  authenticateApiKey: (_req, done) => done(new NotAuthenticatedError()),
};

/**
 * The rights step for the operations of the contract; put it after the validator's metadata step (it
 * reads the matched operation's id from `req.openapi`) and before the request's input is validated.
 * It reads the credentials the caller step found (`req.caller.credentials`), never the headers; it sets
 * `req.principal` and `req.caller.anonymousAllowed`. Requests matched to no operation pass through
 * (they end as 404 or 405).
 */
export function contractSecurity(operations: readonly Operation[], document: Record<string, unknown>): RequestHandler {
  const schemes = schemesOf(document, NO_AUTHENTICATOR);
  const byOperation = new Map(operations.map((op) => [op.operationId, resolve(op, schemes)]));

  return (req: Request, _res: Response, next: NextFunction) => {
    const operationId = req.openapi?.schema.operationId;
    const security = operationId === undefined ? undefined : byOperation.get(operationId);
    if (security === undefined) {
      next();
      return;
    }
    const caller = req.caller;
    caller.anonymousAllowed = security.anonymous;
    caller.operation = operationId;
    const passed = caller.credentials;
    let forbidden: Principal | undefined;
    for (const requirement of security.requirements) {
      const outcome = met(requirement, passed);
      if (outcome === undefined) continue;
      if (outcome.forbidden) {
        forbidden ??= outcome.principal;
        continue;
      }
      req.principal = outcome.principal;
      next();
      return;
    }
    if (forbidden !== undefined) next(new ForbiddenError(undefined, forbidden));
    else if (security.anonymous) next();
    else next(notTaken(security, passed));
  };
}
