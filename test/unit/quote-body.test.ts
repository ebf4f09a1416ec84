import { describe, expect, it } from 'vitest';
import type { Quote } from '../../src/domain/ports/market-data.js';
import { quoteInBody, serializedQuote, writeQuoteBody } from '../../src/services/market-data/quote-body.js';
import { decodeEntry, encodeEntry } from '../../src/services/cache/cache-entry.js';

const QUOTE = {
  symbol: 'AAPL',
  name: 'Apple Inc. ,"source":"evil","updated_at":"x"}',
  price: 189.5,
  currency: 'USD',
  market_state: 'closed',
} as unknown as Quote;
const AT = '2026-11-26T16:00:00.000Z';

describe('the body of one quote', () => {
  it('when a quote body is written, then it is byte for byte what JSON.stringify of the response writes', () => {
    const written = writeQuoteBody(QUOTE, 'yahoo', AT);

    expect(written.value).toBe(JSON.stringify({ success: true, data: QUOTE, source: 'yahoo', updated_at: AT }));
    expect(written.json).toBe(JSON.stringify(QUOTE));
  });

  it('when a stored quote entry is read back, then its parts give the quote JSON, source and time without searching the body, whatever the quote contains', () => {
    const written = writeQuoteBody(QUOTE, 'polygon', AT);
    const entry = decodeEntry(encodeEntry({ outcome: 'found', body: written.value, parts: written.parts }, 0), 60_000, Date.now())?.value;
    if (entry?.outcome !== 'found') throw new Error('expected a found entry');

    const decoded = quoteInBody(entry.body, entry.parts);
    expect(entry.body).toBe(written.value);
    expect(decoded.json).toBe(JSON.stringify(QUOTE));
    expect(decoded.source).toBe('polygon');
    expect(decoded.updatedAt).toBe(AT);
    expect(decoded.quote).toEqual(QUOTE);
    expect(serializedQuote(decoded.quote)).toBe(decoded.json);
  });

  it('when a body has no parts (written by the release before), then it is read whole and gives the same quote', () => {
    const body = JSON.stringify({ success: true, data: QUOTE, source: 'yahoo', updated_at: AT });

    const decoded = quoteInBody(body, undefined);
    expect(decoded.json).toBe(JSON.stringify(QUOTE));
    expect(decoded.source).toBe('yahoo');
    expect(decoded.updatedAt).toBe(AT);
  });
});
