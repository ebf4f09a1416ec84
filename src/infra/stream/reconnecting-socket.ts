/**
 * A WebSocket client that stays connected: it reconnects after every close with a back-off that
 * doubles from `minDelayMs` to `maxDelayMs` (with jitter) and resets once a connection has stayed up
 * for a while. The vendor-specific part (what to say on open, how to read a message) is the owner's.
 */
import WebSocket from 'ws';
import type { Logger } from '../../domain/ports/logger.js';

export interface ReconnectingSocketOptions {
  /** The URL to connect to, asked again on every attempt. */
  url: () => string;
  logger: Logger;
  onOpen: () => void;
  onMessage: (text: string) => void;
  onClose: () => void;
  minDelayMs?: number;
  maxDelayMs?: number;
  /** Largest message accepted from the upstream, in bytes. Default 1 MiB. */
  maxPayload?: number;
}

/** A connection that lasted this long resets the back-off. */
const STABLE_MS = 10_000;

export class ReconnectingSocket {
  readonly #o: Required<ReconnectingSocketOptions>;
  #ws: WebSocket | undefined;
  #running = false;
  #attempt = 0;
  #openedAt = 0;
  #retry: NodeJS.Timeout | undefined;

  constructor(options: ReconnectingSocketOptions) {
    this.#o = { minDelayMs: 500, maxDelayMs: 30_000, maxPayload: 1024 * 1024, ...options };
  }

  get open(): boolean {
    return this.#ws?.readyState === WebSocket.OPEN;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#attempt = 0;
    this.#connect();
  }

  /** Sends `text` when open; false when not (the owner says it again on the next open). */
  send(text: string): boolean {
    if (!this.open) return false;
    this.#ws!.send(text);
    return true;
  }

  /** Closes the connection (the owner hears `onClose`) and stops reconnecting. */
  async stop(): Promise<void> {
    this.#running = false;
    if (this.#retry !== undefined) clearTimeout(this.#retry);
    this.#retry = undefined;
    const ws = this.#ws;
    if (ws === undefined || ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((done) => {
      ws.once('close', () => done());
      const force = setTimeout(() => ws.terminate(), 1000);
      force.unref();
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else ws.close(1000);
    });
  }

  /** Drops the connection now; it reconnects after the back-off (a protocol failure, a dead peer). */
  drop(): void {
    this.#ws?.terminate();
  }

  #connect(): void {
    if (!this.#running) return;
    const ws = new WebSocket(this.#o.url(), { maxPayload: this.#o.maxPayload, handshakeTimeout: 10_000 });
    this.#ws = ws;
    ws.on('open', () => {
      this.#openedAt = Date.now();
      this.#o.onOpen();
    });
    ws.on('message', (data, isBinary) => {
      try {
        this.#o.onMessage(isBinary ? Buffer.from(data as Buffer).toString('utf8') : data.toString());
      } catch (err) {
        this.#o.logger.warn({ err: (err as Error).message }, 'push upstream message could not be read');
      }
    });
    ws.on('error', (err) => {
      this.#o.logger.debug({ err: err.message }, 'push upstream socket error');
    });
    ws.on('close', () => {
      if (this.#ws !== ws) return;
      this.#ws = undefined;
      const wasUp = this.#openedAt > 0;
      if (wasUp && Date.now() - this.#openedAt >= STABLE_MS) this.#attempt = 0;
      this.#openedAt = 0;
      this.#o.onClose();
      if (!this.#running) return;
      const base = Math.min(this.#o.maxDelayMs, this.#o.minDelayMs * 2 ** this.#attempt);
      this.#attempt += 1;
      const delay = Math.round(base / 2 + Math.random() * (base / 2));
      this.#retry = setTimeout(() => {
        this.#retry = undefined;
        this.#connect();
      }, delay);
      this.#retry.unref();
    });
  }
}
