/**
 * Live quotes over Server-Sent Events and WebSocket sessions (`openSession`, the `/api/ws` API): the
 * hub that keeps every open stream of this instance, tells them about quote changes whichever
 * instance saw the change (polled, or pushed by an upstream socket: see live-feed.ts), and keeps their
 * symbols fresh. Streams and sessions share the limits per caller, per address and per instance.
 *
 * How a change travels: the cache engine calls `onFill` after each quote it loads and stores; the hub
 * of that instance compares the quote with the fleet's version record of the symbol (in the cache
 * store, so every instance and a restart agree on what the last known quote was), and when it differs
 * writes a new record and publishes the quote on the broadcast channel. Every instance's hub (this one
 * included: the broadcast delivers locally at once) fans it out to its own subscribers of the symbol.
 *
 * Broadcast messages may be lost (Redis away, a reconnect): the periodic refresh also compares the
 * cached quote of each subscribed symbol with the last one sent, so a lost message costs at most one
 * refresh period.
 *
 * Identity is followed while a stream or session lives (DESIGN 24): each remembers the identity of the
 * principal that opened it (`user:<name>` whichever of the user's tokens it used, `key:<id>`). The
 * fleet-wide "identity changed" event (a key revoked, a user deleted or given a new password, on any
 * instance or from the CLI) closes every stream and session of that identity here: an SSE stream gets
 * an `error` event carrying the 401 envelope and ends, a session is ended with the same refusal. The
 * credential's own expiry (a token's `exp`, a key's `expires_at`) closes them the same way, on time.
 * The event is a hint that may be lost (Redis away, a CLI that could not reach it): every
 * `RECHECK_INTERVAL_MS`, and at once when the broadcast is live again after a gap, each open
 * stream's credential is checked again as a request's would be (`CredentialRecheck`).
 *
 * Event ids are versions: the epoch milliseconds at which the quote was seen to change, never
 * decreasing on one connection. `Last-Event-ID: N` on a reconnect means "I have every quote that
 * changed up to N": the first events then carry only the symbols whose version is later than N minus
 * a margin that covers clocks and delivery delays between instances (a duplicate rather than a gap).
 */
import { inBackground } from '../domain/background-work.js';
import { AUTH_MESSAGES } from '../domain/credentials.js';
import { AppError, InvalidCredentialsError, InvalidRequestError, UnknownSymbolError, ServiceBusyError, TooManyRequestsError } from '../domain/errors.js';
import { identityOf, usernameOf } from '../domain/identity.js';
import type { CredentialRecheck, Principal } from '../domain/ports/accounts.js';
import type { Logger } from '../domain/ports/logger.js';
import type { Broadcast, CacheStore } from '../domain/ports/cache.js';
import type { Quote } from '../domain/ports/market-data.js';
import { channels, keys } from '../domain/key-space.js';
import { quoteInBody, serializedAs, serializedQuote } from './market-data/quote-body.js';
import type { BodyParts } from './cache/cache-entry.js';
import type { FillListener } from './cache/cache-types.js';

/**
 * The channel on which instances of one provider announce quote changes. Announcements carry the
 * quote, so a fleet that mixes providers on one Redis keeps each provider's apart.
 */
export function quoteEventsChannel(provider: string): string {
  return channels.quoteEvents(provider);
}
/** A version record outlives any quote's cache lifetime (at most an hour), so a restart still compares. */
const VERSION_TTL_MS = 24 * 60 * 60 * 1000;
/** Symbols one WebSocket session follows at most (a stream's own bound). */
export const MAX_SESSION_SYMBOLS = 50;
/** How many subscribed symbols one refresh tick loads at a time. */
const REFRESH_CONCURRENCY = 4;
/** The longest delay a Node timer takes (about 24.8 days); a later expiry is waited for in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * How often open streams' credentials are checked again whatever the broadcast said: a lost
 * announcement keeps a revoked caller's streams open at most this long after the caches that the
 * check reads (AUTH_CACHE_SECONDS for users; keys are read from the store) have seen the change.
 */
