/**
 * The cached quote body (`QuoteResponse` as cached) taken apart without serializing the quote again:
 * batches and the stream reuse each quote's JSON exactly as it was cached.
 */
import type { components } from '../../generated/api.js';
import type { Quote } from '../../domain/ports/market-data.js';
import type { CachedRepresentation } from '../representation-cache.js';

type QuoteResponse = components['schemas']['QuoteResponse'];

/** How every quote body begins: `JSON.stringify` of a `QuoteResponse` writes its fields in this order. */
const QUOTE_BODY_HEAD = '{"success":true,"data":';
const QUOTE_BODY_SOURCE = ',"source":';
const QUOTE_BODY_UPDATED = ',"updated_at":';

/** A cached quote body taken apart: the quote's own JSON (as cached), its time, and the object when asked for. */
export interface DecodedQuote {
  json: string;
  updatedAt: string;
  /** The response's `source`: the provider that gave the quote. */
  source: string;
  readonly quote: Quote;
}

/** Decoded once per cached body (the engine hands out one `body` buffer per cached value). */
const decodedBodies = new WeakMap<Buffer, DecodedQuote>();
/** The JSON each decoded quote object came from, so the stream sends it without serializing it again. */
const quoteJson = new WeakMap<Quote, string>();

/** The quote of a cached quote body, without serializing it again; decoded once per cached body. */
export function decodeQuote(rep: CachedRepresentation): DecodedQuote {
  let decoded = decodedBodies.get(rep.body);
  if (decoded !== undefined) return decoded;
  decoded = quoteInBody(rep.value);
  decodedBodies.set(rep.body, decoded);
  return decoded;
}

/**
 * The quote in a quote body (`QuoteResponse` as cached), with its JSON exactly as the body holds it;
 * the object is parsed when first asked for.
 */
export function quoteInBody(value: string): DecodedQuote {
  const source = value.lastIndexOf(QUOTE_BODY_SOURCE);
  const updated = value.lastIndexOf(QUOTE_BODY_UPDATED);
  let json: string;
  let updatedAt: string;
  let from: string;
  if (value.startsWith(QUOTE_BODY_HEAD) && source > 0 && updated > source && value.endsWith('"}')) {
    json = value.slice(QUOTE_BODY_HEAD.length, source);
    updatedAt = value.slice(updated + QUOTE_BODY_UPDATED.length + 1, -2);
    from = value.slice(source + QUOTE_BODY_SOURCE.length + 1, updated - 1);
  } else {
    // Not in the shape this release writes: take the slow, sure way.
    const parsed = JSON.parse(value) as QuoteResponse;
    json = JSON.stringify(parsed.data);
    updatedAt = parsed.updated_at;
    from = parsed.source;
  }
  let quote: Quote | undefined;
  return {
    json,
    updatedAt,
    source: from,
    get quote() {
      if (quote === undefined) {
        quote = JSON.parse(json) as Quote;
        quoteJson.set(quote, json);
      }
      return quote;
    },
  };
}

/**
 * `JSON.stringify(quote)`, without the work when `quote` was read from a cached body (the stream's
 * first events): the JSON it came from is sent as it was cached.
 */
export function serializedQuote(quote: Quote): string {
  return quoteJson.get(quote) ?? JSON.stringify(quote);
}

/** Records that `quote` was parsed from `json`, so `serializedQuote(quote)` sends `json` as it is. */
export function serializedAs(quote: Quote, json: string): void {
  quoteJson.set(quote, json);
}
