/**
 * The quote-change message between instances (services/stream/fleet.ts, FORMATS.quoteChanges 2): a
 * typed `{symbol, version, quote}` whose quote is the announcing instance's JSON text, sent on to the
 * subscribers as it came; a message of another shape, or on the release before's channel, reaches
 * nobody.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { channels } from '../../src/domain/key-space.js';
import { quoteChangeMessage, quoteEventsChannel, readQuoteChange } from '../../src/services/stream/fleet.js';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { openStream } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait-for.js';
import { encodeEnvelope } from '../../src/infra/cache/cache-bus.js';

describe('the quote-change message', () => {
  it('when a change is written and read back, then it is the same change and its quote the same text; other shapes are not read', () => {
    // Spacing and a trailing zero that a parse and a serialization would not keep.
    const quote = '{"symbol":"AAPL", "price":189.50}';
    const message = quoteChangeMessage({ symbol: 'AAPL', version: 1_764_000_000_123, quote });
    expect(JSON.parse(message)).toEqual({ symbol: 'AAPL', version: 1_764_000_000_123, quote });
    expect(readQuoteChange(message)).toEqual({ symbol: 'AAPL', version: 1_764_000_000_123, quote });
    // The release before's message (format 1): the quote as an object.
    expect(readQuoteChange('{"s":"AAPL","v":1764000000123,"q":{"symbol":"AAPL","price":189.5}}')).toBeUndefined();
    expect(readQuoteChange('{"symbol":"AAPL","version":"1","quote":"{}"}')).toBeUndefined();
    expect(readQuoteChange('{"symbol":"AAPL","version":1,"quote":{}}')).toBeUndefined();
    expect(readQuoteChange('null')).toBeUndefined();
    expect(readQuoteChange('not json')).toBeUndefined();
  });

  describe('between instances', () => {
    let svc: TestService | undefined;
    let publisher: Redis | undefined;
    beforeAll(async () => {
      publisher = new Redis({ host: '127.0.0.1', port: inject('redisPort'), lazyConnect: true });
      await publisher.connect();
    });
    afterAll(async () => {
      await svc?.close();
      await publisher?.quit();
    });

    it("when another instance announces a change, then the stream gets its quote's text as announced at its version, and messages of another shape or format reach nobody", async () => {
      const provider = new ControlledProvider();
      const symbol = uniqueSymbol('MSG');
      provider.set(symbol, 100);
      svc = await startTestService({}, { provider });
      const stream = await openStream(`${svc.url}/api/stream?symbols=${symbol}`);
      const [first] = await stream.waitForEvents(1);
      const base = Number(first!.id);
      const cached = JSON.parse(first!.data) as Record<string, unknown>;
      const publish = (channel: string, message: string) => publisher!.publish(channel, encodeEnvelope({ from: 'another-instance', message }));
      // As the release before sent its messages: its sender's id, a colon, the message.
      const publishAsBefore = (channel: string, message: string) => publisher!.publish(channel, `another-instance:${message}`);

      // Neither the release before's message on its own channel, nor its shape on this release's
      // channel, nor a quote that is no JSON object is delivered; the typed message after them is.
      const older = JSON.stringify({ s: symbol, v: base + 1, q: { ...cached, price: 101 } });
      await publishAsBefore(`mds:v1:quote-events:${provider.name}`, older);
      await publish(quoteEventsChannel(provider.name), older);
      await publish(quoteEventsChannel(provider.name), quoteChangeMessage({ symbol, version: base + 2, quote: 'not json' }));
      const text = JSON.stringify({ ...cached, price: 102.5 }).replace('"price":102.5', '"price":102.50');
      await publish(quoteEventsChannel(provider.name), quoteChangeMessage({ symbol, version: base + 3, quote: text }));

      const events = await stream.waitForEvents(2);
      expect(channels.quoteEvents(provider.name)).toBe(`mds:v2:quote-events:${provider.name}`);
      expect(events[1]).toMatchObject({ event: 'quote', id: String(base + 3), data: text });
      await waitFor(() => svc!.logs.filter((l) => l.msg === 'ignoring an unreadable quote event').length === 2, { message: 'both unreadable messages logged' });
      expect(stream.events).toHaveLength(2);
      stream.close();
    });
  });
});