export const RECHECK_INTERVAL_MS = 5000;

/** Where a stream's bytes go: an HTTP response, seen only through what the hub needs. */
export interface StreamSink {
  /** Sends the status line and headers; called once, when the first events are ready. */
  begin(): void;
  /** Queues `chunk`; false when it is buffered beyond the socket's high-water mark. */
  write(chunk: string): boolean;
  /** Bytes queued and not yet handed to the socket. */
  readonly writableLength: number;
  /** Ends the stream after what is queued. */
  end(): void;
  /** Drops the connection now, discarding what is queued. */
  destroy(): void;
  /**
   * Ends the stream with an `error` event whose data is the envelope `refusal` would be answered with
   * (401 when the caller's credentials were revoked or expired), after what is queued.
   */
  refuse(refusal: AppError): void;
  /** Calls `listener` once when the connection closes, whichever side closed it. */
  onClose(listener: () => void): void;
}

/** What the hub needs from the market-data service. */
export interface StreamMarketData {
  /** The current quote of a canonical symbol through the cache; `undefined` when unknown. Throws `DataSourceError`. */
  quoteOf(symbol: string): Promise<Quote | undefined>;
  /** Loads the quote again when its cache entry expires within `horizonMs`, under the fleet lock. */
  refreshQuote(symbol: string, horizonMs: number): Promise<'ok' | 'skipped'>;
}

/** A subscriber whose symbols change while it is open (the WebSocket API). */
export interface LiveSession {
  /** The symbols it follows. */
  readonly symbols: ReadonlySet<string>;
  /**
   * Follows `symbols` (canonical) too: each known one's current quote is delivered at once. Resolves to
   * every symbol now followed and those unknown. Throws `InvalidRequestError` past the session's bound,
   * `DataSourceError` when the upstream fails.
   */
  subscribe(symbols: readonly string[]): Promise<{ symbols: string[]; missing: string[] }>;
  /** Stops following `symbols`; returns those it followed. Nothing more of them is delivered. */
  unsubscribe(symbols: readonly string[]): string[];
  /** Gives the session's place back; nothing more is delivered. */
  close(): void;
}

/**
 * How the hub ends a session: without a refusal when the hub closes (the instance shuts down), with
 * the refusal (`InvalidCredentialsError`, 401) when the credentials that opened it were revoked or
 * expired. Either way the session has given its place back and nothing more is delivered.
 */
export type SessionEnd = (refusal?: AppError) => void;

/** Who opens a stream or a session: an identified caller, or an anonymous one from an address. */
export interface StreamCaller {
  /** An anonymous caller's address group, for the per-address limit; ignored for an identified caller. */
  address?: string | undefined;
  /**
   * The identified caller (the caller step's principal): counted against the per-caller limit under
   * its identity, and followed while the stream lives (its identity's change or its credential's
   * expiry closes the stream).
   */
  principal?: Principal | undefined;
}

/** Counters for a metrics adapter; every member is optional. */
export interface StreamObserver {
  /** Open streams went up (+1) or down (-1). */
  clients?(delta: number): void;
  /** One event was written to one stream. */
  event?(): void;
  /** A refresh run over subscribed symbols ended: `poll` when it loaded any from the upstream, `push` when pushes kept them all current. */
  refresh?(mode: 'poll' | 'push'): void;
}

