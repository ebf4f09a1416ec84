/**
 * What the live stream hub (hub.ts) is given and what it hands out: the sink of an SSE stream, the
 * session of a WebSocket, the caller, the market data it reads, its counters and its options. Types
 * only, shared by the hub's parts and its doors (http/handlers/stream.ts, http/ws/).
 */
import type { AppError } from '../../domain/errors.js';
import type { CredentialRecheck, Principal } from '../../domain/ports/accounts.js';
import type { Broadcast, CacheStore } from '../../domain/ports/cache.js';
import type { Logger } from '../../domain/ports/logger.js';
import type { Quote } from '../../domain/ports/market-data.js';
import type { FillListener } from '../cache/cache-types.js';

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
  subscribe(symbols: readonly string[], options?: { bars?: boolean }): Promise<{ symbols: string[]; missing: string[] }>;
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
  /** Also `bar` events of the symbols' live one-minute bars (DESIGN 26, `bars=1m`). */
  bars?: boolean;
  sink: StreamSink;
}

/** A session's way of sending one event's data: a quote's JSON at `version`, or a bar's. */
export type SessionDelivery = (symbol: string, json: string, version: number, event: 'quote' | 'bar') => void;
