/**
 * Yahoo's streamer (wss://streamer.finance.yahoo.com/?version=2): `{"subscribe":[...]}` and
 * `{"unsubscribe":[...]}` messages; frames arrive as `{"type":"pricing","message":"<base64>"}` (or
 * bare base64 without `?version=2`). The streamer forgets a silent client: the whole subscription is
 * said again every 15 seconds, which keeps the connection alive.
 *
 * The stream names a currency pair against the dollar by its quote currency alone (USD/JPY arrives as
 * `JPY=X`, not `USDJPY=X`): both names are subscribed and the frame is given to the symbol asked for.
 */
import type { Logger } from '../../domain/ports/logger.js';
import type { PushListener, PushUpstream } from '../../domain/ports/push.js';
import { ReconnectingSocket } from './reconnecting-socket.js';
import { decodePricing, type PricingData } from './yahoo-pricing.js';

export const YAHOO_STREAM_URL = 'wss://streamer.finance.yahoo.com/?version=2';
/** How often the whole subscription is said again. */
export const YAHOO_RESUBSCRIBE_MS = 15_000;
/** Symbols in one subscribe message. */
const BATCH = 100;

/** A float32 field as the price it stood for (7 significant digits); absent when zero (not sent). */
function f32(value: number): number | undefined {
  return value === 0 || !Number.isFinite(value) ? undefined : Number(value.toPrecision(7));
}

/** The stream's names of a canonical symbol. */
function streamNames(symbol: string): string[] {
  const pair = /^USD([A-Z]{3})=X$/.exec(symbol);
  return pair ? [symbol, `${pair[1]}=X`] : [symbol];
}

export interface YahooStreamerOptions {
  url?: string;
  logger: Logger;
  resubscribeMs?: number;
  minReconnectMs?: number;
}

export class YahooStreamer implements PushUpstream {
  readonly name = 'yahoo';
  readonly #socket: ReconnectingSocket;
  readonly #logger: Logger;
  readonly #resubscribeMs: number;
  /** Stream name -> canonical symbols it answers. */
  #byStreamName = new Map<string, string[]>();
  #listener: PushListener | undefined;
  #keepAlive: NodeJS.Timeout | undefined;

  constructor(options: YahooStreamerOptions) {
    this.#logger = options.logger;
    this.#resubscribeMs = options.resubscribeMs ?? YAHOO_RESUBSCRIBE_MS;
    const url = options.url ?? YAHOO_STREAM_URL;
    this.#socket = new ReconnectingSocket({
      url: () => url,
      logger: options.logger,
      ...(options.minReconnectMs !== undefined ? { minDelayMs: options.minReconnectMs } : {}),
      onOpen: () => {
        this.#subscribeAll();
        this.#listener?.connected(true);
      },
      onMessage: (text) => this.#onMessage(text),
      onClose: () => this.#listener?.connected(false),
    });
  }

  get isConnected(): boolean {
    return this.#socket.open;
  }

  /** The streamer prices whatever Yahoo quotes: stocks, indices, currencies, crypto. */
  covers(_symbol: string): boolean {
    return true;
  }

  start(listener: PushListener): void {
    this.#listener = listener;
    this.#socket.start();
    if (this.#keepAlive === undefined) {
      this.#keepAlive = setInterval(() => this.#subscribeAll(), this.#resubscribeMs);
      this.#keepAlive.unref();
    }
  }

  setSymbols(symbols: readonly string[]): void {
    const next = new Map<string, string[]>();
    for (const symbol of symbols) {
      for (const name of streamNames(symbol)) next.set(name, [...(next.get(name) ?? []), symbol]);
    }
    const added = [...next.keys()].filter((name) => !this.#byStreamName.has(name));
    const removed = [...this.#byStreamName.keys()].filter((name) => !next.has(name));
    this.#byStreamName = next;
    this.#say('unsubscribe', removed);
    this.#say('subscribe', added);
  }

  async stop(): Promise<void> {
    if (this.#keepAlive !== undefined) clearInterval(this.#keepAlive);
    this.#keepAlive = undefined;
    await this.#socket.stop();
  }

  #subscribeAll(): void {
    this.#say('subscribe', [...this.#byStreamName.keys()]);
  }

  #say(action: 'subscribe' | 'unsubscribe', names: string[]): void {
    for (let i = 0; i < names.length; i += BATCH) this.#socket.send(JSON.stringify({ [action]: names.slice(i, i + BATCH) }));
  }

  #onMessage(text: string): void {
    let base64 = text;
    if (text.startsWith('{')) {
      const envelope = JSON.parse(text) as { type?: unknown; message?: unknown };
      if (envelope.type !== 'pricing' || typeof envelope.message !== 'string') return;
      base64 = envelope.message;
    }
    let data: PricingData;
    try {
      data = decodePricing(base64);
    } catch (err) {
      this.#logger.warn({ err: (err as Error).message, upstream: this.name }, 'unreadable streamer frame skipped');
      return;
    }
    const symbols = this.#byStreamName.get(data.id);
    const price = f32(data.price);
    if (symbols === undefined || price === undefined || this.#listener === undefined) return;
    for (const symbol of symbols) {
      this.#listener.price({
        symbol,
        price,
        timeMs: data.time > 0 ? data.time : Date.now(),
        change: data.change !== 0 ? f32(data.change) : undefined,
        changePercent: f32(data.changePercent),
        dayHigh: f32(data.dayHigh),
        dayLow: f32(data.dayLow),
        dayVolume: data.dayVolume > 0 ? data.dayVolume : undefined,
        open: f32(data.openPrice),
        previousClose: f32(data.previousClose),
      });
    }
  }
}
