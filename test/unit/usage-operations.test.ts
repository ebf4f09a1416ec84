/**
 * The names the usage report counts under: the contract's operationIds, the doors' own actions and
 * `unmatched`, nothing else, so a caller cannot make the counters grow by naming things.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadContract } from '../../src/http/contract.js';
import { DOOR_ACTIONS, DOORS, UNMATCHED_OPERATION, usageOperationNamer } from '../../src/domain/usage-operations.js';

const operationIds = loadContract().operations.map((op) => op.operationId);

describe('usage operation names', () => {
  it('when an operationId of the contract, a door action or unmatched is named, then it is kept', () => {
    const name = usageOperationNamer(operationIds);
    for (const id of [...operationIds, ...DOOR_ACTIONS, UNMATCHED_OPERATION]) expect(name(id)).toBe(id);
    expect(name('getQuotes')).toBe('getQuotes');
  });

  it('when any other name comes, then it is counted as unmatched', () => {
    const name = usageOperationNamer(operationIds);
    for (const other of ['getquote', 'ws:sudo', 'mcp:tools/destroy', '', 'getQuote ', '__proto__', 'x'.repeat(10_000)]) expect(name(other)).toBe('unmatched');
  });

  it('when the names are listed, then each door action belongs to a door and none is an operationId', () => {
    for (const action of DOOR_ACTIONS) expect(DOORS).toContain(action.slice(0, action.indexOf(':')));
    expect(DOOR_ACTIONS.filter((action) => operationIds.includes(action))).toEqual([]);
    expect(new Set(DOOR_ACTIONS).size).toBe(DOOR_ACTIONS.length);
    // The operation column of usage_operations takes 96 characters.
    for (const id of [...operationIds, ...DOOR_ACTIONS]) expect(id.length).toBeLessThanOrEqual(96);
  });

  it('when the WebSocket API lists its client actions, then each is a door action', () => {
    const asyncapi = parse(readFileSync(new URL('../../asyncapi.yaml', import.meta.url), 'utf8')) as { components: { messages: Record<string, { payload?: { properties?: { action?: { const?: string } } } }> } };
    const actions = Object.values(asyncapi.components.messages)
      .map((message) => message.payload?.properties?.action?.const)
      .filter((action): action is string => action !== undefined);
    expect(actions.sort()).toEqual(['auth', 'ping', 'subscribe', 'unsubscribe']);
    for (const action of actions) expect(DOOR_ACTIONS).toContain(`ws:${action}`);
  });
});
