/**
 * The contract security step refuses, at startup, a contract whose security it could not enforce:
 * a scheme type it cannot check, or an operation naming a scheme that is not declared. (What it
 * answers to requests is tested over HTTP in test/integration/auth-http.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { contractFromYaml } from '../../src/contract.js';
import { StartupError } from '../../src/errors.js';
import { contractSecurity } from '../../src/security.js';

const authenticator = {
  authenticateBearer: () => Promise.reject(new Error('not used')),
  authenticateApiKey: () => Promise.reject(new Error('not used')),
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

    expect(typeof contractSecurity(contract.operations, contract.document, authenticator)).toBe('function');
    expect(contract.operations[0]!.security).toEqual([{ bearerAuth: ['admin'] }, { apiKeyAuth: [] }]);
  });

  it('when a scheme is OAuth2, then startup fails naming it', () => {
    const contract = contractWith('    oauth: { type: oauth2, flows: {} }', '[{oauth: []}]');

    expect(() => contractSecurity(contract.operations, contract.document, authenticator)).toThrow(StartupError);
    expect(() => contractSecurity(contract.operations, contract.document, authenticator)).toThrow(/'oauth' \(oauth2\)/);
  });

  it('when an operation names an undeclared scheme, then startup fails naming the operation and the scheme', () => {
    const contract = contractWith('    bearerAuth: { type: http, scheme: bearer }', '[{cookieAuth: []}]');

    expect(() => contractSecurity(contract.operations, contract.document, authenticator)).toThrow(/getThing requires the security scheme 'cookieAuth'/);
  });
});
