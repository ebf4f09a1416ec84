/**
 * Live quotes over Server-Sent Events and WebSocket sessions (`openSession`, the `/api/ws` API): the
 * hub that keeps every open stream of this instance, tells them about quote changes whichever
 * instance saw the change (polled, or pushed by an upstream socket: see live-feed.ts), and keeps their
 * symbols fresh. Streams and sessions share the limits per caller, per address and per instance.
 *
 * Its parts, one concern each: places.ts (the limits), subscribers.ts (who follows what),
 * fleet.ts (version records, the messages between instances, the fleet's events), fan-out.ts (delivery and SSE
 * framing), credential-watch.ts (revocation and expiry), refresh.ts (polling what no push covers).
 * Broadcast messages may be lost (Redis away, a reconnect): the refresh heals that.
 *
 * Event ids are versions: the epoch milliseconds at which the quote was seen to change, never
 * decreasing on one connection. `Last-Event-ID: N` on a reconnect means "I have every quote that
 * changed up to N": the first events then carry only the symbols whose version is later than N minus
 * a margin that covers clocks and delivery delays between instances (a duplicate rather than a gap).
 */
import { InvalidRequestError, ServiceBusyError, UnknownSymbolError } from '../../domain/errors.js';
import { identityOf } from '../../domain/identity.js';
import type { CredentialRecheck } from '../../domain/ports/accounts.js';
import type { Quote } from '../../domain/ports/market-data.js';
import { serializedQuote } from '../market-data/quote-body.js';
import type { LiveSession, QuoteStreamHubOptions, SessionDelivery, SessionEnd, StreamCaller, StreamObserver, StreamRequest } from './contracts.js';
import { CredentialWatch, RECHECK_INTERVAL_MS, type Opening } from './credential-watch.js';
import { FanOut } from './fan-out.js';
import { Places } from './places.js';
import { Fleet } from './fleet.js';
import { Refresh } from './refresh.js';
import { Subscribers, type Client } from './subscribers.js';

/** Symbols one WebSocket session follows at most (a stream's own bound). */
export const MAX_SESSION_SYMBOLS = 50;

/** The hub of this instance's quote streams. */
export class QuoteStreamHub {
  readonly #o: Required<Omit<QuoteStreamHubOptions, 'observer' | 'pushing' | 'credentials'>> & { observer: StreamObserver; pushing: (symbol: string) => boolean; credentials: CredentialRecheck | undefined };
  readonly #places: Places;
  readonly #subscribers: Subscribers;
  readonly #fleet: Fleet;
  readonly #fanOut: FanOut;
  readonly #watch: CredentialWatch;
  readonly #stop: Array<() => void> = [];
  #closed = false;

