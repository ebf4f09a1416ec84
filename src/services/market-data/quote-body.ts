/**
 * The body of one quote (`QuoteResponse`), written once from the quote serialized once, with its parts
 * (where the quote's JSON lies, its source and time) kept beside it as a type in the cached entry:
 * batches, the indices and the stream reuse the quote's JSON exactly as it was cached, without
 * searching the body or serializing the quote again.
 */
import type { components } from '../../generated/api.js';
import type { Quote } from '../../domain/ports/market-data.js';
import type { BodyParts } from '../cache/cache-entry.js';

type QuoteResponse = components['schemas']['QuoteResponse'];

/** How every quote body begins: the quote's JSON follows at once. */
const QUOTE_BODY_HEAD = '{"success":true,"data":';

/** A quote body as written: the exact string to cache and send, its parts, and the quote's JSON. */
export interface QuoteBody {
  value: string;
  parts: BodyParts;
  json: string;
}

/**
 * The body of `quote`, byte for byte what `JSON.stringify` of its `QuoteResponse` writes, with the
 * quote serialized once and its place in the body recorded.
 */
export function writeQuoteBody(quote: Quote, source: string, updatedAt: string): QuoteBody {
  const json = JSON.stringify(quote);
  quoteJson.set(quote, json);
  const from = QUOTE_BODY_HEAD.length;
  const value = `${QUOTE_BODY_HEAD}${json},"source":${JSON.stringify(source)},"updated_at":${JSON.stringify(updatedAt)}}`;
  return { value, parts: { data: { from, to: from + json.length }, source, updatedAt }, json };
}

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
/** The JSON each quote object was written as or read from, so the stream sends it without serializing it again. */
const quoteJson = new WeakMap<Quote, string>();

/** The quote of a cached quote answer, without serializing it again; decoded once per cached body. */
export function decodeQuote(rep: { body: Buffer; parts?: BodyParts | undefined }): DecodedQuote {
  let decoded = decodedBodies.get(rep.body);
  if (decoded !== undefined) return decoded;
  decoded = quoteInBody(rep.body.toString('utf8'), rep.parts);
  decodedBodies.set(rep.body, decoded);
  return decoded;
}

/**
 * The quote in a quote body with its JSON exactly as the body holds it, at the place its parts name;
 * the object is parsed when first asked for. A body without parts (written by the release before)
 * is parsed whole.
 */
export function quoteInBody(value: string, parts: BodyParts | undefined): DecodedQuote {
  let json: string;
  let updatedAt: string;
  let source: string;
  if (parts !== undefined) {
    json = value.slice(parts.data.from, parts.data.to);
    updatedAt = parts.updatedAt;
    source = parts.source;
  } else {
    const parsed = JSON.parse(value) as QuoteResponse;
    json = JSON.stringify(parsed.data);
    updatedAt = parsed.updated_at;
    source = parsed.source;
  }
  let quote: Quote | undefined;
  return {
    json,
    updatedAt,
    source,
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
 * `JSON.stringify(quote)`, without the work when `quote` was written or read from a cached body (the
 * stream's first events): the JSON it came from is sent as it was cached.
 */
export function serializedQuote(quote: Quote): string {
  return quoteJson.get(quote) ?? JSON.stringify(quote);
}

/** Records that `quote` was parsed from `json`, so `serializedQuote(quote)` sends `json` as it is. */
export function serializedAs(quote: Quote, json: string): void {
  quoteJson.set(quote, json);
}