export interface QuoteStreamHubOptions {
  market: StreamMarketData;
  /** Registers a listener for the cache engine's fills (`RepresentationCache.onFill`). */
  onFill: (listener: FillListener) => () => void;
  /** Carries change announcements between instances (and locally). */
  broadcast: Broadcast;
  /** Holds each symbol's version record, shared by the instances. */
  store: CacheStore;
  /** The market data provider's name: the channel and the version records are its own. */
  provider: string;
  logger: Logger;
  /** Open streams on this instance at most (STREAM_MAX_CLIENTS). */
  maxClients: number;
  /** Open streams per client address at most (STREAM_MAX_PER_ADDRESS); 0 for no limit. */
  maxPerAddress: number;
  /** Open streams per identified caller (a user, an API key) at most (STREAM_MAX_PER_CALLER); 0 for no limit. */
  maxPerCaller: number;
  /** A stream whose unsent bytes pass this is dropped (STREAM_MAX_BUFFER_BYTES). */
  maxBufferedBytes: number;
  /** Interval of the keep-alive comment (STREAM_HEARTBEAT_SECONDS in ms). */
  heartbeatMs: number;
  /** Interval of the refresh of subscribed symbols (STREAM_REFRESH_SECONDS in ms); 0 turns it off. */
  refreshIntervalMs: number;
  /**
   * On a reconnect, symbols that changed up to this long before `Last-Event-ID` are sent again anyway:
   * announcements from several instances may arrive out of order (STREAM_RECONNECT_MARGIN_SECONDS in ms).
   */
  reconnectMarginMs: number;
  /** The `retry:` a client should wait before reconnecting, in ms. Default 3000. */
  retryMs?: number;
  observer?: StreamObserver;
  /**
   * True while a push upstream that prices `symbol` is connected somewhere in the fleet
   * (`LiveFeed.pushing`): the refresh then loads it not ahead of expiry, only compares what the cache
   * holds. Polling by default.
   */
  pushing?: (symbol: string) => boolean;
  /**
   * Checks again the credential an open stream was opened with (the authenticator); without it, only
   * the "identity changed" event and the credential's expiry close a stream.
   */
  credentials?: CredentialRecheck;
  /** Clock in epoch milliseconds; `Date.now` by default. */
  now?: () => number;
}

/** One request for a stream, already validated. */
export interface StreamRequest extends StreamCaller {
  /** 1 to 50 distinct canonical (upper-case) symbols. */
  symbols: readonly string[];
  /** The version the client last saw (`Last-Event-ID`), if it reconnects. */
  lastEventId?: number;
  sink: StreamSink;
}

interface Client {
  /** An SSE stream's response; absent for a session (the WebSocket API), which has `deliver`. */
  sink?: StreamSink;
  /** A session's way of sending one quote (its JSON) at `version`; absent for an SSE stream. */
  deliver?: (symbol: string, json: string, version: number) => void;
  /** Ends a session (see `SessionEnd`). */
  end?: SessionEnd;
  symbols: Set<string>;
  address: string | undefined;
  /** The principal that opened it; absent when anonymous. */
  principal: Principal | undefined;
  /** Its identity (`user:<name>`, `key:<id>`); absent when anonymous. */
  identity: string | undefined;
  /** When its credential expires, epoch ms; absent when it does not. */
  expiresAtMs: number | undefined;
  /** The timer that closes it at `expiresAtMs`. */
  expiry: NodeJS.Timeout | undefined;
  /** Whose per-address or per-caller count the stream holds a place in. */
  holder: string | undefined;
  /** The highest id written to this stream. */
  lastId: number;
  closed: boolean;
}

/** A stream still fetching its first quotes: a change of its identity meanwhile refuses it before it begins. */
interface Opening {
  identity: string;
  refusal: AppError | undefined;
}

/** The last quote the subscribers of a symbol were sent. */
interface Known {
  fingerprint: string;
  version: number;
  quote: Quote;
}

interface ChangeMessage {
  s: string;
  v: number;
  q: Quote;
}

/** The hub of this instance's quote streams. */
export class QuoteStreamHub {
  readonly #o: Required<Omit<QuoteStreamHubOptions, 'observer' | 'pushing' | 'credentials'>> & { observer: StreamObserver; pushing: (symbol: string) => boolean; credentials: CredentialRecheck | undefined };
  readonly #clients = new Set<Client>();
  readonly #bySymbol = new Map<string, Set<Client>>();
  readonly #known = new Map<string, Known>();
  /** Open streams and sessions per identity, for the "identity changed" event. */
  readonly #byIdentity = new Map<string, Set<Client>>();
  readonly #opening = new Set<Opening>();
  /** Open and opening streams per holder: `address:<group>` or `caller:<id>`. */
  readonly #perHolder = new Map<string, number>();
  /** Streams counted against the limits, including those still fetching their first quotes. */
  #reserved = 0;
  readonly #stop: Array<() => void> = [];
  #refreshing = false;
  #rechecking = false;
  #closed = false;

