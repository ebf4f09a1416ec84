/**
 * examples/stream-client.ts against a real service: the first quotes, a change, a reconnect that
 * resumes from the last event id when the service drops the stream, and a refusal with the envelope.
 */
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamRefusedError, streamQuotes } from '../../examples/stream-client.js';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/wait-for.js';

const API_KEY = 'stream-client-api-key-0123456789';
const ROOT = resolve(import.meta.dirname, '../..');
const EXAMPLE = resolve(ROOT, 'examples/stream-client.ts');

describe('examples/stream-client.ts', () => {
  const provider = new ControlledProvider();
  const symbol = uniqueSymbol('NODE');
  let svc: TestService;

  beforeAll(async () => {
    provider.set(symbol, 100);
    svc = await startTestService({ API_KEYS: API_KEY }, { provider });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it('stream client: when a quote changes, then it is handed the first quote and then the change', async () => {
    const stop = new AbortController();
    const prices: number[] = [];
    const done = streamQuotes(svc.url, symbol, { onQuote: (q) => prices.push(q.price) }, stop.signal);
    await waitFor(() => prices.length === 1);

    provider.set(symbol, 104.2);
    expect((await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } })).status).toBe(200);
    expect((await svc.fetch(`/api/quotes/${symbol}`)).status).toBe(200);
    await waitFor(() => prices.length === 2);
    stop.abort();
    await done;
    expect(prices).toEqual([100, 104.2]);
    await waitFor(() => svc.streams.size === 0);
  });

  it('stream client: when the service restarts, then it reconnects with the last event id and gets only what changed', async () => {
    const port = new URL(svc.url).port;
    await svc.close();
    svc = await startTestService({ API_KEYS: API_KEY, PORT: port }, { provider });
    const resumed = uniqueSymbol('NODE');
    provider.set(resumed, 50);
    const stop = new AbortController();
    const seen: Array<{ price: number; id: string }> = [];
    let reconnects = 0;
    const done = streamQuotes(svc.url, resumed, { onQuote: (q, id) => seen.push({ price: q.price, id }), onReconnect: () => (reconnects += 1) }, stop.signal);
    await waitFor(() => seen.length === 1);

    // The instance goes away (its streams end) and another one takes its port, sharing the Redis.
    // No reconnect margin, so "only what changed" is exact (by default a change up to 5 s before the
    // last id is sent again).
    await svc.close();
    svc = await startTestService({ API_KEYS: API_KEY, PORT: port, STREAM_RECONNECT_MARGIN_SECONDS: '0' }, { provider });
    await waitFor(() => reconnects >= 1 && svc.streams.size === 1, { timeoutMs: 10_000, message: 'the client reconnected' });
    provider.set(resumed, 55);
    expect((await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } })).status).toBe(200);
    expect((await svc.fetch(`/api/quotes/${resumed}`)).status).toBe(200);
    await waitFor(() => seen.length === 2);
    stop.abort();
    await done;
    // The unchanged 50 was not sent again on reconnect: the service knew the client had it.
    expect(seen.map((e) => e.price)).toEqual([50, 55]);
    expect(Number(seen[1]!.id)).toBeGreaterThan(Number(seen[0]!.id));
  });

  it('stream client: when no symbol is known, then it rejects with the 404 envelope message', async () => {
    await expect(streamQuotes(svc.url, 'NOSUCH9', { onQuote: () => undefined }, new AbortController().signal)).rejects.toEqual(
      new StreamRefusedError(404, "Unknown symbol 'NOSUCH9'"),
    );
  });

  it('stream client run from a terminal: when the stream is refused, then one line on stderr and exit 1, no stack trace', async () => {
    // Asynchronously: the service answering it lives in this process.
    const child = spawn(process.execPath, ['--import', 'tsx', EXAMPLE, svc.url, 'NOSUCH9'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((done) => child.once('exit', done));

    expect(stderr).toBe("mds refused the stream (HTTP 404): Unknown symbol 'NOSUCH9'\n");
    expect(code).toBe(1);
    expect(stdout).toBe('');
  }, 60_000);
});
