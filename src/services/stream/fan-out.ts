/**
 * Delivery to the subscribers of this instance: what each symbol's subscribers were last sent, the
 * comparison that sends a quote only when it differs (and is not older), the SSE framing of events,
 * the bound on a stream's unsent bytes, the keep-alive, and live bars. A quote's JSON is taken once
 * per change (`serializedQuote`: the cached text itself) and written to every subscriber.
 */
import type { Logger } from '../../domain/ports/logger.js';
import type { Quote } from '../../domain/ports/market-data.js';
import { serializedQuote } from '../market-data/quote-body.js';
import type { StreamObserver } from './contracts.js';
import { fingerprintOf, type Fleet } from './fleet.js';
import type { Client, Subscribers } from './subscribers.js';

/** The last quote the subscribers of a symbol were sent. */
export interface Known {
  fingerprint: string;
  version: number;
  quote: Quote;
}

export interface FanOutOptions {
  subscribers: Subscribers;
  fleet: Fleet;
  logger: Logger;
  observer: StreamObserver;
  /** A stream whose unsent bytes pass this is dropped (STREAM_MAX_BUFFER_BYTES). */
  maxBufferedBytes: number;
  now: () => number;
}

export class FanOut {
  readonly #o: FanOutOptions;
  readonly #known = new Map<string, Known>();

  constructor(options: FanOutOptions) {
    this.#o = options;
  }

  /** What `symbol`'s subscribers were last sent, if it has any. */
  known(symbol: string): Known | undefined {
    return this.#known.get(symbol);
  }

  /** Records `quote` at `version` as what `symbol`'s subscribers have when nothing is recorded yet. */
  knowFirst(symbol: string, quote: Quote, version: number): void {
    if (!this.#known.has(symbol)) this.#known.set(symbol, { fingerprint: fingerprintOf(quote), version, quote });
  }

  /** Forgets a symbol nobody here follows any more. */
  forget(symbol: string): void {
    this.#known.delete(symbol);
  }

  /**
   * Delivers `quote` to the symbol's subscribers when it differs from what they were last sent and is
   * not older. Without a `version` (a quote read here rather than announced), the symbol's record
   * dates it, and a quote the record does not name is left alone.
   */
  async reconcile(symbol: string, quote: Quote, version?: number): Promise<void> {
    const subscribers = this.#o.subscribers.bySymbol.get(symbol);
    if (subscribers === undefined) return;
    const fingerprint = fingerprintOf(quote);
    const known = this.#known.get(symbol);
    if (known?.fingerprint === fingerprint) return;
    let v = version;
    if (v === undefined) {
      const record = await this.#o.fleet.readRecord(symbol);
      // The fleet has seen a later quote than this one (a copy read a moment before the change): its
      // announcement, or the next refresh, brings that one.
      if (record !== undefined && record.f !== fingerprint) return;
      v = record?.v ?? this.#o.now();
    }
    const latest = this.#known.get(symbol);
    if (latest?.fingerprint === fingerprint || (latest !== undefined && v < latest.version)) return;
    this.#known.set(symbol, { fingerprint, version: v, quote });
    const data = serializedQuote(quote);
    for (const client of [...(this.#o.subscribers.bySymbol.get(symbol) ?? [])]) this.send(client, 'quote', data, v, symbol);
  }

  /**
   * Sends a live bar (DESIGN 26, live-bars.ts) to this instance's subscribers of its symbol that asked
   * for bars. A bar carries no event id: ids are quote versions, which a reconnect resumes from.
   */
  sendBar(symbol: string, json: string): void {
    for (const client of [...(this.#o.subscribers.bySymbol.get(symbol) ?? [])]) {
      if (client.bars !== true || client.closed) continue;
      if (client.deliver !== undefined) client.deliver(symbol, json, client.lastId, 'bar');
      else this.write(client, `event: bar\ndata: ${json}\n\n`);
      this.#o.observer.event?.();
    }
  }

  /** Writes one event; drops the client when its unsent bytes pass the bound. */
  send(client: Client, event: string, data: string, version: number, symbol = ''): void {
    if (client.closed) return;
    client.lastId = Math.max(client.lastId, version);
    if (client.deliver !== undefined) {
      client.deliver(symbol, data, version, 'quote');
      this.#o.observer.event?.();
      return;
    }
    this.write(client, `event: ${event}\nid: ${client.lastId}\ndata: ${data}\n\n`);
    this.#o.observer.event?.();
  }

  /** Writes to an SSE stream; drops it when its unsent bytes pass the bound (it stopped reading). */
  write(client: Client, chunk: string): void {
    if (client.closed || client.sink === undefined) return;
    client.sink.write(chunk);
    if (client.sink.writableLength > this.#o.maxBufferedBytes) {
      this.#o.logger.warn({ address: client.address, bufferedBytes: client.sink.writableLength }, 'stream client dropped: it stopped reading');
      client.closed = true;
      client.sink.destroy();
      this.#o.subscribers.remove(client);
    }
  }

  /** The keep-alive comment to every SSE stream. */
  heartbeat(): void {
    for (const client of [...this.#o.subscribers.all]) if (client.sink !== undefined) this.write(client, ': keep-alive\n\n');
  }
}
