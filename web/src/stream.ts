/**
 * Live quotes from /api/stream through the typed client. The browser's EventSource cannot send the
 * Authorization or X-API-Key header a service with DATA_REQUIRES_AUTH=true asks for, so the same
 * text/event-stream is read from a fetch and parsed here; it reconnects with Last-Event-ID as
 * EventSource would.
 */
import { createParser } from 'eventsource-parser';
import type { components } from '../../src/generated/api.ts';
import { api, ApiError } from './api.ts';

export type Quote = components['schemas']['Quote'];

export interface StreamHandlers {
  quote(quote: Quote): void;
  missing(symbols: string[]): void;
  status(state: 'connecting' | 'live' | 'retrying', problem?: ApiError): void;
}

/** Follows `symbols` until the returned function is called. */
export function followQuotes(symbols: readonly string[], handlers: StreamHandlers): () => void {
  const controller = new AbortController();
  let lastEventId: string | undefined;
  let retryMs = 3000;

  const run = async () => {
    while (!controller.signal.aborted) {
      handlers.status('connecting');
      let problem: ApiError | undefined;
      try {
        const answer = await api.GET('/api/stream', {
          params: { query: { symbols: symbols.join(',') }, header: lastEventId ? { 'Last-Event-ID': lastEventId } : {} },
          parseAs: 'stream',
          signal: controller.signal,
        });
        if (!answer.response.ok || !answer.data) {
          const body = answer.error as { error?: unknown } | undefined;
          problem = new ApiError(answer.response.status, typeof body?.error === 'string' ? body.error : `The stream answered ${answer.response.status}`);
        } else {
          handlers.status('live');
          const parser = createParser({
            onEvent(event) {
              if (event.id && /^[0-9]{1,15}$/.test(event.id)) lastEventId = event.id;
              if (event.event === 'quote') handlers.quote(JSON.parse(event.data) as Quote);
              else if (event.event === 'missing') handlers.missing((JSON.parse(event.data) as { missing: string[] }).missing);
              // The credentials that opened the stream were revoked or expired: the envelope says which; the stream ends next.
              else if (event.event === 'error') {
                const envelope = JSON.parse(event.data) as { code?: unknown; error?: unknown };
                problem = new ApiError(typeof envelope.code === 'number' ? envelope.code : 401, typeof envelope.error === 'string' ? envelope.error : 'The stream was refused');
              }
            },
            onRetry(ms) {
              retryMs = ms;
            },
          });
          const reader = (answer.data as ReadableStream<Uint8Array>).getReader();
          const decoder = new TextDecoder();
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            parser.feed(decoder.decode(value, { stream: true }));
          }
        }
      } catch (err) {
        if (controller.signal.aborted) return;
        problem = new ApiError(0, 'The live stream was interrupted');
        void err;
      }
      if (controller.signal.aborted) return;
      handlers.status('retrying', problem);
      // A refusal the caller must fix (credentials, an unknown symbol) is not retried in a loop.
      if (problem && (problem.status === 401 || problem.status === 403 || problem.status === 404 || problem.status === 422)) return;
      await new Promise((done) => setTimeout(done, retryMs));
    }
  };
  void run();
  return () => controller.abort();
}
