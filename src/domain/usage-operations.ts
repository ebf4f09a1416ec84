/**
 * The names the usage report counts actions under (DESIGN 24): the contract's operationIds, the doors'
 * own actions below, and `unmatched`. The set is fixed when the service starts, so the shared counters
 * and the database hold a bounded number of rows per caller and day whatever a caller sends: a name
 * outside it is counted as `unmatched`.
 */
import type { Door } from './ports/usage.js';

/** Every door, in the order the report lists them. */
export const DOORS: readonly Door[] = ['rest', 'sse', 'mcp', 'ws'];

/** What an action that matched no operation is counted as (a 404, a method not allowed, an unknown message). */
export const UNMATCHED_OPERATION = 'unmatched';

/**
 * The doors' own actions: the WebSocket API's (asyncapi.yaml) and the JSON-RPC methods an MCP client
 * may send (a tool call is counted under the tool's operationId when it names one).
 */
export const DOOR_ACTIONS: readonly string[] = [
  'ws:auth',
  'ws:subscribe',
  'ws:unsubscribe',
  'ws:ping',
  'mcp:initialize',
  'mcp:ping',
  'mcp:tools/list',
  'mcp:tools/call',
  'mcp:resources/list',
  'mcp:resources/templates/list',
  'mcp:resources/read',
  'mcp:resources/subscribe',
  'mcp:resources/unsubscribe',
  'mcp:prompts/list',
  'mcp:prompts/get',
  'mcp:completion/complete',
  'mcp:logging/setLevel',
  'mcp:tasks/get',
  'mcp:tasks/list',
  'mcp:tasks/result',
  'mcp:tasks/cancel',
  'mcp:notifications/initialized',
  'mcp:notifications/cancelled',
  'mcp:notifications/progress',
  'mcp:notifications/roots/list_changed',
  // A request to /mcp refused before its messages were read (origin, method, body), and a message that is no JSON-RPC request.
  'mcp:refused',
  'mcp:invalid',
];

/**
 * The function that names an action for the report: `operation` itself when it is one of
 * `operationIds` (the contract's), a door action or `unmatched`; `unmatched` otherwise.
 */
export function usageOperationNamer(operationIds: Iterable<string>): (operation: string) => string {
  const known = new Set<string>([...operationIds, ...DOOR_ACTIONS, UNMATCHED_OPERATION]);
  return (operation) => (known.has(operation) ? operation : UNMATCHED_OPERATION);
}
