/**
 * The MCP tools, generated from the contract at startup (DESIGN 22): every GET operation tagged
 * `Market data` or `Admin` that answers JSON becomes one tool. Nothing here is written per operation:
 * the name is the operationId in snake_case, the description its summary and the first sentence of
 * its description, the input schema its path and query parameters (their own JSON Schemas, `$ref`s
 * inlined). No output schema is given: the 200 answers' schemas were four fifths of an admin's
 * tools/list (51 of 64 KB), read by a model at every session's start; the structured content
 * is still the REST answer, which the contract describes. A tool call becomes the operation's own
 * HTTP request (see `requestOf`).
 */
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { JsonSchemaType, JsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { Contract, Operation } from '../contract.js';

/** The tags whose read operations become tools. */
const TOOL_TAGS = ['Market data', 'Admin'] as const;

/**
 * Query parameters a tool does not take: `format` chooses the representation (CSV, Arrow), and a
 * tool's answer is always the JSON one (the CSV is the history resource).
 */
const REPRESENTATION_PARAMETERS = new Set(['format']);

type Schema = Record<string, unknown>;

/** One parameter a tool passes on to its operation. */
export interface ToolParameter {
  name: string;
  in: 'path' | 'query';
  required: boolean;
}

export interface ToolSpec {
  /** `get_quote`: the operationId in snake_case. */
  name: string;
  operationId: string;
  /** `/api/quotes/{symbol}`. */
  path: string;
  description: string;
  /** A JSON Schema object: one property per parameter, `additionalProperties: false`. */
  inputSchema: Schema & { type: 'object'; properties: Record<string, Schema> };
  parameters: ToolParameter[];
  /** Which callers may call it, from the operation's security: anyone, anyone with credentials, or administrators. */
  audience: 'anyone' | 'authenticated' | 'admin';
}

/** `listMarketSessions` -> `list_market_sessions`. */
export function snakeCase(operationId: string): string {
  return operationId.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/([A-Z])([A-Z][a-z])/g, '$1_$2').toLowerCase();
}

/** `schema` with every local `$ref` replaced by what it points at; throws on a cycle (no tool schema may be infinite). */
export function inline(document: Schema, schema: unknown, seen: readonly string[] = []): unknown {
  if (Array.isArray(schema)) return schema.map((item) => inline(document, item, seen));
  if (schema === null || typeof schema !== 'object') return schema;
  const node = schema as Schema;
  const ref = node.$ref;
  if (typeof ref === 'string') {
    if (!ref.startsWith('#/')) throw new Error(`a tool schema refers outside the contract: ${ref}`);
    if (seen.includes(ref)) throw new Error(`a tool schema refers to itself: ${[...seen, ref].join(' -> ')}`);
    let target: unknown = document;
    for (const part of ref.slice(2).split('/')) target = (target as Schema | undefined)?.[part.replaceAll('~1', '/').replaceAll('~0', '~')];
    if (target === undefined) throw new Error(`a tool schema refers to nothing: ${ref}`);
    const { $ref: _ref, ...siblings } = node;
    const resolved = inline(document, target, [...seen, ref]) as Schema;
    return Object.keys(siblings).length === 0 ? resolved : { ...resolved, ...(inline(document, siblings, seen) as Schema) };
  }
  const out: Schema = {};
  for (const [key, value] of Object.entries(node)) out[key] = inline(document, value, seen);
  return out;
}

