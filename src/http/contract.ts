/**
 * The contract, loaded once: the parsed OpenAPI document, its YAML text and JSON form, and the list
 * of operations that routing binds to handlers.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseDocument } from 'yaml';
import { isCostRule, type CostRule } from '../domain/prices.js';
import { StartupError } from '../domain/errors.js';

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

export interface Operation {
  operationId: string;
  method: (typeof HTTP_METHODS)[number];
  /** OpenAPI path, e.g. `/api/admin/users/{username}`. */
  path: string;
  /** Express path, e.g. `/api/admin/users/:username`. */
  expressPath: string;
  /** Its security requirements (its own, else the document's): scheme name to scopes; `{}` is anonymous. */
  security: Array<Record<string, string[]>>;
  /** Its price rule (`x-mds-cost`, domain/prices.ts). */
  cost: CostRule;
}

export interface Contract {
  /** The parsed document (the validator gets a deep copy: it mutates what it is given). */
  document: Record<string, unknown>;
  yaml: string;
  json: string;
  version: string;
  operations: Operation[];
}

/** `openapi.yaml` at the package root, from `src/` or `dist/` alike. */
export function defaultContractPath(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'openapi.yaml');
}

export function loadContract(path = defaultContractPath()): Contract {
  const yaml = readFileSync(path, 'utf8');
  return contractFromYaml(yaml);
}

/** The tag of the market-data operations that DATA_REQUIRES_AUTH closes to anonymous callers. */
export const MARKET_DATA_TAG = 'Market data';

/**
 * The contract with DATA_REQUIRES_AUTH applied: on every operation tagged `Market data`, the anonymous
 * alternative (`{}`) is dropped from its security requirements (a public one gets bearer or API key),
 * so the validator answers 401 without a token or key. The served YAML and JSON say the same, since they come from the adjusted document.
 * Unchanged (the same object) when `dataRequiresAuth` is false.
 */
export function withSecurityPolicy(contract: Contract, policy: { dataRequiresAuth: boolean }): Contract {
  if (!policy.dataRequiresAuth) return contract;
  // Edited as a YAML document, so the served text keeps its layout and comments.
  const doc = parseDocument(contract.yaml);
  const paths = (contract.document.paths ?? {}) as Record<string, Record<string, { tags?: string[]; security?: Array<Record<string, unknown>> }>>;
  for (const [path, item] of Object.entries(paths)) {
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (!op?.tags?.includes(MARKET_DATA_TAG)) continue;
      const named = (op.security ?? []).filter((requirement) => Object.keys(requirement).length > 0);
      // An operation written as public (`security: []`) still closes: a token or any API key opens it.
      const required = named.length > 0 ? named : [{ bearerAuth: [] }, { apiKeyAuth: [] }];
      doc.setIn(['paths', path, method, 'security'], doc.createNode(required));
    }
  }
  return contractFromYaml(doc.toString({ lineWidth: 0 }));
}

export function contractFromYaml(yaml: string): Contract {
  const document = parse(yaml) as Record<string, unknown>;
  const paths = (document.paths ?? {}) as Record<string, Record<string, { operationId?: string; security?: Array<Record<string, string[]>>; 'x-mds-cost'?: unknown }>>;
  const globalSecurity = (document.security as Array<Record<string, string[]>> | undefined) ?? [];
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(paths)) {
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (!op) continue;
      const security = op.security ?? globalSecurity;
      const operationId = op.operationId ?? `${method} ${path}`;
      const cost = op['x-mds-cost'] ?? 'fixed';
      if (!isCostRule(cost)) throw new StartupError(`Operation ${operationId} has x-mds-cost '${String(cost)}', not one of the price rules (domain/prices.ts)`);
      operations.push({
        operationId,
        method,
        path,
        expressPath: path.replace(/\{([^}]+)\}/g, ':$1'),
        security,
        cost,
      });
    }
  }
  const info = (document.info ?? {}) as { version?: string };
  return { document, yaml, json: JSON.stringify(document), version: info.version ?? '0.0.0', operations };
}
