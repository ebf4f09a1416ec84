/**
 * The messages of the WebSocket API (asyncapi.yaml): what a client's message asks for, read into a
 * typed action with its operation and price before anything is done, and the error event.
 */
import { AppError, InvalidRequestError } from '../../domain/errors.js';
import { priceOf } from '../../domain/prices.js';
import { canonicalSymbol, MAX_SYMBOLS } from '../../domain/symbols.js';
import type { MessageCredential } from '../caller.js';
import { toErrorResponse } from '../envelope.js';

/** What a client without credentials where they are required is told to send. */
export const AUTH_FIRST = 'send {"action":"auth","token"|"key":...} first';

/** An action as read from a message, before anything is done. */
export type Action = { name: 'auth'; credential: MessageCredential } | { name: 'subscribe'; symbols: string[]; bars: boolean } | { name: 'unsubscribe'; symbols: string[] } | { name: 'ping' };

/** What a message asks for: its operation and price, and the action, or why it is refused. */
export interface ReadMessage {
  /** The usage report's operation: `ws:<action>`, or `unmatched` for what is no action. */
  operation: string;
  /** The action's name when the message names one, even if its input is refused. */
  name: Action['name'] | undefined;
  points: number;
  action?: Action;
  refusal?: AppError;
}

/** The `error` event of a refusal: the envelope's code, error, detail and violations. */
export function errorEvent(err: unknown): string {
  const { body } = toErrorResponse(err);
  return JSON.stringify({ event: 'error', code: body.code, error: body.error, detail: body.detail, ...(body.violations ? { violations: body.violations } : {}) });
}

/** The canonical symbols of a `symbols` member: 1 to 50 valid symbols. Throws `InvalidRequestError`. */
function symbolsOf(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_SYMBOLS) {
    throw new InvalidRequestError([{ path: 'symbols', message: `must be an array of 1 to ${MAX_SYMBOLS} symbols` }]);
  }
  return [...new Set(value.map((s, i) => canonicalSymbol(typeof s === 'string' ? s : '', `symbols[${i}]`)))];
}

/** Whether a `subscribe` asks for live bars too: `"bars":"1m"` (the one interval built), or absent. Throws `InvalidRequestError`. */
function barsOf(value: unknown): boolean {
  if (value === undefined) return false;
  if (value !== '1m') throw new InvalidRequestError([{ path: 'bars', message: 'must be "1m" (the live bars interval) when given' }]);
  return true;
}

/** The credential of an `auth` message: exactly one of a token and a key. Throws `InvalidRequestError`. */
function credentialOf(message: { key?: unknown; token?: unknown }): MessageCredential {
  const token = typeof message.token === 'string' && message.token.length <= 4096 ? message.token : undefined;
  const key = typeof message.key === 'string' && message.key.length <= 512 ? message.key : undefined;
  if ((token === undefined) === (key === undefined)) {
    throw new InvalidRequestError([{ path: 'auth', message: 'must carry exactly one of token (a bearer token) and key (an API key)' }]);
  }
  return token !== undefined ? { scheme: 'bearer', value: token } : { scheme: 'apiKey', value: key! };
}

/** Reads one message into an action and its price; never throws (what is refused says so). */
export function readMessage(text: string): ReadMessage {
  let message: { action?: unknown; symbols?: unknown; key?: unknown; token?: unknown; bars?: unknown };
  try {
    message = JSON.parse(text) as typeof message;
  } catch {
    message = null as unknown as typeof message;
  }
  if (message === null || typeof message !== 'object' || Array.isArray(message)) {
    return { operation: 'unmatched', name: undefined, points: 1, refusal: new InvalidRequestError([{ path: 'message', message: 'must be a JSON object' }]) };
  }
  const name = message.action;
  if (name !== 'auth' && name !== 'subscribe' && name !== 'unsubscribe' && name !== 'ping') {
    return { operation: 'unmatched', name: undefined, points: 1, refusal: new InvalidRequestError([{ path: 'action', message: 'must be one of auth, subscribe, unsubscribe, ping' }]) };
  }
  const operation = `ws:${name}`;
  try {
    switch (name) {
      case 'auth':
        return { operation, name, points: 1, action: { name, credential: credentialOf(message) } };
      case 'subscribe': {
        const symbols = symbolsOf(message.symbols);
        // The price of getQuotes for the same symbols: what the look-ups will cost.
        return { operation, name, points: priceOf('symbols', { symbols }), action: { name, symbols, bars: barsOf(message.bars) } };
      }
      case 'unsubscribe':
        return { operation, name, points: 1, action: { name, symbols: symbolsOf(message.symbols) } };
      case 'ping':
        return { operation, name, points: 1, action: { name } };
    }
  } catch (err) {
    // Input refused before any work: the price of a refusal.
    return { operation, name, points: 1, refusal: err as AppError };
  }
}
