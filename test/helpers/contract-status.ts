/**
 * The status codes openapi.yaml documents per operation, for tests that call the service over HTTP.
 * Response validation in startTestService covers what Express answers; the fast path for
 * GET /api/indices answers before Express, so tests check its statuses here as well.
 */
import { expect } from 'vitest';
import { loadContract } from '../../src/http/contract.js';

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

const document = loadContract().document as { paths: Record<string, Partial<Record<Method, { responses?: Record<string, unknown> }>>> };

/** The documented status codes of `method path` (an OpenAPI path such as `/api/indices`). */
export function documentedStatuses(method: Method, path: string): number[] {
  const responses = document.paths[path]?.[method]?.responses;
  if (!responses) throw new Error(`openapi.yaml has no operation ${method.toUpperCase()} ${path}`);
  return Object.keys(responses).map(Number);
}

/** Fails unless `res.status` is one openapi.yaml documents for `method path`. */
export function expectDocumentedStatus(res: Response, method: Method, path: string): void {
  expect(documentedStatuses(method, path), `${method.toUpperCase()} ${path} answered ${res.status}`).toContain(res.status);
}