  constructor(options: QuoteStreamHubOptions) {
    this.#o = { retryMs: 3000, now: Date.now, ...options, observer: options.observer ?? {}, pushing: options.pushing ?? (() => false), credentials: options.credentials };
    this.#stop.push(
      options.broadcast.subscribe(quoteEventsChannel(options.provider), (message) => this.#onMessage(message)),
      options.broadcast.subscribe(channels.identityChanged, (identity) => this.#identityChanged(identity)),
      // Announcements may have been missed during the gap.
      options.broadcast.onResync(() => void this.#recheck()),
      options.onFill((fill) => {
        if (fill.kind === 'quote') void this.#onQuoteFill(fill.params, fill.text(), fill.parts);
      }),
    );
    const heartbeat = setInterval(() => this.#heartbeat(), options.heartbeatMs);
    heartbeat.unref();
    this.#stop.push(() => clearInterval(heartbeat));
    if (options.credentials !== undefined) {
      const recheck = setInterval(() => void this.#recheck(), RECHECK_INTERVAL_MS);
      recheck.unref();
      this.#stop.push(() => clearInterval(recheck));
    }
    if (options.refreshIntervalMs > 0) {
      const refresh = setInterval(() => void this.#refreshTick(), options.refreshIntervalMs);
      refresh.unref();
      this.#stop.push(() => clearInterval(refresh));
    }
  }

  /** Open streams on this instance. */
  get size(): number {
    return this.#clients.size;
  }

  /** The symbols this instance's subscribers follow now. */
  subscribedSymbols(): string[] {
    return [...this.#bySymbol.keys()];
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
    if (opening !== undefined) this.#opening.add(opening);
    let reserved = true;
    const release = () => {
      if (!reserved) return;
      reserved = false;
      this.#release(holder);
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
        await this.#reconcile(symbol, quote);
        // What the symbol's subscribers were last sent is this quote or a later one; without
        // subscribers, the fleet's record dates the quote.
        const known = this.#known.get(symbol);
        snapshot.push(known !== undefined ? { symbol, quote: known.quote, version: known.version } : { symbol, quote, version: await this.#versionOf(symbol, quote) });
      }
      if (this.#closed) throw new ServiceBusyError('The service is shutting down; reconnect to another instance', 1);
      if (opening?.refusal !== undefined) throw opening.refusal;
      if (gone) {
        release();
        return;
      }
      const client: Client = { ...this.#followed(request), sink: request.sink, symbols: new Set(request.symbols), holder, lastId: request.lastEventId ?? 0, closed: false };
      request.sink.begin();
      request.sink.write(`retry: ${this.#o.retryMs}\n\n`);
      if (missing.length > 0) this.#send(client, 'missing', JSON.stringify({ missing }), client.lastId);
      const since = request.lastEventId === undefined ? -Infinity : request.lastEventId - this.#o.reconnectMarginMs;
      snapshot.sort((a, b) => a.version - b.version);
      for (const { symbol, quote, version } of snapshot) {
        if (!this.#known.has(symbol)) this.#known.set(symbol, { fingerprint: fingerprintOf(quote), version, quote });
        if (version > since) this.#send(client, 'quote', serializedQuote(quote), version);
      }
      reserved = false;
      this.#attach(client);
      request.sink.onClose(() => this.#detach(client));
      // A stream dropped while its first events were written is already closed.
      if (client.closed) this.#detach(client);
    } catch (err) {
      release();
      throw err;
    } finally {
      if (opening !== undefined) this.#opening.delete(opening);
    }
  }

  /**
   * Opens a session (the WebSocket API): a subscriber whose symbols change while it is open. It takes
   * a place within the same limits as a stream (per caller, per address, per instance) until `close`
   * or `end`, which the hub calls when it closes or when the principal's credentials are revoked or
   * expire. Throws as `open` does before anything is taken: `TooManyRequestsError`, `ServiceBusyError`.
   */
  openSession(who: StreamCaller, deliver: (symbol: string, json: string, version: number) => void, end: SessionEnd): LiveSession {
    const holder = this.#reserve(who);
    const client: Client = { ...this.#followed(who), deliver, end, symbols: new Set(), holder, lastId: 0, closed: false };
    this.#attach(client);
    const hub = this;
    return {
      get symbols() {
        return client.symbols as ReadonlySet<string>;
      },
      subscribe: (symbols) => hub.#follow(client, symbols),
      unsubscribe: (symbols) => symbols.filter((symbol) => hub.#unfollow(client, symbol)),
      close: () => hub.#detach(client),
    };
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
      await this.#reconcile(symbol, quote);
      if (client.closed) break;
      const known = this.#known.get(symbol);
      const snapshot = known !== undefined ? { quote: known.quote, version: known.version } : { quote, version: await this.#versionOf(symbol, quote) };
      if (client.closed) break;
      if (!this.#known.has(symbol)) this.#known.set(symbol, { fingerprint: fingerprintOf(snapshot.quote), version: snapshot.version, quote: snapshot.quote });
      this.#followSymbol(client, symbol);
      this.#send(client, 'quote', serializedQuote(snapshot.quote), snapshot.version, symbol);
    }
    return { symbols: [...client.symbols], missing };
  }

  #followSymbol(client: Client, symbol: string): void {
    client.symbols.add(symbol);
    let set = this.#bySymbol.get(symbol);
    if (set === undefined) {
      set = new Set();
      this.#bySymbol.set(symbol, set);
    }
    set.add(client);
  }

  /** Removes a symbol from a client; true when it followed it. */
  #unfollow(client: Client, symbol: string): boolean {
    if (!client.symbols.delete(symbol)) return false;
    const set = this.#bySymbol.get(symbol);
    if (set !== undefined) {
      set.delete(client);
      if (set.size === 0) {
        this.#bySymbol.delete(symbol);
        this.#known.delete(symbol);
      }
    }
    return true;
  }

  /** Ends every stream (they reconnect elsewhere after `retry:`), stops the timers and the listeners. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const stop of this.#stop.splice(0)) stop();
    for (const client of [...this.#clients]) {
      if (client.sink !== undefined) client.sink.end();
      else client.end?.();
      this.#detach(client);
    }
  }

  /** What a new client follows of its caller: the address (anonymous only), the identity and the credential's expiry. */
  #followed(who: StreamCaller): Pick<Client, 'address' | 'principal' | 'identity' | 'expiresAtMs' | 'expiry'> {
    const principal = who.principal;
    if (principal === undefined) return { address: who.address, principal: undefined, identity: undefined, expiresAtMs: undefined, expiry: undefined };
    return { address: undefined, principal, identity: identityOf(principal), expiresAtMs: principal.expiresAtMs, expiry: undefined };
  }

  /** Takes a place for `who` within the limits; returns whose count it holds a place in. */
  #reserve(who: StreamCaller): string | undefined {
    if (this.#closed) throw new ServiceBusyError('The service is shutting down; reconnect to another instance', 1);
    // An identified caller is counted as itself wherever it connects from; an anonymous one by its address.
    const caller = who.principal === undefined ? undefined : identityOf(who.principal);
    const holder = caller !== undefined ? `caller:${caller}` : who.address !== undefined ? `address:${who.address}` : undefined;
    const held = holder === undefined ? 0 : (this.#perHolder.get(holder) ?? 0);
    if (caller !== undefined) {
      if (this.#o.maxPerCaller > 0 && held >= this.#o.maxPerCaller) {
        throw new TooManyRequestsError(`Too many open streams for this caller (at most ${this.#o.maxPerCaller}); close one first`, 30);
      }
    } else if (who.address !== undefined && this.#o.maxPerAddress > 0 && held >= this.#o.maxPerAddress) {
      throw new TooManyRequestsError(`Too many open streams from this address (at most ${this.#o.maxPerAddress}); close one first`, 30);
    }
    if (this.#reserved >= this.#o.maxClients) {
      throw new ServiceBusyError('This instance serves as many streams as it may; retry later', 30);
    }
    this.#reserved += 1;
    if (holder !== undefined) this.#perHolder.set(holder, held + 1);
    return holder;
  }

  #release(holder: string | undefined): void {
    this.#reserved -= 1;
    if (holder === undefined) return;
    const left = (this.#perHolder.get(holder) ?? 1) - 1;
    if (left > 0) this.#perHolder.set(holder, left);
    else this.#perHolder.delete(holder);
  }

  #attach(client: Client): void {
    this.#clients.add(client);
    for (const symbol of client.symbols) this.#followSymbol(client, symbol);
    if (client.identity !== undefined) {
      let set = this.#byIdentity.get(client.identity);
      if (set === undefined) {
        set = new Set();
        this.#byIdentity.set(client.identity, set);
      }
      set.add(client);
    }
    this.#o.observer.clients?.(1);
    this.#armExpiry(client);
  }

  #detach(client: Client): void {
    client.closed = true;
    if (!this.#clients.delete(client)) return;
    for (const symbol of [...client.symbols]) this.#unfollow(client, symbol);
    if (client.expiry !== undefined) clearTimeout(client.expiry);
    client.expiry = undefined;
    if (client.identity !== undefined) {
      const set = this.#byIdentity.get(client.identity);
      set?.delete(client);
      if (set?.size === 0) this.#byIdentity.delete(client.identity);
    }
    this.#release(client.holder);
    this.#o.observer.clients?.(-1);
  }

  /** Closes `client` when its credential expires: now when it already has, else on time (in steps past a timer's reach). */
  #armExpiry(client: Client): void {
    if (client.expiresAtMs === undefined || client.closed) return;
    const leftMs = client.expiresAtMs - this.#o.now();
    if (leftMs <= 0) {
      const user = client.identity !== undefined && usernameOf(client.identity) !== undefined;
      this.#end(client, new InvalidCredentialsError(user ? AUTH_MESSAGES.expired : AUTH_MESSAGES.apiKeyExpired));
      return;
    }
    client.expiry = setTimeout(() => this.#armExpiry(client), Math.min(leftMs, MAX_TIMER_MS));
    client.expiry.unref();
  }

  /** Ends a stream or session because its caller's credentials ended: the refusal goes to the client, the place is given back. */
  #end(client: Client, refusal: AppError): void {
    if (client.closed) return;
    if (client.sink !== undefined) client.sink.refuse(refusal);
    else client.end?.(refusal);
    this.#detach(client);
  }

  /**
   * The "identity changed" event (from this instance or another): a key revoked, a user deleted or
   * given a new password. Every stream and session of that identity closes, and one still opening
   * is refused before it begins.
   */
  #identityChanged(identity: string): void {
    const refusal = new InvalidCredentialsError(usernameOf(identity) !== undefined ? AUTH_MESSAGES.revoked : AUTH_MESSAGES.apiKeyRevoked);
    for (const opening of this.#opening) if (opening.identity === identity) opening.refusal ??= refusal;
    const clients = this.#byIdentity.get(identity);
    if (clients === undefined) return;
    const closed = clients.size;
    for (const client of [...clients]) this.#end(client, refusal);
    this.#o.logger.info({ identity, closed }, 'streams closed: the credentials that opened them were revoked or changed');
  }

  /**
   * Checks again the credential of every open stream and session, one at a time (one check per
   * distinct credential), and closes those a request would now refuse. A check that fails (the
   * store away) leaves its streams open until the next run.
   */
  async #recheck(): Promise<void> {
    const credentials = this.#o.credentials;
    if (credentials === undefined || this.#rechecking || this.#closed) return;
    this.#rechecking = true;
    try {
      const verdicts = new Map<string, Promise<string | undefined>>();
      for (const clients of [...this.#byIdentity.values()]) {
        for (const client of [...clients]) {
          const principal = client.principal;
          if (client.closed || principal === undefined || client.identity === undefined) continue;
          // Streams of one identity opened with one credential share one check.
          const credential = `${client.identity}\n${principal.passwordVersion ?? ''}\n${principal.isAdmin}\n${principal.expiresAtMs ?? ''}`;
          let verdict = verdicts.get(credential);
          if (verdict === undefined) {
            verdict = credentials.recheck(principal);
            verdicts.set(credential, verdict);
          }
          let refused: string | undefined;
          try {
            refused = await verdict;
          } catch (err) {
            this.#o.logger.debug({ err: (err as Error).message, identity: client.identity }, 'credential check failed; the next run retries');
            continue;
          }
          if (refused === undefined || this.#closed) continue;
          this.#o.logger.info({ identity: client.identity, reason: refused }, 'stream closed: its credentials are no longer accepted');
          this.#end(client, new InvalidCredentialsError(refused));
        }
      }
    } finally {
      this.#rechecking = false;
    }
  }

  /** Where a symbol's last change is kept: `{v: version ms, f: fingerprint}`, per provider. */
  #versionKey(symbol: string): string {
    return keys.quoteVersion(this.#o.provider, symbol);
  }

  /** Writes one event; drops the client when its unsent bytes pass the bound. */
  #send(client: Client, event: string, data: string, version: number, symbol = ''): void {
    if (client.closed) return;
    client.lastId = Math.max(client.lastId, version);
    if (client.deliver !== undefined) {
      client.deliver(symbol, data, version);
      this.#o.observer.event?.();
      return;
    }
    this.#write(client, `event: ${event}\nid: ${client.lastId}\ndata: ${data}\n\n`);
    this.#o.observer.event?.();
  }

  #write(client: Client, chunk: string): void {
    if (client.closed || client.sink === undefined) return;
    client.sink.write(chunk);
    if (client.sink.writableLength > this.#o.maxBufferedBytes) {
      this.#o.logger.warn({ address: client.address, bufferedBytes: client.sink.writableLength }, 'stream client dropped: it stopped reading');
      client.closed = true;
      client.sink.destroy();
      this.#detach(client);
    }
  }

  #heartbeat(): void {
    for (const client of [...this.#clients]) if (client.sink !== undefined) this.#write(client, ': keep-alive\n\n');
  }

  #onMessage(message: string): void {
    let change: ChangeMessage;
    try {
      change = JSON.parse(message) as ChangeMessage;
    } catch {
      this.#o.logger.warn('ignoring an unreadable quote event');
      return;
    }
    if (typeof change.s !== 'string' || typeof change.v !== 'number' || typeof change.q !== 'object' || change.q === null) return;
    // The quote travels last in the message, as JSON ready for the wire: sent on as it came.
    const at = message.indexOf(QUOTE_FIELD);
    if (at > 0 && message.endsWith('}}') && message[at + QUOTE_FIELD.length] === '{') serializedAs(change.q, message.slice(at + QUOTE_FIELD.length, -1));
    void this.#reconcile(change.s, change.q, change.v);
  }

  /**
   * Delivers `quote` to the symbol's subscribers when it differs from what they were last sent and is
   * not older. Without a `version` (a quote read here rather than announced), the symbol's record
   * dates it, and a quote the record does not name is left alone.
   */
  async #reconcile(symbol: string, quote: Quote, version?: number): Promise<void> {
    const subscribers = this.#bySymbol.get(symbol);
    if (subscribers === undefined) return;
    const fingerprint = fingerprintOf(quote);
    const known = this.#known.get(symbol);
    if (known?.fingerprint === fingerprint) return;
    let v = version;
    if (v === undefined) {
      const record = await this.#readRecord(symbol);
      // The fleet has seen a later quote than this one (a copy read a moment before the change): its
      // announcement, or the next refresh, brings that one.
      if (record !== undefined && record.f !== fingerprint) return;
      v = record?.v ?? this.#o.now();
    }
    const latest = this.#known.get(symbol);
    if (latest?.fingerprint === fingerprint || (latest !== undefined && v < latest.version)) return;
    this.#known.set(symbol, { fingerprint, version: v, quote });
    const data = serializedQuote(quote);
    for (const client of [...(this.#bySymbol.get(symbol) ?? [])]) this.#send(client, 'quote', data, v, symbol);
  }

  /** The fleet's version of this exact quote, or now when the record names another (or none). */
  async #versionOf(symbol: string, quote: Quote): Promise<number> {
    const record = await this.#readRecord(symbol);
    return record !== undefined && record.f === fingerprintOf(quote) ? record.v : this.#o.now();
  }

  async #readRecord(symbol: string): Promise<{ v: number; f: string } | undefined> {
    try {
      const entry = await this.#o.store.get(this.#versionKey(symbol));
      return entry === undefined ? undefined : (JSON.parse(entry.value) as { v: number; f: string });
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message, symbol }, 'quote version unreadable: treating the quote as changed');
      return undefined;
    }
  }

  /** After a quote fill here: when it differs from the fleet's record, record and announce it. */
  async #onQuoteFill(symbol: string, value: string, parts: BodyParts | undefined): Promise<void> {
    try {
      const { quote, json } = quoteInBody(value, parts);
      const fingerprint = fingerprintOf(quote);
      const record = await this.#readRecord(symbol);
      if (record?.f === fingerprint) return;
      const v = Math.max(this.#o.now(), (record?.v ?? 0) + 1);
      await this.#o.store.set(this.#versionKey(symbol), JSON.stringify({ v, f: fingerprint }), VERSION_TTL_MS);
      // A ChangeMessage whose quote is the cached JSON itself, not a copy parsed and serialized again.
      await this.#o.broadcast.publish(quoteEventsChannel(this.#o.provider), `{"s":${JSON.stringify(symbol)},"v":${v}${QUOTE_FIELD}${json}}`);
    } catch (err) {
      this.#o.logger.warn({ err: (err as Error).message, symbol }, 'could not announce a quote change');
    }
  }

  /**
   * Keeps subscribed symbols fresh ahead of expiry as background work (the fleet lock makes one instance load each), then
   * compares each cached quote with the last one sent, which heals a lost broadcast message.
   */
  async #refreshTick(): Promise<void> {
    if (this.#refreshing || this.#closed) return;
    this.#refreshing = true;
    // Decided once per symbol as the run begins. Pushed prices keep the cache current while a push
    // upstream that prices the symbol is connected: no upstream calls for it. A run that polls any
    // symbol counts as `poll`, one that polls none as `push`.
    const symbols = [...this.#bySymbol.keys()];
    const polled = new Set(symbols.filter((symbol) => !this.#o.pushing(symbol)));
    try {
      const horizonMs = this.#o.refreshIntervalMs * 2;
      let next = 0;
      const worker = async () => {
        while (next < symbols.length && !this.#closed) {
          const symbol = symbols[next++] as string;
          try {
            // Background work (DESIGN 19): no caller waits on a tick, so its upstream calls count against
            // BACKGROUND_BUDGET_SHARE and are refused at once when the share is spent (the cached quote stays).
            if (polled.has(symbol)) await inBackground(() => this.#o.market.refreshQuote(symbol, horizonMs));
            const quote = await this.#o.market.quoteOf(symbol);
            if (quote !== undefined) await this.#reconcile(symbol, quote);
          } catch (err) {
            this.#o.logger.debug({ err: (err as Error).message, symbol }, 'stream refresh failed; the next tick retries');
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(REFRESH_CONCURRENCY, symbols.length) }, worker));
    } finally {
      this.#refreshing = false;
      if (symbols.length > 0) this.#o.observer.refresh?.(polled.size > 0 ? 'poll' : 'push');
    }
  }
}

/** How the quote field of a ChangeMessage begins; it is the message's last field. */
const QUOTE_FIELD = ',"q":';

/** What makes a quote different for a subscriber: every field but the market time of the price. */
function fingerprintOf(quote: Quote): string {
  const { timestamp: _timestamp, ...rest } = quote;
  return JSON.stringify(rest);
}
