/**
 * What this instance's hub shares with the others: the quote-changes family of the key space
 * (`FORMATS.quoteChanges`: each symbol's version record and the typed message announcing a change)
 * and the fleet events it listens to (identity changed, the broadcast live again after a gap).
 *
 * How a change travels: the cache engine calls `onFill` after each quote it loads and stores; this
 * instance compares the quote with the fleet's version record of the symbol (in the cache store, so
 * every instance and a restart agree on what the last known quote was), and when it differs writes a
 * new record and publishes a `QuoteChange` on the broadcast channel. Every instance (this one included:
 * the broadcast delivers locally at once) hands it to its fan-out when it has subscribers of the
 * symbol. Every cold quote runs this, so what it needs is here and it goes no further while nobody
 * here follows the symbol or holds a credential to check (bench/files-crossed.ts counts the files).
 */
import { channels, keys } from '../../domain/key-space.js';
import type { Broadcast, CacheStore } from '../../domain/ports/cache.js';
import type { Logger } from '../../domain/ports/logger.js';
import type { Quote } from '../../domain/ports/market-data.js';
import { quoteInBody, serializedAs } from '../market-data/quote-body.js';
import type { FillListener } from '../cache/cache-types.js';
import type { BodyParts } from '../cache/cache-entry.js';

/** A version record outlives any quote's cache lifetime (at most an hour), so a restart still compares. */
const VERSION_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * The message announcing a change (format 2 of the family): the quote travels as its JSON text, exactly
 * as cached, so every instance sends it on to its subscribers without serializing it again. Format 1
 * carried the quote as an object, cut back out of the message text on receipt.
 */
export interface QuoteChange {
  symbol: string;
  /** When the change was seen, epoch ms: the event id of the quote on every stream. */
  version: number;
  /** The Quote's JSON. */
  quote: string;
}

/** The text of a `QuoteChange` on the channel. */
export function quoteChangeMessage(change: QuoteChange): string {
  return JSON.stringify({ symbol: change.symbol, version: change.version, quote: change.quote });
}

/** A message read back into a `QuoteChange`; undefined when it is not one. */
export function readQuoteChange(message: string): QuoteChange | undefined {
  let read: Partial<Record<keyof QuoteChange, unknown>> | null;
  try {
    read = JSON.parse(message) as typeof read;
  } catch {
    return undefined;
  }
  if (read === null || typeof read !== 'object') return undefined;
  const { symbol, version, quote } = read;
  if (typeof symbol !== 'string' || typeof version !== 'number' || typeof quote !== 'string') return undefined;
  return { symbol, version, quote };
}

/**
 * The channel on which instances of one provider announce quote changes. Announcements carry the
 * quote, so a fleet that mixes providers on one Redis keeps each provider's apart.
 */
export function quoteEventsChannel(provider: string): string {
  return channels.quoteEvents(provider);
}

/** What makes a quote different for a subscriber: every field but the market time of the price. */
export function fingerprintOf(quote: Quote): string {
  const { timestamp: _timestamp, ...rest } = quote;
  return JSON.stringify(rest);
}

/** A symbol's record: the version (epoch ms) and fingerprint of its last change. */
interface VersionRecord {
  v: number;
  f: string;
}

export interface FleetOptions {
  /** Registers a listener for the cache engine's fills (`RepresentationCache.onFill`). */
  onFill: (listener: FillListener) => () => void;
  broadcast: Broadcast;
  store: CacheStore;
  /** The market data provider's name: the channel and the records are its own. */
  provider: string;
  logger: Logger;
  now: () => number;
  /** The symbols this instance's subscribers follow: a change of another one stops here. */
  followed: ReadonlyMap<string, unknown>;
  /** Hands an announced change of a followed symbol to the fan-out. */
  receive: (symbol: string, quote: Quote, version: number) => void;
  /** The identities of this instance's open streams and sessions. */
  identities: ReadonlyMap<string, unknown>;
  /** The "identity changed" event (a key revoked, a user deleted or given a new password). */
  identityChanged: (identity: string) => void;
  /** The broadcast is live again after a gap: announcements and events may have been missed. */
  resynced: () => void;
}

export class Fleet {
  readonly #o: FleetOptions;

  constructor(options: FleetOptions) {
    this.#o = options;
  }

  /** Starts announcing this instance's fills and listening to the fleet; returns what stops it. */
  start(): Array<() => void> {
    const o = this.#o;
    return [
      o.broadcast.subscribe(quoteEventsChannel(o.provider), (message) => this.#onMessage(message)),
      o.broadcast.subscribe(channels.identityChanged, (identity) => o.identityChanged(identity)),
      // Only credentials can be rechecked: with no identified stream open there is nothing to do.
      o.broadcast.onResync(() => {
        if (o.identities.size > 0) o.resynced();
      }),
      o.onFill((fill) => {
        if (fill.kind === 'quote') void this.#onQuoteFill(fill.params, fill.text(), fill.parts);
      }),
    ];
  }

  /** The fleet's version of this exact quote, or now when the record names another (or none). */
  async versionOf(symbol: string, quote: Quote): Promise<number> {
    const record = await this.readRecord(symbol);
    return record !== undefined && record.f === fingerprintOf(quote) ? record.v : this.#o.now();
  }

  async readRecord(symbol: string): Promise<VersionRecord | undefined> {
    try {
      const entry = await this.#o.store.get(keys.quoteVersion(this.#o.provider, symbol));
      return entry === undefined ? undefined : (JSON.parse(entry.value) as VersionRecord);
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message, symbol }, 'quote version unreadable: treating the quote as changed');
      return undefined;
    }
  }

  #onMessage(message: string): void {
    const change = readQuoteChange(message);
    if (change === undefined) {
      this.#o.logger.warn('ignoring an unreadable quote event');
      return;
    }
    if (!this.#o.followed.has(change.symbol)) return;
    let quote: Quote;
    try {
      quote = JSON.parse(change.quote) as Quote;
    } catch {
      this.#o.logger.warn('ignoring an unreadable quote event');
      return;
    }
    if (quote === null || typeof quote !== 'object') return;
    // Sent on to the subscribers as it came.
    serializedAs(quote, change.quote);
    this.#o.receive(change.symbol, quote, change.version);
  }

  /** After a quote fill here: when it differs from the fleet's record, record and announce it. */
  async #onQuoteFill(symbol: string, value: string, parts: BodyParts | undefined): Promise<void> {
    try {
      const { quote, json } = quoteInBody(value, parts);
      const fingerprint = fingerprintOf(quote);
      const record = await this.readRecord(symbol);
      if (record?.f === fingerprint) return;
      const v = Math.max(this.#o.now(), (record?.v ?? 0) + 1);
      await this.#o.store.set(keys.quoteVersion(this.#o.provider, symbol), JSON.stringify({ v, f: fingerprint } satisfies VersionRecord), VERSION_TTL_MS);
      // The quote is the cached JSON itself, not a copy parsed and serialized again.
      await this.#o.broadcast.publish(quoteEventsChannel(this.#o.provider), quoteChangeMessage({ symbol, version: v, quote: json }));
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message, symbol }, 'could not announce a quote change');
    }
  }
}
