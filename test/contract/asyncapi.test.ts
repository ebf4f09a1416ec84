/**
 * asyncapi.yaml (the WebSocket API) against the AsyncAPI 3.0.0 JSON Schema from @asyncapi/specs
 * (@asyncapi/cli's own validator needs a newer Node than ours), and each message's examples against
 * its own payload schema.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const document = parse(readFileSync(resolve(import.meta.dirname, '../../asyncapi.yaml'), 'utf8')) as {
  components: { schemas: Record<string, unknown>; messages: Record<string, { payload: unknown; examples?: Array<{ payload: unknown }> }> };
  channels: { quotes: { address: string; messages: Record<string, unknown> } };
};

describe('asyncapi.yaml', () => {
  it('when validated against the AsyncAPI 3.0.0 JSON Schema, then it has no error', () => {
    const schema = require('@asyncapi/specs/schemas/3.0.0-without-$id.json') as object;
    const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
    const valid = ajv.validate(schema, document);
    expect(ajv.errors ?? []).toEqual([]);
    expect(valid).toBe(true);
  });

  it('when each message example is checked against its payload schema, then it fits', () => {
    const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
    ajv.addSchema({ components: document.components }, 'doc');
    let checked = 0;
    for (const [name, message] of Object.entries(document.components.messages)) {
      const payload = JSON.parse(JSON.stringify(message.payload).replaceAll('"#/components/', '"doc#/components/')) as object;
      for (const example of message.examples ?? []) {
        const ok = ajv.validate(payload, example.payload);
        expect({ name, errors: ajv.errors ?? [] }).toEqual({ name, errors: [] });
        expect(ok).toBe(true);
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(5);
  });

  it('when it names the channel, then it is the path the server upgrades', () => {
    expect(document.channels.quotes.address).toBe('/api/ws');
    expect(Object.keys(document.channels.quotes.messages).sort()).toEqual(['auth', 'authenticated', 'bar', 'error', 'ping', 'pong', 'quote', 'subscribe', 'subscribed', 'unsubscribe', 'unsubscribed']);
  });
});
