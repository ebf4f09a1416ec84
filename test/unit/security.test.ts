/**
 * The contract security step: at startup it refuses a contract whose security it could not enforce
 * (a scheme type it cannot check, an operation naming an undeclared scheme); on a request it applies
 * OpenAPI's rules (any requirement, every scheme within one) to the credentials offered. Here with
 * stand-in checks, to reach what the contract does not use today (two schemes in one requirement);
 * the real checks over HTTP are in test/integration/auth-http.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { contractFromYaml } from '../../src/http/contract.js';
import { ForbiddenError, InvalidCredentialsError, NotAuthenticatedError, StartupError } from '../../src/domain/errors.js';
import type { Authenticator } from '../../src/http/security.js';
import type { AuthCallback } from '../../src/domain/ports/accounts.js';
import { contractSecurity, credentialCheck } from '../../src/http/security.js';
import { AUTH_MESSAGES } from '../../src/domain/credentials.js';

const authenticator: Authenticator = {
  authenticateBearer: (_req, done) => done(new Error('not used')),
  authenticateApiKey: (_req, done) => done(new Error('not used')),
};

function contractWith(schemes: string, security: string) {
  return contractFromYaml(`
openapi: 3.1.0
info: { title: t, version: 1.0.0 }
paths:
  /api/thing:
    get:
      operationId: getThing
      security: ${security}
      responses: { '200': { description: ok } }
components:
  securitySchemes:
${schemes}
`);
}

describe('contract security at startup', () => {
  it('when the contract declares bearer and header API key schemes, then the step is built', () => {
    const contract = contractWith('    bearerAuth: { type: http, scheme: bearer }\n    apiKeyAuth: { type: apiKey, in: header, name: X-API-Key }', '[{bearerAuth: [admin]}, {apiKeyAuth: []}]');

    expect(typeof contractSecurity(contract.operations, contract.document)).toBe('function');
    expect(contract.operations[0]!.security).toEqual([{ bearerAuth: ['admin'] }, { apiKeyAuth: [] }]);
  });

  it('when a scheme is OAuth2, then startup fails naming it', () => {
    const contract = contractWith('    oauth: { type: oauth2, flows: {} }', '[{oauth: []}]');

    expect(() => contractSecurity(contract.operations, contract.document)).toThrow(StartupError);
    expect(() => contractSecurity(contract.operations, contract.document)).toThrow(/'oauth' \(oauth2\)/);
  });

  it('when an operation names an undeclared scheme, then startup fails naming the operation and the scheme', () => {
    const contract = contractWith('    bearerAuth: { type: http, scheme: bearer }', '[{cookieAuth: []}]');

    expect(() => contractSecurity(contract.operations, contract.document)).toThrow(/getThing requires the security scheme 'cookieAuth'/);
  });
});

describe('contract security on requests', () => {
  type Principal = { username: string; isAdmin: boolean; kind: 'user' | 'api-key' };
  const user = (isAdmin: boolean): Principal => ({ username: 'u', isAdmin, kind: 'user' });
  const key: Principal = { username: 'k', isAdmin: true, kind: 'api-key' };

  /** Runs the step for operation getThing on a request with `headers`; resolves to what it decided. */
  function decide(security: string, headers: Record<string, string>, checks: { bearer?: Principal | Error; key?: Principal | Error }) {
    const contract = contractWith('    bearerAuth: { type: http, scheme: bearer }\n    apiKeyAuth: { type: apiKey, in: header, name: X-API-Key }', security);
    const calls: string[] = [];
    const answer = (name: string, result: Principal | Error | undefined, done: AuthCallback) => {
      calls.push(name);
      if (result instanceof Error || result === undefined) done(result ?? new Error('unexpected call'));
      else done(null, result);
    };
    // The caller step's half (every credential sent), then the operation's half (its requirements).
    const check = credentialCheck(contract.document, {
      authenticateBearer: (_req, done) => answer('bearer', checks.bearer, done),
      authenticateApiKey: (_req, done) => answer('key', checks.key, done),
    });
    const step = contractSecurity(contract.operations, contract.document);
    const req = { headers, openapi: { schema: { operationId: 'getThing' } } } as unknown as Parameters<typeof step>[0] & { principal?: Principal };
    return new Promise<{ err: unknown; principal: Principal | undefined; calls: string[] }>((done) => {
      check(req, (refused, passed) => {
        if (refused !== null && refused !== undefined) {
          done({ err: refused, principal: undefined, calls });
          return;
        }
        req.caller = { address: '127.0.0.1', credentials: passed, principal: passed[0]?.principal, door: 'rest', points: 0, limited: false };
        step(req, {} as never, (err?: unknown) => done({ err, principal: req.principal, calls }));
      });
    });
  }

  it('when a requirement names two schemes, then both credentials are needed and both are checked', async () => {
    const both = await decide('[{bearerAuth: [], apiKeyAuth: []}]', { authorization: 'Bearer t', 'x-api-key': 'k' }, { bearer: user(false), key });
    const one = await decide('[{bearerAuth: [], apiKeyAuth: []}]', { authorization: 'Bearer t' }, { bearer: user(false), key });
    const badKey = await decide('[{bearerAuth: [], apiKeyAuth: []}]', { authorization: 'Bearer t', 'x-api-key': 'k' }, { bearer: user(false), key: new InvalidCredentialsError('Invalid API key') });

    expect(both).toEqual({ err: undefined, principal: user(false), calls: ['bearer', 'key'] });
    expect(one.err).toBeInstanceOf(NotAuthenticatedError);
    // Every credential sent is checked by the caller step, whatever the operation takes (was: none checked).
    expect(one.calls).toEqual(['bearer']);
    expect((badKey.err as Error).message).toBe('Invalid API key');
    expect(badKey.principal).toBeUndefined();
  });

  it('when the first requirement fails for the role and the second passes, then the second one is the principal', async () => {
    const decided = await decide('[{bearerAuth: [admin]}, {apiKeyAuth: [admin]}]', { authorization: 'Bearer t', 'x-api-key': 'k' }, { bearer: user(false), key });

    expect(decided).toEqual({ err: undefined, principal: key, calls: ['bearer', 'key'] });
  });

  it('when one credential sent is bad, then it is refused beside a good one (401, not 403); an unexpected failure outranks it; valid without the role is 403', async () => {
    const badKey = await decide('[{bearerAuth: [admin]}, {apiKeyAuth: [admin]}]', { authorization: 'Bearer t', 'x-api-key': 'k' }, { bearer: user(false), key: new InvalidCredentialsError('Invalid API key') });
    const broken = new Error('database away');
    const unexpected = await decide('[{bearerAuth: [admin]}, {apiKeyAuth: [admin]}]', { authorization: 'Bearer t', 'x-api-key': 'k' }, { bearer: user(false), key: broken });
    const forbidden = await decide('[{bearerAuth: [admin]}, {apiKeyAuth: [admin]}]', { authorization: 'Bearer t' }, { bearer: user(false) });

    expect(badKey.err).toBeInstanceOf(InvalidCredentialsError);
    expect(unexpected.err).toBe(broken);
    expect(forbidden.err).toBeInstanceOf(ForbiddenError);
  });

  it('when one value is sent as both the bearer token and the API key, then it is one credential, checked once as what its shape says', async () => {
    const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln';
    const admins = '[{bearerAuth: [admin]}, {apiKeyAuth: [admin]}]';
    const token = await decide(admins, { authorization: `Bearer ${jwt}`, 'x-api-key': jwt }, { bearer: user(true), key: new InvalidCredentialsError('Invalid API key') });
    const apiKey = await decide(admins, { authorization: 'Bearer mds_k', 'x-api-key': 'mds_k' }, { bearer: new InvalidCredentialsError('Invalid token'), key });
    const badToken = await decide(admins, { authorization: `Bearer ${jwt}`, 'x-api-key': jwt }, { bearer: new InvalidCredentialsError('Invalid token'), key });
    const notAdmin = await decide(admins, { authorization: `Bearer ${jwt}`, 'x-api-key': jwt }, { bearer: user(false), key });
    const keyWhereTokensOnly = await decide('[{bearerAuth: []}]', { authorization: 'Bearer mds_k', 'x-api-key': 'mds_k' }, { key });

    expect(token).toEqual({ err: undefined, principal: user(true), calls: ['bearer'] });
    expect(apiKey).toEqual({ err: undefined, principal: key, calls: ['key'] });
    // Never more than the value alone: a bad token is not tried as a key, a user's token stays the user's.
    expect(badToken.calls).toEqual(['bearer']);
    expect((badToken.err as Error).message).toBe('Invalid token');
    expect(notAdmin.err).toBeInstanceOf(ForbiddenError);
    expect(notAdmin.calls).toEqual(['bearer']);
    expect(keyWhereTokensOnly.err).toBeInstanceOf(NotAuthenticatedError);
    expect((keyWhereTokensOnly.err as Error).message).toContain('this operation takes a bearer token, not an API key');
  });

  it('when the bearer token and the API key differ, even by a character, then both are checked and a bad one refuses', async () => {
    const admins = '[{bearerAuth: [admin]}, {apiKeyAuth: [admin]}]';
    const differ = await decide(admins, { authorization: 'Bearer mds_k', 'x-api-key': 'mds_K' }, { bearer: new InvalidCredentialsError('Invalid token'), key });
    const malformed = await decide(admins, { authorization: 'Bearer mds_k x', 'x-api-key': 'mds_k x' }, { bearer: new InvalidCredentialsError(AUTH_MESSAGES.badAuthorizationHeader), key });

    expect(differ.calls).toEqual(['bearer', 'key']);
    expect((differ.err as Error).message).toBe('Invalid token');
    expect(malformed.calls).toEqual(['bearer', 'key']);
    expect((malformed.err as Error).message).toBe(AUTH_MESSAGES.badAuthorizationHeader);
  });

  it('when anonymous callers are welcome and a credential is sent, then it is checked and a bad one is refused', async () => {
    const none = await decide('[{}, {bearerAuth: []}]', {}, {});
    const bad = await decide('[{}, {bearerAuth: []}]', { authorization: 'Bearer t' }, { bearer: new InvalidCredentialsError('Invalid token') });
    const notBearer = await decide('[{}, {bearerAuth: []}]', { authorization: 'Basic dTpw' }, {});

    expect(none).toEqual({ err: undefined, principal: undefined, calls: [] });
    expect((bad.err as Error).message).toBe('Invalid token');
    expect((notBearer.err as Error).message).toBe(AUTH_MESSAGES.notBearer);
    expect(notBearer.calls).toEqual([]);
  });
});
