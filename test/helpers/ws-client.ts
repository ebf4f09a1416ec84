/** A WebSocket API client for tests: every event received, parsed, with waits on them. */
import WebSocket from 'ws';
import { waitFor } from './wait-for.js';

export interface WsEvent {
  event: string;
  data?: { symbol: string; price: number } & Record<string, unknown>;
  symbols?: string[];
  missing?: string[];
  code?: number;
  error?: string;
  detail?: string;
  [key: string]: unknown;
}

export interface TestWs {
  ws: WebSocket;
  events: WsEvent[];
  /** When each event arrived (performance.now()), parallel to `events`. */
  arrivals: number[];
  closeCode: number | undefined;
  /** The close frame's reason. */
  closeReason: string | undefined;
  /** When the connection closed (performance.now()). */
  closedAt: number | undefined;
  send(message: unknown): void;
  waitFor(predicate: (e: WsEvent) => boolean, message: string, timeoutMs?: number): Promise<WsEvent>;
  quotes(symbol?: string): number[];
  waitForClose(timeoutMs?: number): Promise<number>;
  close(): void;
}

/** Connects to `url` (ws://.../api/ws); resolves once open, or rejects with the refusal's status. */
export function openWs(url: string, headers: Record<string, string> = {}): Promise<TestWs> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const client: TestWs = {
      ws,
      events: [],
      arrivals: [],
      closeCode: undefined,
      closeReason: undefined,
      closedAt: undefined,
      send: (message) => ws.send(typeof message === 'string' ? message : JSON.stringify(message)),
      async waitFor(predicate, message, timeoutMs = 5000) {
        let found: WsEvent | undefined;
        await waitFor(() => (found = client.events.find(predicate)) !== undefined, { timeoutMs, message });
        return found!;
      },
      quotes: (symbol) => client.events.filter((e) => e.event === 'quote' && (symbol === undefined || e.data?.symbol === symbol)).map((e) => e.data!.price),
      async waitForClose(timeoutMs = 5000) {
        await waitFor(() => client.closeCode !== undefined, { timeoutMs, message: 'the server to close the connection' });
        return client.closeCode!;
      },
      close: () => ws.terminate(),
    };
    ws.on('message', (data) => {
      client.events.push(JSON.parse(data.toString()) as WsEvent);
      client.arrivals.push(performance.now());
    });
    ws.on('close', (code, reason) => {
      client.closeCode = code;
      client.closeReason = reason.toString();
      client.closedAt = performance.now();
    });
    ws.once('open', () => resolve(client));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => reject(Object.assign(new Error(`refused with ${res.statusCode}`), { status: res.statusCode, body, headers: res.headers })));
    });
    ws.once('error', (err) => reject(err));
  });
}
