/**
 * Ports of pushed market data (DESIGN 23): an upstream that pushes prices over a socket, and the lease
 * that lets one instance of the fleet hold that socket for everyone.
 */

/** One price an upstream pushed, in the canonical symbol the service asked for. */
export interface PushedPrice {
  /** Canonical (upper-case) symbol, as subscribed. */
  symbol: string;
  price: number;
  /** Market time of the price, epoch milliseconds. */
  timeMs: number;
  change?: number | undefined;
  changePercent?: number | undefined;
  dayHigh?: number | undefined;
  dayLow?: number | undefined;
  dayVolume?: number | undefined;
  open?: number | undefined;
  previousClose?: number | undefined;
  /** Size of the trade this price is (Polygon `T`'s `s`): a live bar's volume is the sum (DESIGN 26). */
  size?: number | undefined;
  /** The upstream's sequence of the trade (Polygon `q`), increasing per symbol: a trade is counted once. */
  sequence?: number | undefined;
  /**
   * A minute aggregate the upstream built itself (Polygon `AM`), taken as given for that minute's live
   * bar; `price` is its close. Not a quote: only the bar builder takes it.
   */
  aggregate?: { startMs: number; open: number; high: number; low: number; close: number; volume: number } | undefined;
}

/** What a push upstream tells its owner. */
export interface PushListener {
  price(update: PushedPrice): void;
  /** The socket is usable (connected and, where needed, authenticated) or no longer is. */
  connected(up: boolean): void;
}

/**
 * A vendor's push socket (Yahoo's streamer, Polygon/Massive's WebSocket). The adapter connects, keeps
 * the connection alive, reconnects with back-off, and subscribes to exactly the symbols last set.
 */
export interface PushUpstream {
  /** The provider's name (`yahoo`, `polygon`). */
  readonly name: string;
  /** Opens the socket (and keeps it open) until `stop`. */
  start(listener: PushListener): void;
  /** The canonical symbols to receive from now on; the adapter subscribes and unsubscribes the difference. */
  setSymbols(symbols: readonly string[]): void;
  /** True while the socket is usable. */
  readonly isConnected: boolean;
  /** Whether this upstream prices `symbol` (canonical) at all: Polygon's stocks socket only stock tickers. */
  covers(symbol: string): boolean;
  /** Closes the socket and stops reconnecting. */
  stop(): Promise<void>;
}

/**
 * A lease: a named lock with a time to live that its holder renews. Throws `CacheUnavailableError`
 * when the store cannot answer (the holder then treats the lease as lost).
 */
export interface LeaseStore {
  /** Takes the lease for `ttlMs` if nobody holds it; resolves to the holder's token, else `undefined`. */
  acquireLock(key: string, ttlMs: number): Promise<string | undefined>;
  /** Extends the lease to `ttlMs` from now while `token` still holds it; false when it no longer does. */
  extendLock(key: string, token: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up, only if `token` still holds it. */
  releaseLock(key: string, token: string): Promise<void>;
}
