/**
 * A client process of `bench/live.ts`: WebSocket subscribers of `/api/ws`, driven over IPC by the
 * bench, so the clients neither compete in the bench's event loop nor in the server's.
 *
 * Messages from the bench:
 * - `connect`: opens clients (each subscribes to its symbols) with at most `inFlight` handshakes under
 *   way; a failed handshake (refused, reset, timed out, closed before `subscribed`) is tried again up
 *   to `retries` times after a short back-off; answers `connected` with how many were acknowledged by
 *   the server's `subscribed` event, how many failed for good and why, and how many tries were repeated.
 * - `record` / `stop`: latency of every quote received meanwhile (receipt time minus the quote's
 *   `timestamp`, which is the push's send time), answered as a histogram in whole milliseconds.
 * - `close`: terminates every connection and exits.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import WebSocket from 'ws';

export interface ConnectOrder {
  type: 'connect';
  url: string;
  /** The symbols of each client to open. */
  clients: string[][];
  inFlight: number;
  retries: number;
  /** Source addresses to spread the clients over (one is enough unless the ephemeral port range is short). */
  localAddresses: string[];
  handshakeTimeoutMs: number;
}

export type ToWorker = ConnectOrder | { type: 'record' } | { type: 'stop' } | { type: 'close' };

export type FromWorker =
  | { type: 'ready' }
  | { type: 'connected'; acknowledged: number; failed: number; retried: number; reasons: Record<string, number>; ms: number }
  | { type: 'recorded'; histogram: Array<[number, number]>; count: number; closedMeanwhile: number; loopDelayP99Ms: number };

const TIMESTAMP = /"timestamp":"([^"]+)"/;

const open = new Set<WebSocket>();
/** Connections the server (or the network) closed after they were acknowledged. */
let closedAfterAck = 0;
let histogram: Map<number, number> | undefined;
let count = 0;
let closedAtStart = 0;
const loop = monitorEventLoopDelay({ resolution: 10 });

function send(message: FromWorker): void {
  process.send!(message);
}

function onQuote(text: string): void {
  if (histogram === undefined || !text.startsWith('{"event":"quote"')) return;
  const ts = TIMESTAMP.exec(text)?.[1];
  if (ts === undefined) return;
  const ms = Math.max(0, Date.now() - Date.parse(ts));
  histogram.set(ms, (histogram.get(ms) ?? 0) + 1);
  count += 1;
}

/** One handshake and subscription; rejects with a short reason. */
function connectOne(url: string, symbols: string[], localAddress: string, timeoutMs: number): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: timeoutMs, localAddress });
    let acknowledged = false;
    const fail = (reason: string) => {
      if (acknowledged) return;
      clearTimeout(timer);
      ws.removeAllListeners();
      ws.on('error', () => undefined);
      ws.terminate();
      reject(new Error(reason));
    };
    // The handshake's own timeout covers the upgrade; this one covers the subscription after it.
    const timer = setTimeout(() => fail('timeout'), timeoutMs * 2);
    ws.on('message', (data) => {
      const text = data.toString();
      if (acknowledged) return onQuote(text);
      if (text.startsWith('{"event":"subscribed"')) {
        acknowledged = true;
        clearTimeout(timer);
        open.add(ws);
        resolve(ws);
      } else if (text.startsWith('{"event":"error"')) fail(`error event ${/"code":(\d+)/.exec(text)?.[1] ?? '?'}`);
    });
    ws.once('open', () => ws.send(JSON.stringify({ action: 'subscribe', symbols })));
    ws.once('unexpected-response', (_req, res) => fail(`status ${res.statusCode}`));
    ws.on('error', (err: NodeJS.ErrnoException) => fail(err.code ?? (/timed out/i.test(err.message) ? 'handshake timeout' : 'error')));
    ws.once('close', (code) => {
      if (!acknowledged) fail(`closed ${code}`);
      else if (open.delete(ws)) closedAfterAck += 1;
    });
  });
}

async function connectAll(order: ConnectOrder): Promise<void> {
  const started = Date.now();
  const reasons: Record<string, number> = {};
  let acknowledged = 0;
  let failed = 0;
  let retried = 0;
  let next = 0;
  const runner = async () => {
    while (next < order.clients.length) {
      const index = next++;
      const localAddress = order.localAddresses[index % order.localAddresses.length]!;
      for (let attempt = 0; ; attempt++) {
        try {
          await connectOne(order.url, order.clients[index]!, localAddress, order.handshakeTimeoutMs);
          acknowledged += 1;
          break;
        } catch (err) {
          const reason = (err as Error).message;
          if (attempt >= order.retries) {
            failed += 1;
            reasons[reason] = (reasons[reason] ?? 0) + 1;
            break;
          }
          retried += 1;
          reasons[`${reason} (tried again)`] = (reasons[`${reason} (tried again)`] ?? 0) + 1;
          await new Promise((r) => setTimeout(r, 100 * 2 ** attempt + Math.random() * 100));
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(order.inFlight, order.clients.length)) }, runner));
  send({ type: 'connected', acknowledged, failed, retried, reasons, ms: Date.now() - started });
}

process.on('message', (message: ToWorker) => {
  switch (message.type) {
    case 'connect':
      void connectAll(message);
      break;
    case 'record':
      histogram = new Map();
      count = 0;
      closedAtStart = closedAfterAck;
      loop.reset();
      loop.enable();
      break;
    case 'stop': {
      const got = histogram ?? new Map<number, number>();
      histogram = undefined;
      loop.disable();
      send({ type: 'recorded', histogram: [...got], count, closedMeanwhile: closedAfterAck - closedAtStart, loopDelayP99Ms: loop.percentile(99) / 1e6 });
      break;
    }
    case 'close':
      for (const ws of open) ws.terminate();
      process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
send({ type: 'ready' });