  constructor(options: QuoteStreamHubOptions) {
    const o = { retryMs: 3000, now: Date.now, ...options, observer: options.observer ?? {}, pushing: options.pushing ?? (() => false), credentials: options.credentials };
    this.#o = o;
    const closed = () => this.#closed;
    this.#places = new Places(o);
    const subscribers = new Subscribers(this.#places, o.observer, (symbol) => this.#fanOut.forget(symbol));
    this.#subscribers = subscribers;
    const watch = new CredentialWatch({ ...o, subscribers, closed });
    this.#watch = watch;
    this.#fleet = new Fleet({
      ...o,
      followed: subscribers.bySymbol,
      receive: (symbol, quote, version) => void this.#fanOut.reconcile(symbol, quote, version),
      identities: subscribers.byIdentity,
      identityChanged: (identity) => watch.identityChanged(identity),
      resynced: () => void watch.recheck(),
    });
    const fanOut = new FanOut({ ...o, subscribers, fleet: this.#fleet });
    this.#fanOut = fanOut;
    this.#stop.push(...this.#fleet.start());
    this.#every(options.heartbeatMs, () => fanOut.heartbeat());
    if (options.credentials !== undefined) this.#every(RECHECK_INTERVAL_MS, () => void this.#watch.recheck());
    if (options.refreshIntervalMs > 0) {
      const refresh = new Refresh({ ...o, intervalMs: o.refreshIntervalMs, symbols: () => this.subscribedSymbols(), reconcile: (symbol, quote) => fanOut.reconcile(symbol, quote), closed });
      this.#every(options.refreshIntervalMs, () => void refresh.tick());
    }
  }

  /** Open streams on this instance. */
  get size(): number {
    return this.#subscribers.all.size;
  }

  /** The symbols this instance's subscribers follow now. */
  subscribedSymbols(): string[] {
    return [...this.#subscribers.bySymbol.keys()];
  }

  /**
   * Opens a stream: checks the limits, reads the current quote of every symbol (through the cache),
   * then begins the response with `retry:`, a `missing` event naming unknown symbols (if any) and one
   * `quote` event per known symbol (on a reconnect, only those changed since `lastEventId`). Throws
   * before anything is sent: `TooManyRequestsError` over the per-address or per-caller limit, `ServiceBusyError`
   * over the instance's, `UnknownSymbolError` when no symbol is known, `DataSourceError` when the
   * upstream fails; `InvalidCredentialsError` when the caller's identity changed (a key revoked, a
   * user deleted) while the first quotes were read.
   */
  async open(request: StreamRequest): Promise<void> {
    const holder = this.#reserve(request);
    const identity = request.principal === undefined ? undefined : identityOf(request.principal);
    const opening: Opening | undefined = identity === undefined ? undefined : { identity, refusal: undefined };
    if (opening !== undefined) this.#watch.opening.add(opening);
    let reserved = true;
    const release = () => {
      if (!reserved) return;
      reserved = false;
      this.#places.release(holder);
    };
    let gone = false;
    request.sink.onClose(() => {
      gone = true;
    });
    try {
      const quotes = await Promise.all(request.symbols.map(async (symbol) => ({ symbol, quote: await this.#o.market.quoteOf(symbol) })));
      const missing = quotes.filter((q) => q.quote === undefined).map((q) => q.symbol);
      if (missing.length === request.symbols.length) throw new UnknownSymbolError(missing);
      const snapshot: Array<{ symbol: string; quote: Quote; version: number }> = [];
      for (const { symbol, quote } of quotes) {
        if (quote === undefined) continue;
        snapshot.push({ symbol, ...(await this.#current(symbol, quote)) });
      }
      if (this.#closed) throw new ServiceBusyError('The service is shutting down; reconnect to another instance', 1);
      if (opening?.refusal !== undefined) throw opening.refusal;
      if (gone) {
        release();
        return;
      }
      const client: Client = { ...this.#followed(request), sink: request.sink, symbols: new Set(request.symbols), holder, lastId: request.lastEventId ?? 0, closed: false, bars: request.bars === true };
      request.sink.begin();
      request.sink.write(`retry: ${this.#o.retryMs}\n\n`);
      if (missing.length > 0) this.#fanOut.send(client, 'missing', JSON.stringify({ missing }), client.lastId);
      const since = request.lastEventId === undefined ? -Infinity : request.lastEventId - this.#o.reconnectMarginMs;
      snapshot.sort((a, b) => a.version - b.version);
      for (const { symbol, quote, version } of snapshot) {
        this.#fanOut.knowFirst(symbol, quote, version);
        if (version > since) this.#fanOut.send(client, 'quote', serializedQuote(quote), version);
      }
      reserved = false;
      this.#attach(client);
      request.sink.onClose(() => this.#subscribers.remove(client));
      // A stream dropped while its first events were written is already closed.
      if (client.closed) this.#subscribers.remove(client);
    } catch (err) {
      release();
      throw err;
    } finally {
      if (opening !== undefined) this.#watch.opening.delete(opening);
    }
  }

  /**
   * Opens a session (the WebSocket API): a subscriber whose symbols change while it is open. It takes
   * a place within the same limits as a stream (per caller, per address, per instance) until `close`
   * or `end`, which the hub calls when it closes or when the principal's credentials are revoked or
   * expire. Throws as `open` does before anything is taken: `TooManyRequestsError`, `ServiceBusyError`.
   */
  openSession(who: StreamCaller, deliver: SessionDelivery, end: SessionEnd): LiveSession {
    const holder = this.#reserve(who);
    const client: Client = { ...this.#followed(who), deliver, end, symbols: new Set(), holder, lastId: 0, closed: false };
    this.#attach(client);
    const hub = this;
    const subscribers = this.#subscribers;
    return {
      get symbols() {
        return client.symbols as ReadonlySet<string>;
      },
      subscribe: (symbols, options) => {
        if (options?.bars === true) client.bars = true;
        return hub.#follow(client, symbols);
      },
      unsubscribe: (symbols) => symbols.filter((symbol) => subscribers.unfollow(client, symbol)),
      close: () => subscribers.remove(client),
    };
  }

  /** Sends a live bar (DESIGN 26, live-bars.ts) to this instance's subscribers of its symbol that asked for bars. */
  sendBar(symbol: string, json: string): void {
    this.#fanOut.sendBar(symbol, json);
  }

  /** Ends every stream (they reconnect elsewhere after `retry:`), stops the timers and the listeners. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const stop of this.#stop.splice(0)) stop();
    for (const client of [...this.#subscribers.all]) {
      if (client.sink !== undefined) client.sink.end();
      else client.end?.();
      this.#subscribers.remove(client);
    }
  }

  /** Adds symbols to a session: each known one's current quote is delivered now. */
  async #follow(client: Client, symbols: readonly string[]): Promise<{ symbols: string[]; missing: string[] }> {
    const added = [...new Set(symbols)].filter((symbol) => !client.symbols.has(symbol));
    if (client.symbols.size + added.length > MAX_SESSION_SYMBOLS) {
      throw new InvalidRequestError([{ path: 'symbols', message: `a session follows at most ${MAX_SESSION_SYMBOLS} symbols (${client.symbols.size} now): unsubscribe some first` }]);
    }
    const quotes = await Promise.all(added.map(async (symbol) => ({ symbol, quote: await this.#o.market.quoteOf(symbol) })));
    const missing: string[] = [];
    for (const { symbol, quote } of quotes) {
      if (quote === undefined) {
        missing.push(symbol);
        continue;
      }
      await this.#fanOut.reconcile(symbol, quote);
      if (client.closed) break;
      const known = this.#fanOut.known(symbol);
      const snapshot = known !== undefined ? { quote: known.quote, version: known.version } : { quote, version: await this.#fleet.versionOf(symbol, quote) };
      if (client.closed) break;
      this.#fanOut.knowFirst(symbol, snapshot.quote, snapshot.version);
      this.#subscribers.follow(client, symbol);
      this.#fanOut.send(client, 'quote', serializedQuote(snapshot.quote), snapshot.version, symbol);
    }
    return { symbols: [...client.symbols], missing };
  }

  /**
   * The quote a new subscriber of `symbol` starts from and its version: what the symbol's subscribers
   * were last sent (this quote or a later one); without subscribers, the fleet's record dates the quote.
   */
  async #current(symbol: string, quote: Quote): Promise<{ quote: Quote; version: number }> {
    await this.#fanOut.reconcile(symbol, quote);
    const known = this.#fanOut.known(symbol);
    return known !== undefined ? { quote: known.quote, version: known.version } : { quote, version: await this.#fleet.versionOf(symbol, quote) };
  }

  #reserve(who: StreamCaller): string | undefined {
    if (this.#closed) throw new ServiceBusyError('The service is shutting down; reconnect to another instance', 1);
    return this.#places.reserve(who);
  }

  #attach(client: Client): void {
    this.#subscribers.add(client);
    this.#watch.armExpiry(client);
  }

  /** What a new client follows of its caller: the address (anonymous only), the identity and the credential's expiry. */
  #followed(who: StreamCaller): Pick<Client, 'address' | 'principal' | 'identity' | 'expiresAtMs' | 'expiry'> {
    const principal = who.principal;
    if (principal === undefined) return { address: who.address, principal: undefined, identity: undefined, expiresAtMs: undefined, expiry: undefined };
    return { address: undefined, principal, identity: identityOf(principal), expiresAtMs: principal.expiresAtMs, expiry: undefined };
  }

  #every(ms: number, run: () => void): void {
    const timer = setInterval(run, ms);
    timer.unref();
    this.#stop.push(() => clearInterval(timer));
  }
}
