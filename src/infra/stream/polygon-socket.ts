/**
 * Polygon/Massive's WebSocket (stocks cluster): after the `connected` status the client sends
 * `{"action":"auth","params":"<key>"}`; `auth_success` lets it `{"action":"subscribe","params":"T.AAPL,T.MSFT"}`;
 * trades arrive as arrays of `{"ev":"T","sym":"AAPL","p":<price>,"s":<size>,"t":<epoch ms>,"q":<sequence>}`, and
 * each subscribed symbol's minute aggregates (`AM.AAPL`) as `{"ev":"AM","sym":"AAPL","o","h","l","c","v","s":<start ms>,"e":<end ms>}`
 * (the live bars take them as given, DESIGN 26). The
 * host is the plan's: `delayed.` (15-minute delayed plans) or `socket.` (real-time plans).
 *
 * A key the socket refuses (`auth_failed`) is set aside and the next key is tried on the next
 * connection; with every key set aside the adapter stops connecting, and the stream hub's polling
 * covers its subscribers.
 */
import type { Logger } from '../../domain/ports/logger.js';
import type { PushListener, PushUpstream } from '../../domain/ports/push.js';
import { KeyPool } from '../market/key-pool.js';
import { ReconnectingSocket } from './reconnecting-socket.js';

export const POLYGON_STREAM_URLS = { delayed: 'wss://delayed.polygon.io/stocks', realtime: 'wss://socket.polygon.io/stocks' } as const;
/** Polygon's stock tickers (indices and currencies have their own clusters, not subscribed here). */
const STOCK = /^[A-Z][A-Z.]{0,9}$/;
const BATCH = 200;

interface PolygonEvent {
  ev?: unknown;
  status?: unknown;
  message?: unknown;
  sym?: unknown;
  p?: unknown;
  t?: unknown;
  s?: unknown;
  q?: unknown;
  o?: unknown;
  h?: unknown;
  l?: unknown;
  c?: unknown;
  v?: unknown;
  e?: unknown;
}

const isNumber = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);

export interface PolygonSocketOptions {
  url: string;
  apiKeys: readonly string[];
  logger: Logger;
  minReconnectMs?: number;
}

export class PolygonSocket implements PushUpstream {
  readonly name = 'polygon';
  readonly #socket: ReconnectingSocket;
  readonly #keys: KeyPool;
  readonly #logger: Logger;
  #key: { index: number; value: string } | undefined;
  #symbols = new Set<string>();
  #authenticated = false;
  #listener: PushListener | undefined;

  constructor(options: PolygonSocketOptions) {
    this.#logger = options.logger;
    this.#keys = new KeyPool(options.apiKeys);
    this.#socket = new ReconnectingSocket({
      url: () => options.url,
      logger: options.logger,
      ...(options.minReconnectMs !== undefined ? { minDelayMs: options.minReconnectMs } : {}),
      onOpen: () => this.#authenticate(),
      onMessage: (text) => this.#onMessage(text),
      onClose: () => {
        const was = this.#authenticated;
        this.#authenticated = false;
        if (was) this.#listener?.connected(false);
      },
    });
  }

  get isConnected(): boolean {
    return this.#authenticated && this.#socket.open;
  }

  /** Each key's state, as the admin status shows keys (never the key itself). */
  keyStates(): ReturnType<KeyPool['status']> {
    return this.#keys.status();
  }

  start(listener: PushListener): void {
    this.#listener = listener;
    if (!this.#hasKey()) {
      this.#logger.warn({ upstream: this.name }, 'no usable Polygon key for the push socket: polling covers');
      return;
    }
    this.#socket.start();
  }

  covers(symbol: string): boolean {
    return STOCK.test(symbol);
  }

  setSymbols(symbols: readonly string[]): void {
    const next = new Set(symbols.filter((s) => this.covers(s)));
    const added = [...next].filter((s) => !this.#symbols.has(s));
    const removed = [...this.#symbols].filter((s) => !next.has(s));
    this.#symbols = next;
    if (!this.isConnected) return;
    this.#say('unsubscribe', removed);
    this.#say('subscribe', added);
  }

  async stop(): Promise<void> {
    await this.#socket.stop();
  }

  #hasKey(): boolean {
    return this.#keys.status().some((k) => k.state === 'active');
  }

  #authenticate(): void {
    const key = this.#keys.takeNow();
    if (key === undefined) {
      void this.#socket.stop();
      return;
    }
    this.#key = { index: key.index, value: key.value };
    this.#socket.send(JSON.stringify({ action: 'auth', params: key.value }));
  }

  #say(action: 'subscribe' | 'unsubscribe', symbols: string[]): void {
    for (let i = 0; i < symbols.length; i += BATCH) {
      this.#socket.send(JSON.stringify({ action, params: symbols.slice(i, i + BATCH).flatMap((s) => [`T.${s}`, `AM.${s}`]).join(',') }));
    }
  }

  #onMessage(text: string): void {
    const parsed = JSON.parse(text) as unknown;
    const events = (Array.isArray(parsed) ? parsed : [parsed]) as PolygonEvent[];
    for (const event of events) {
      if (event === null || typeof event !== 'object') continue;
      if (event.ev === 'status') this.#onStatus(event);
      else if (event.ev === 'T' && typeof event.sym === 'string' && typeof event.p === 'number' && this.#symbols.has(event.sym)) {
        this.#listener?.price({
          symbol: event.sym,
          price: event.p,
          timeMs: typeof event.t === 'number' ? event.t : Date.now(),
          ...(isNumber(event.s) ? { size: event.s } : {}),
          ...(isNumber(event.q) ? { sequence: event.q } : {}),
        });
      } else if (event.ev === 'AM' && typeof event.sym === 'string' && this.#symbols.has(event.sym)) this.#onAggregate(event, event.sym);
    }
  }

  #onAggregate(event: PolygonEvent, symbol: string): void {
    const { o, h, l, c, v, s, e } = event;
    if (!isNumber(o) || !isNumber(h) || !isNumber(l) || !isNumber(c) || !isNumber(v) || !isNumber(s)) return;
    this.#listener?.price({ symbol, price: c, timeMs: isNumber(e) ? e - 1 : s, aggregate: { startMs: s, open: o, high: h, low: l, close: c, volume: v } });
  }

  #onStatus(event: PolygonEvent): void {
    if (event.status === 'auth_success') {
      this.#authenticated = true;
      this.#say('subscribe', [...this.#symbols]);
      this.#listener?.connected(true);
    } else if (event.status === 'auth_failed' && this.#key !== undefined) {
      this.#logger.warn({ upstream: this.name, keyIndex: this.#key.index }, 'the push socket refused a Polygon key: key set aside');
      this.#keys.setAside(this.#key.index, 'unauthorized');
      this.#key = undefined;
      // The next connection tries the next key; with none left, it stops (polling covers).
      if (!this.#hasKey()) void this.#socket.stop();
      else this.#socket.drop();
    }
  }
}
