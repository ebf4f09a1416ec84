/**
 * The one reading of credentials: `readBearer` (shared by the contract's security step and the bearer
 * strategy) and the credential headers, which come from the contract's security schemes.
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { readBearer } from '../../src/domain/credentials.js';
import { contractFromYaml, loadContract } from '../../src/http/contract.js';
import { credentialCheck, credentialSchemes } from '../../src/http/security.js';

const request = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

describe('readBearer', () => {
  it('when the header is exactly Bearer and one token, in any case, then the token is read', () => {
    expect(readBearer('Bearer abc.def.ghi')).toEqual({ kind: 'token', token: 'abc.def.ghi' });
    expect(readBearer('bearer\tabc')).toEqual({ kind: 'token', token: 'abc' });
    expect(readBearer('BEARER  abc')).toEqual({ kind: 'token', token: 'abc' });
  });

  it('when the Bearer scheme has no token or more than one, then the header is malformed', () => {
    for (const value of ['Bearer', 'Bearer ', 'Bearer a b', 'Bearer a ']) expect(readBearer(value), value).toEqual({ kind: 'malformed' });
  });

  it('when the header names another scheme or none, then it is another scheme; when absent, absent', () => {
    for (const value of ['Basic dTpw', 'Token abc', 'abc.def.ghi', 'Bearerabc', '']) expect(readBearer(value), value).toEqual({ kind: 'other-scheme' });
    expect(readBearer(undefined)).toEqual({ kind: 'absent' });
  });
});

describe('credential headers from the contract', () => {
  it("when the service's contract is read, then its schemes are the bearer token in Authorization and the API key in X-API-Key", () => {
    expect(credentialSchemes(loadContract().document)).toEqual([
      { name: 'bearerAuth', kind: 'bearer', header: 'authorization' },
      { name: 'apiKeyAuth', kind: 'apiKey', header: 'x-api-key' },
    ]);
  });

  it('when a contract names another API-key header, then that header, and only the declared ones, count as credentials', () => {
    const contract = contractFromYaml(`
openapi: 3.1.0
info: { title: t, version: 1.0.0 }
paths: {}
components:
  securitySchemes:
    keyAuth: { type: apiKey, in: header, name: X-Service-Key }
`);
    // A credential counts when the caller step checks it: the stand-in check says which header it was asked about.
    const checked: string[] = [];
    const check = credentialCheck(contract.document, {
      authenticateBearer: (_req, done) => done(null, { username: 'u', isAdmin: false, kind: 'user' }),
      authenticateApiKey: (req, done) => {
        checked.push(Object.keys(req.headers).join(','));
        done(null, { username: 'k', isAdmin: false, kind: 'api-key' });
      },
    });
    const hasCredentials = (req: IncomingMessage) => {
      let found = false;
      check(req, (_err, passed) => (found = passed.length > 0));
      return found;
    };

    expect(hasCredentials(request({ 'x-service-key': 'k' }))).toBe(true);
    expect(hasCredentials(request({ 'x-api-key': 'k', authorization: 'Bearer t' }))).toBe(false);
    expect(hasCredentials(request({}))).toBe(false);
  });
});
