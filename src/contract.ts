/**
 * The contract, loaded once: the parsed OpenAPI document, its YAML text and JSON form, and the list
 * of operations that routing binds to handlers.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

export interface Operation {
  operationId: string;
  method: (typeof HTTP_METHODS)[number];
  /** OpenAPI path, e.g. `/api/admin/users/{username}`. */
  path: string;
  /** Express path, e.g. `/api/admin/users/:username`. */
  expressPath: string;
  /** True when at least one security requirement applies (no anonymous alternative). */
  secured: boolean;
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
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', 'openapi.yaml');
}

export function loadContract(path = defaultContractPath()): Contract {
  const yaml = readFileSync(path, 'utf8');
  return contractFromYaml(yaml);
}

export function contractFromYaml(yaml: string): Contract {
  const document = parse(yaml) as Record<string, unknown>;
  const paths = (document.paths ?? {}) as Record<string, Record<string, { operationId?: string; security?: unknown[] }>>;
  const globalSecurity = (document.security as unknown[] | undefined) ?? [];
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(paths)) {
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (!op) continue;
      const security = op.security ?? globalSecurity;
      operations.push({
        operationId: op.operationId ?? `${method} ${path}`,
        method,
        path,
        expressPath: path.replace(/\{([^}]+)\}/g, ':$1'),
        secured: security.length > 0 && !security.some((s) => s && typeof s === 'object' && Object.keys(s).length === 0),
      });
    }
  }
  const info = (document.info ?? {}) as { version?: string };
  return { document, yaml, json: JSON.stringify(document), version: info.version ?? '0.0.0', operations };
}
