/**
 * Live quotes in Node, without a browser: `fetch` reads GET /api/stream and eventsource-parser turns
 * the bytes into events. Like a browser's EventSource it reconnects after the stream's `retry:` and
 * sends the last event id, so the service resends only what changed meanwhile; unlike it, a refusal
 * (404, 422, 429, 503) is reported with the envelope's message.
 *
 *   node --import tsx examples/stream-client.ts http://127.0.0.1:8000 ^GSPC,^DJI
 */
import { pathToFileURL } from 'node:url';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { components } from '../src/generated/api.js';

type Quote = components['schemas']['Quote'];
type ErrorEnvelope = components['schemas']['Error'];

export interface StreamHandlers {
  onQuote(quote: Quote, id: string): void;
  /** Symbols the provider does not know (sent once, before the quotes). */
  onMissing?(symbols: string[]): void;
  /** The connection dropped; the client reconnects after `delayMs`. */
  onReconnect?(delayMs: number): void;
}

/** The service refused the stream; `status` and `message` come from the error envelope. */
export class StreamRefusedError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Streams quotes of `symbols` (comma-separated) from `baseUrl` until `signal` aborts. Resolves on
 * abort; rejects with `StreamRefusedError` when the service answers with an error envelope.
 */
export async function streamQuotes(baseUrl: string, symbols: string, handlers: StreamHandlers, signal: AbortSignal): Promise<void> {
  let lastEventId: string | undefined;
  let retryMs = 3000;
  while (!signal.aborted) {
    try {
      const res = await fetch(`${baseUrl}/api/stream?symbols=${encodeURIComponent(symbols)}`, {
        headers: { accept: 'text/event-stream', ...(lastEventId !== undefined ? { 'last-event-id': lastEventId } : {}) },
        signal,
      });
      if (res.status !== 200 || res.body === null) {
        const envelope = (await res.json().catch(() => undefined)) as ErrorEnvelope | undefined;
        throw new StreamRefusedError(res.status, envelope?.error ?? `HTTP ${res.status}`);
      }
      const events = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(
        new EventSourceParserStream({
          onRetry: (ms) => {
            retryMs = ms;
          },
        }),
      );
      for await (const event of events) {
        if (event.id !== undefined) lastEventId = event.id;
        if (event.event === 'quote') handlers.onQuote(JSON.parse(event.data) as Quote, event.id ?? '');
        else if (event.event === 'missing') handlers.onMissing?.((JSON.parse(event.data) as { missing: string[] }).missing);
      }
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof StreamRefusedError) throw err;
    }
    if (signal.aborted) return;
    handlers.onReconnect?.(retryMs);
    await new Promise((resolve) => setTimeout(resolve, retryMs));
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [baseUrl = 'http://127.0.0.1:8000', symbols = '^GSPC,^DJI,^IXIC'] = process.argv.slice(2);
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  try {
    await streamQuotes(
      baseUrl,
      symbols,
      {
        onQuote: (q, id) => console.log(`${id}  ${q.symbol.padEnd(10)} ${String(q.price).padStart(12)}  ${q.change_percent === null ? '   -' : q.change_percent.toFixed(2)} %`),
        onMissing: (missing) => console.log(`unknown: ${missing.join(', ')}`),
        onReconnect: (ms) => console.error(`connection lost; reconnecting in ${ms} ms`),
      },
      stop.signal,
    );
  } catch (err) {
    // A refusal is an answer for the person at the terminal, not a crash: one line, exit 1.
    if (!(err instanceof StreamRefusedError)) throw err;
    console.error(`mds refused the stream (HTTP ${err.status}): ${err.message}`);
    process.exitCode = 1;
  }
}