interface OperationObject {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: unknown[];
  responses?: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

interface ParameterObject {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: Schema;
}

/** Who may call `operation`: its security requirements say it (`{}` is anyone; an `admin` scope is administrators). */
function audienceOf(operation: Operation): ToolSpec['audience'] {
  if (operation.security.length === 0 || operation.security.some((requirement) => Object.keys(requirement).length === 0)) return 'anyone';
  const adminOnly = operation.security.every((requirement) => Object.values(requirement).some((scopes) => scopes.includes('admin')));
  return adminOnly ? 'admin' : 'authenticated';
}

/** The operations of the contract that become tools, in the contract's order. */
export function toolOperations(contract: Contract): Array<{ operation: Operation; object: OperationObject }> {
  const paths = (contract.document.paths ?? {}) as Record<string, Record<string, OperationObject>>;
  const chosen: Array<{ operation: Operation; object: OperationObject }> = [];
  for (const operation of contract.operations) {
    if (operation.method !== 'get') continue;
    const object = paths[operation.path]?.[operation.method];
    if (!object?.tags?.some((tag) => (TOOL_TAGS as readonly string[]).includes(tag))) continue;
    // A stream (Server-Sent Events) has no JSON answer to give as a tool result.
    if (object.responses?.['200']?.content?.['application/json'] === undefined) continue;
    chosen.push({ operation, object });
  }
  return chosen;
}

/**
 * `Get the quote of one symbol. Returns ...`: the summary and the description's first sentence (the
 * rest is for people reading the reference; a model reads every tool's description at every start).
 */
function toolDescription(object: OperationObject): string {
  const first = object.description?.match(/^[\s\S]*?\.(?=\s|$)/)?.[0] ?? object.description;
  return [object.summary, first].filter((text): text is string => typeof text === 'string' && text.length > 0).join('. ').replace(/\.\./g, '.');
}

/** The tools of `contract`; throws when one cannot be made (a parameter a tool cannot carry, a cyclic schema). */
export function generateTools(contract: Contract): ToolSpec[] {
  const document = contract.document;
  return toolOperations(contract).map(({ operation, object }) => {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    const parameters: ToolParameter[] = [];
    for (const declared of object.parameters ?? []) {
      const parameter = inline(document, declared) as ParameterObject;
      if (parameter.in === 'header' || parameter.in === 'cookie' || REPRESENTATION_PARAMETERS.has(parameter.name)) continue;
      if (parameter.in !== 'path' && parameter.in !== 'query') throw new Error(`${operation.operationId}: parameter ${parameter.name} is in ${parameter.in}`);
      const schema = { ...(parameter.schema ?? {}) };
      if (parameter.description !== undefined) schema.description = parameter.description;
      properties[parameter.name] = schema;
      const isRequired = parameter.in === 'path' || parameter.required === true;
      if (isRequired) required.push(parameter.name);
      parameters.push({ name: parameter.name, in: parameter.in, required: isRequired });
    }
    const answer = inline(document, object.responses?.['200']?.content?.['application/json']?.schema ?? {}) as Schema;
    // Structured content is the REST answer as it is, so it must be an object: the contract's {success, data}.
    if (answer.type === 'array') throw new Error(`${operation.operationId}: a tool's answer must be an object ({success, data}), not an array`);
    return {
      name: snakeCase(operation.operationId),
      operationId: operation.operationId,
      path: operation.path,
      description: toolDescription(object),
      inputSchema: { type: 'object', properties, ...(required.length > 0 ? { required } : {}), additionalProperties: false },
      parameters,
      audience: audienceOf(operation),
    };
  });
}

/** True when a caller (none, or one that is or is not an administrator) may call `tool`. */
export function mayCall(tool: Pick<ToolSpec, 'audience'>, caller: { isAdmin: boolean } | undefined): boolean {
  if (tool.audience === 'anyone') return true;
  if (caller === undefined) return false;
  return tool.audience === 'authenticated' || caller.isAdmin;
}

/**
 * The operation's request for a tool call: the path with its parameters filled in (encoded), the
 * query from the rest. Arguments the tool does not declare go into the query as they are, so the
 * contract's validation refuses them as it would over REST; a missing path parameter is refused here
 * (a path without it would be another route).
 */
export function requestOf(tool: ToolSpec, args: Record<string, unknown>): { path: string } | { missing: string[] } {
  const { pieces, names } = pathTemplateOf(tool);
  let path = pieces[0]!;
  let missing: string[] | undefined;
  for (let i = 0; i < names.length; i += 1) {
    const value = args[names[i]!];
    if (value === undefined || value === '') (missing ??= []).push(names[i]!);
    else path += pathSegment(scalar(value)) + pieces[i + 1]!;
  }
  if (missing !== undefined) return { missing };
  let query: URLSearchParams | undefined;
  for (const name in args) {
    const value = args[name];
    if (names.includes(name) || value === undefined || value === null) continue;
    (query ??= new URLSearchParams()).append(name, scalar(value));
  }
  const text = query === undefined ? '' : query.toString();
  return { path: text.length > 0 ? `${path}?${text}` : path };
}

/** A tool's path cut at its parameters: `/api/quotes/{symbol}` -> pieces `['/api/quotes/', '']`, names `['symbol']`. */
const pathTemplates = new WeakMap<ToolSpec, { pieces: string[]; names: string[] }>();
function pathTemplateOf(tool: ToolSpec): { pieces: string[]; names: string[] } {
  let template = pathTemplates.get(tool);
  if (template === undefined) {
    const parts = tool.path.split(/\{([^}]+)\}/);
    template = { pieces: parts.filter((_, i) => i % 2 === 0), names: parts.filter((_, i) => i % 2 === 1) };
    pathTemplates.set(tool, template);
  }
  return template;
}

/** A tool argument as a query or path value; an object or array is sent as JSON, which the contract refuses with its own message. */
function scalar(value: unknown): string {
  return typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : JSON.stringify(value);
}

/**
 * A value as one path segment: percent-encoded, and `.` or `..` with their dots encoded too, so a
 * value can never walk the path to another operation (`/api/quotes/..` is `/api/`).
 */
export function pathSegment(value: string): string {
  const encoded = encodeURIComponent(value);
  return encoded === '.' || encoded === '..' ? encoded.replaceAll('.', '%2E') : encoded;
}

const validators = new WeakMap<ToolSpec, JsonSchemaValidator<unknown>>();
let ajv: AjvJsonSchemaValidator | undefined;

/**
 * Why `args` break the tool's input schema (the operation's parameter rules: types, patterns,
 * ranges, no unknown members), in the schema's own words; undefined when they pass.
 */
export function argumentsProblem(tool: ToolSpec, args: Record<string, unknown>): string | undefined {
  let validate = validators.get(tool);
  if (validate === undefined) {
    ajv ??= new AjvJsonSchemaValidator();
    validate = ajv.getValidator(tool.inputSchema as JsonSchemaType);
    validators.set(tool, validate);
  }
  const result = validate(args);
  if (result.valid) return undefined;
  // Named as REST names a parameter (`query.interval`, `path.symbol`), so a tool error reads like the
  // REST one; an enum's values are named, since Ajv's words alone leave an agent guessing them.
  const located = result.errorMessage.replace(/data\/([A-Za-z0-9_]+)( must be equal to one of the allowed values)?/g, (_, name: string, enumerated: string | undefined) => {
    const where = `${tool.parameters.find((p) => p.name === name)?.in ?? 'query'}.${name}`;
    const allowed = tool.inputSchema.properties[name]?.enum;
    if (enumerated === undefined) return where;
    return Array.isArray(allowed) ? `${where}${enumerated} (${allowed.join(', ')})` : `${where}${enumerated}`;
  });
  return located.replaceAll('data ', 'arguments ');
}
