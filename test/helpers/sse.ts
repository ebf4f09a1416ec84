/**
 * An SSE client for tests over a plain node:http request (one socket per stream), parsed with
 * eventsource-parser: events, comments and `retry:` as they arrive, and the status and body of a
 * refusal.
 */
import { request, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { waitFor } from './wait-for.js';

export interface TestStream {
  status: number;
  headers: IncomingHttpHeaders;
  /** Every event received, in order. */
  events: EventSourceMessage[];
  comments: string[];
  retry: number | undefined;
  /** The body of a non-200 answer (an error envelope). */
  body: string;
  /** True once the server ended or cut the stream. */
  ended: boolean;
  /** When it ended (performance.now()). */
  endedAt: number | undefined;
  /** Waits until at least `n` events arrived. */
  waitForEvents(n: number, timeoutMs?: number): Promise<EventSourceMessage[]>;
  /** The `quote` events' data, parsed. */
  quotes(): Array<{ symbol: string; price: number }>;
  close(): void;
}

/** Opens `url` as an event stream; resolves once the status and headers are in. */
export function openStream(url: string, headers: Record<string, string> = {}): Promise<TestStream> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { accept: 'text/event-stream', ...headers } }, (res: IncomingMessage) => {
      const stream: TestStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events: [],
        comments: [],
        retry: undefined,
        body: '',
        ended: false,
        endedAt: undefined,
        async waitForEvents(n, timeoutMs = 5000) {
          await waitFor(() => stream.events.length >= n, { timeoutMs, message: `${n} events from ${url} (got ${stream.events.length})` });
          return stream.events;
        },
        quotes: () => stream.events.filter((e) => e.event === 'quote').map((e) => JSON.parse(e.data) as { symbol: string; price: number }),
        close: () => req.destroy(),
      };
      const parser = createParser({
        onEvent: (event) => stream.events.push(event),
        onComment: (comment) => stream.comments.push(comment),
        onRetry: (ms) => {
          stream.retry = ms;
        },
      });
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (stream.status === 200) parser.feed(chunk);
        else stream.body += chunk;
      });
      const ended = () => {
        if (stream.ended) return;
        stream.ended = true;
        stream.endedAt = performance.now();
      };
      res.on('end', ended);
      res.on('close', ended);
      res.on('error', ended);
      resolve(stream);
    });
    req.on('error', reject);
    req.end();
  });
}
