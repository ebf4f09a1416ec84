/**
 * The contract's security, enforced per operation.
 *
 * Each operation lists its security requirements (OpenAPI: any one requirement may pass; within one,
 * every scheme must). Here they are resolved once per operation at startup, and a request checks only
 * the credentials it offers: a requirement whose headers are all present is tried, in the contract's
 * order, until one passes. The rules:
 *
 * - No credential the operation takes: anonymous when the operation lists `{}` (public data), else 401
 *   "Not authenticated". A header for a scheme the operation does not list is ignored.
 * - Credentials offered: they are checked even where anonymous callers are welcome (sending a token
 *   means wanting it checked; a bad one must not pass as anonymous). The first requirement that
 *   passes sets `req.principal`; when none does, the answer is the most telling refusal: an
 *   unexpected failure (500), else 403 (valid but without the role), else the first 401 reason.
 * - A scope `admin` in a requirement needs an administrator.
 *
 * express-openapi-validator's own security step did this with every scheme's handler run for every
 * request, an Error built (stack trace included) for each absent header, and a bare 401/403 whose
 * reason had to be looked up afterwards; it is turned off (`validateSecurity: false`) in favour of
 * this one step.
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
 */
export interface Authenticator {
  /** `Authorization: Bearer <token>`; the step has already refused another scheme. */
  authenticateBearer(req: Request, done: AuthCallback): void;
  /** The header the contract's API-key scheme names (see `credentialSchemes`). */
  authenticateApiKey(req: Request, done: AuthCallback): void;
}

/** A security scheme of the contract that mds can check, as the request carries it. */
export interface CredentialScheme {
  /** Its name in `components.securitySchemes`. */
  name: string;
  kind: 'bearer' | 'apiKey';
  /** The (lower-case) request header that carries its credential. */
  header: string;
}

interface Scheme extends CredentialScheme {
  /** The credential in words: "a bearer token", "an API key". */
  noun: string;
  authenticate(req: Request, done: AuthCallback): void;
}

interface Requirement {
  schemes: Array<{ scheme: Scheme; adminOnly: boolean }>;
}

interface OperationSecurity {
  /** `{}` is among the requirements: a request without credentials passes as anonymous. */
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

/**
 * A test of whether a request carries any credential of the contract's schemes (which must then be
 * checked before the caller, and so its quota, is known), for the quota step and the fast path.
 */
export function credentialCheck(document: Record<string, unknown>): (req: IncomingMessage) => boolean {
  const headers = [...new Set(credentialSchemes(document).map((scheme) => scheme.header))];
  return (req) => {
    for (const header of headers) if (req.headers[header] !== undefined) return true;
    return false;
  };
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

/** Why a request offering only credentials the operation does not take is not authenticated, in words. */
function notTaken(security: OperationSecurity, headers: Request['headers']): NotAuthenticatedError {
  const sent = security.refused.find((scheme) => headers[scheme.header] !== undefined);
  if (sent === undefined) return new NotAuthenticatedError();
  const wanted = [...new Set(security.requirements.flatMap((r) => r.schemes.map(({ scheme }) => scheme.noun)))].join(' or ');
  return new NotAuthenticatedError(`this operation takes ${wanted}, not ${sent.noun}`);
}

/**
 * Checks one requirement whose credentials are all present, scheme after scheme; ends with the first
 * scheme's principal when every one passes (and has the role the requirement asks for).
 */
function satisfy(requirement: Requirement, req: Request, done: AuthCallback): void {
  const schemes = requirement.schemes;
  let principal: Principal | undefined;
  const check = (at: number) => {
    const { scheme, adminOnly } = schemes[at]!;
    scheme.authenticate(req, (err, passed) => {
      if (err !== null && err !== undefined) done(err);
      else if (passed === undefined) done(new Error(`the ${scheme.header} check ended with neither a principal nor an error`));
      else if (adminOnly && !passed.isAdmin) done(new ForbiddenError(undefined, passed));
      else {
        principal ??= passed;
        if (at + 1 < schemes.length) check(at + 1);
        else done(null, principal);
      }
    });
  };
  check(0);
}

/** True when the request carries the credential of every scheme of `requirement`. */
function isOffered(requirement: Requirement, headers: Request['headers']): boolean {
  for (const { scheme } of requirement.schemes) if (headers[scheme.header] === undefined) return false;
  return true;
}

/** Tries the offered requirements in order; ends with the first principal, else with the most telling refusal. */
function satisfyAny(offered: Requirement[], req: Request, done: AuthCallback): void {
  const failures: unknown[] = [];
  const tryFrom = (at: number) => {
    satisfy(offered[at]!, req, (err, principal) => {
      if (err === null || err === undefined) done(null, principal);
      else {
        failures.push(err);
        if (at + 1 < offered.length) tryFrom(at + 1);
        else done(mostTelling(failures));
      }
    });
  };
  tryFrom(0);
}

/** The refusal the caller should hear when every offered requirement failed. */
function mostTelling(failures: unknown[]): unknown {
  return (
    failures.find((f) => !(f instanceof AppError)) ??
    failures.find((f) => f instanceof ForbiddenError) ??
    failures.find((f) => f instanceof InvalidCredentialsError) ??
    failures[0]
  );
}

/**
 * The security step for the operations of the contract; put it after the validator's metadata step
 * (it reads the matched operation's id from `req.openapi`). Requests the validator matched to no
 * operation pass through (they end as 404 or 405).
 */
export function contractSecurity(operations: readonly Operation[], document: Record<string, unknown>, authenticator: Authenticator): RequestHandler {
  const schemes = schemesOf(document, authenticator);
  const byOperation = new Map(operations.map((op) => [op.operationId, resolve(op, schemes)]));

  return (req: Request, _res: Response, next: NextFunction) => {
    const operationId = req.openapi?.schema.operationId;
    const security = operationId === undefined ? undefined : byOperation.get(operationId);
    if (security === undefined || security.requirements.length === 0) {
      next();
      return;
    }
    // Most requests offer one credential: no array for them.
    let first: Requirement | undefined;
    let offered: Requirement[] | undefined;
    for (const requirement of security.requirements) {
      if (!isOffered(requirement, req.headers)) continue;
      if (first === undefined) first = requirement;
      else (offered ??= [first]).push(requirement);
    }
    if (first === undefined) {
      if (security.anonymous) next();
      else next(notTaken(security, req.headers));
      return;
    }
    // A check that needs no I/O ends here, before this call returns; the request goes on at once.
    const decided: AuthCallback = (err, principal) => {
      if (err !== null && err !== undefined) next(err);
      else {
        req.principal = principal;
        next();
      }
    };
    if (offered === undefined) satisfy(first, req, decided);
    else satisfyAny(offered, req, decided);
  };
}
