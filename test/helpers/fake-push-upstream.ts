/**
 * Local WebSocket servers that replay the push upstreams: Yahoo's streamer (frames encoded with our
 * PricingData schema, in the `?version=2` JSON envelope) and Polygon/Massive's stocks socket (status
 * messages, auth by key, trade events). Each records its connections and what clients said.
 */
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { encodePricing, type PricingData } from '../../src/infra/stream/yahoo-pricing.js';
import { waitFor } from './wait-for.js';

export interface FakePushUpstream {
  url: string;
  /** Connections open now. */
  readonly open: number;
  /** Connections ever accepted. */
  readonly accepted: number;
  /** Every JSON message clients sent, parsed, in order. */
  readonly messages: Array<Record<string, unknown>>;
  /** Symbols subscribed now, over every open connection. */
  subscribed(): Set<string>;
  waitForSubscribed(symbol: string, timeoutMs?: number): Promise<void>;
  /** Goes away as a dead upstream does: open connections are cut and new ones refused, until `start`. */
  stop(): Promise<void>;
  /** Listens again on the same port after `stop`. */
  start(): Promise<void>;
  close(): Promise<void>;
}

interface Base extends FakePushUpstream {
  sockets: Set<WebSocket>;
  subs: Map<WebSocket, Set<string>>;
}

async function listen(onConnection: (ws: WebSocket, base: Base) => void): Promise<Base> {
  let wss: WebSocketServer | undefined;
  let port = 0;
  let accepted = 0;
  const serve = async () => {
    const server = new WebSocketServer({ host: '127.0.0.1', port });
    await new Promise<void>((resolve, reject) => {
      server.once('listening', () => resolve());
      server.once('error', reject);
    });
    port = (server.address() as AddressInfo).port;
    server.on('connection', (ws) => {
      accepted += 1;
      base.sockets.add(ws);
      base.subs.set(ws, new Set());
      ws.on('close', () => {
        base.sockets.delete(ws);
        base.subs.delete(ws);
      });
      onConnection(ws, base);
    });
    wss = server;
  };
  const stop = async () => {
    const server = wss;
    wss = undefined;
    for (const ws of base.sockets) ws.terminate();
    base.sockets.clear();
    base.subs.clear();
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  const base: Base = {
    sockets: new Set(),
    subs: new Map(),
    url: '',
    get open() {
      return base.sockets.size;
    },
    get accepted() {
      return accepted;
    },
    messages: [],
    subscribed() {
      const all = new Set<string>();
      for (const set of base.subs.values()) for (const s of set) all.add(s);
      return all;
    },
    async waitForSubscribed(symbol, timeoutMs = 5000) {
      await waitFor(() => base.subscribed().has(symbol), { timeoutMs, message: `the upstream to be subscribed to ${symbol}` });
    },
    stop,
    async start() {
      if (wss === undefined) await serve();
    },
    close: stop,
  };
  await serve();
  base.url = `ws://127.0.0.1:${port}/`;
  return base;
}

export interface FakeYahooStreamer extends FakePushUpstream {
  /** Sends a frame of `data` to every connection subscribed to `data.id`; resolves to how many got it. */
  push(data: Partial<PricingData> & { id: string }): number;
  /** Sends raw text to every connection (garbage tests). */
  raw(text: string): void;
}

export async function startFakeYahooStreamer(): Promise<FakeYahooStreamer> {
  const base = await listen((ws, b) => {
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString()) as { subscribe?: string[]; unsubscribe?: string[] };
      b.messages.push(message);
      const set = b.subs.get(ws)!;
      for (const s of message.subscribe ?? []) set.add(s);
      for (const s of message.unsubscribe ?? []) set.delete(s);
    });
  });
  return Object.assign(base, {
    push(data: Partial<PricingData> & { id: string }): number {
      const frame = JSON.stringify({ type: 'pricing', message: encodePricing(data) });
      let sent = 0;
      for (const [ws, set] of base.subs) {
        if (!set.has(data.id)) continue;
        ws.send(frame);
        sent += 1;
      }
      return sent;
    },
    raw(text: string): void {
      for (const ws of base.sockets) ws.send(text);
    },
  });
}

export interface FakePolygonSocket extends FakePushUpstream {
  /** Sends a trade to every authenticated connection subscribed to `T.<sym>` (size 100 and sequence 1 unless given). */
  trade(sym: string, price: number, timeMs?: number, extra?: { size?: number; sequence?: number }): number;
  /** Sends a minute aggregate (`AM`) of the minute starting at `startMs` to every connection subscribed to `AM.<sym>`. */
  aggregate(sym: string, bar: { startMs: number; open: number; high: number; low: number; close: number; volume: number }): number;
  /** Auth attempts, by key. */
  readonly auths: string[];
}

/** `goodKeys` authenticate; any other key gets `auth_failed`. */
export async function startFakePolygonSocket(goodKeys: readonly string[]): Promise<FakePolygonSocket> {
  const auths: string[] = [];
  const authed = new WeakSet<WebSocket>();
  const base = await listen((ws, b) => {
    ws.send(JSON.stringify([{ ev: 'status', status: 'connected', message: 'Connected Successfully' }]));
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString()) as { action?: string; params?: string };
      b.messages.push(message);
      if (message.action === 'auth') {
        auths.push(message.params ?? '');
        if (goodKeys.includes(message.params ?? '')) {
          authed.add(ws);
          ws.send(JSON.stringify([{ ev: 'status', status: 'auth_success', message: 'authenticated' }]));
        } else ws.send(JSON.stringify([{ ev: 'status', status: 'auth_failed', message: 'authentication failed' }]));
        return;
      }
      if (!authed.has(ws)) return;
      const set = b.subs.get(ws)!;
      for (const channel of (message.params ?? '').split(',').filter(Boolean)) {
        if (message.action === 'subscribe') set.add(channel.replace(/^T\./, ''));
        if (message.action === 'unsubscribe') set.delete(channel.replace(/^T\./, ''));
      }
      ws.send(JSON.stringify([{ ev: 'status', status: 'success', message: `${message.action}d to: ${message.params}` }]));
    });
  });
  return Object.assign(base, {
    auths,
    trade(sym: string, price: number, timeMs = Date.now(), extra: { size?: number; sequence?: number } = {}): number {
      let sent = 0;
      for (const [ws, set] of base.subs) {
        if (!set.has(sym)) continue;
        ws.send(JSON.stringify([{ ev: 'T', sym, i: '1', x: 4, p: price, s: extra.size ?? 100, c: [0], t: timeMs, q: extra.sequence ?? 1, z: 3 }]));
        sent += 1;
      }
      return sent;
    },
    aggregate(sym: string, bar: { startMs: number; open: number; high: number; low: number; close: number; volume: number }): number {
      let sent = 0;
      for (const [ws, set] of base.subs) {
        if (!set.has(`AM.${sym}`)) continue;
        ws.send(JSON.stringify([{ ev: 'AM', sym, v: bar.volume, av: bar.volume, op: bar.open, vw: bar.close, o: bar.open, c: bar.close, h: bar.high, l: bar.low, a: bar.close, z: 10, s: bar.startMs, e: bar.startMs + 60_000 }]));
        sent += 1;
      }
      return sent;
    },
  });
}
