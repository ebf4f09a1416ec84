/**
 * Checks a body against a schema of openapi.yaml itself (OpenAPI 3.1 schemas are JSON Schema
 * 2020-12), for responses the validator middleware does not see: the fast path, raw bytes.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { loadContract } from '../../src/http/contract.js';

const contract = loadContract();
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default(ajv);
ajv.addSchema({ $id: 'openapi', components: (contract.document as { components: unknown }).components }, 'openapi');

/** The violations of `body` against `components/schemas/<name>`; empty when it conforms. */
export function schemaViolations(name: string, body: unknown): string[] {
  const validate = ajv.getSchema(`openapi#/components/schemas/${name}`);
  if (!validate) throw new Error(`openapi.yaml has no schema ${name}`);
  if (validate(body)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
}
