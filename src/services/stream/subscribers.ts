/**
 * Who is subscribed to what on this instance: every open stream and session (a `Client`), indexed by
 * symbol (for the fan-out and the refresh) and by identity (for the "identity changed" event).
 */
import type { Principal } from '../../domain/ports/accounts.js';
import type { SessionDelivery, SessionEnd, StreamObserver, StreamSink } from './contracts.js';
import type { Places } from './places.js';

/** One open SSE stream or WebSocket session. */
export interface Client {
  /** An SSE stream's response; absent for a session (the WebSocket API), which has `deliver`. */
  sink?: StreamSink;
  /** A session's way of sending one event's data; absent for an SSE stream. */
  deliver?: SessionDelivery;
  /** It asked for `bar` events of its symbols. */
  bars?: boolean;
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

export class Subscribers {
  readonly all = new Set<Client>();
  readonly bySymbol = new Map<string, Set<Client>>();
  /** Open streams and sessions per identity, for the "identity changed" event. */
  readonly byIdentity = new Map<string, Set<Client>>();
  readonly #places: Places;
  readonly #observer: StreamObserver;
  readonly #lastLeft: (symbol: string) => void;

  /** `lastLeft` is told when a symbol's last subscriber here leaves it. */
  constructor(places: Places, observer: StreamObserver, lastLeft: (symbol: string) => void) {
    this.#places = places;
    this.#observer = observer;
    this.#lastLeft = lastLeft;
  }

  add(client: Client): void {
    this.all.add(client);
    for (const symbol of client.symbols) this.follow(client, symbol);
    if (client.identity !== undefined) {
      let set = this.byIdentity.get(client.identity);
      if (set === undefined) {
        set = new Set();
        this.byIdentity.set(client.identity, set);
      }
      set.add(client);
    }
    this.#observer.clients?.(1);
  }

  /** Closes `client` here: nothing more is delivered to it, its place is given back. */
  remove(client: Client): void {
    client.closed = true;
    if (!this.all.delete(client)) return;
    for (const symbol of [...client.symbols]) this.unfollow(client, symbol);
    if (client.expiry !== undefined) clearTimeout(client.expiry);
    client.expiry = undefined;
    if (client.identity !== undefined) {
      const set = this.byIdentity.get(client.identity);
      set?.delete(client);
      if (set?.size === 0) this.byIdentity.delete(client.identity);
    }
    this.#places.release(client.holder);
    this.#observer.clients?.(-1);
  }

  follow(client: Client, symbol: string): void {
    client.symbols.add(symbol);
    let set = this.bySymbol.get(symbol);
    if (set === undefined) {
      set = new Set();
      this.bySymbol.set(symbol, set);
    }
    set.add(client);
  }

  /** Removes a symbol from a client; true when it followed it. */
  unfollow(client: Client, symbol: string): boolean {
    if (!client.symbols.delete(symbol)) return false;
    const set = this.bySymbol.get(symbol);
    if (set !== undefined) {
      set.delete(client);
      if (set.size === 0) {
        this.bySymbol.delete(symbol);
        this.#lastLeft(symbol);
      }
    }
    return true;
  }
}
