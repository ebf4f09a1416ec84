/**
 * GET /api/stream over a real socket: first events, changes, Last-Event-ID, limits, heartbeats,
 * shutdown. Quotes change when the test moves a price of its controlled provider and makes the cache
 * engine load it again (flush, then a read).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { openStream, type TestStream } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait-for.js';

const API_KEY = 'stream-test-api-key-0123456789';

let svc: TestService | undefined;
const streams: TestStream[] = [];

async function start(env: Record<string, string> = {}, provider = new ControlledProvider()): Promise<TestService> {
  svc = await startTestService({ API_KEYS: API_KEY, ...env }, { provider });
  return svc;
}

async function open(path: string, headers: Record<string, string> = {}): Promise<TestStream> {
  const stream = await openStream(`${svc!.url}${path}`, headers);
  streams.push(stream);
  return stream;
}

/** Moves the price and makes the engine load the quote again, as an expiry followed by a read would. */
async function change(s: TestService, provider: ControlledProvider, symbol: string, price: number): Promise<void> {
  provider.set(symbol, price);
  const flush = await s.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } });
  expect(flush.status).toBe(200);
  const read = await s.fetch(`/api/quotes/${encodeURIComponent(symbol)}`);
  expect(read.status).toBe(200);
  expect(((await read.json()) as { data: { price: number } }).data.price).toBe(price);
}

afterEach(async () => {
  for (const s of streams.splice(0)) s.close();
  await svc?.close();
  svc = undefined;
});

describe('GET /api/stream', () => {
  it('stream: when the symbols are known, then it begins with retry and one quote event per symbol, each with an id', async () => {
    const provider = new ControlledProvider();
    const [a, b] = [uniqueSymbol('A'), uniqueSymbol('B')];
    provider.set(a, 101);
    provider.set(b, 202);
    await start({}, provider);
    const stream = await open(`/api/stream?symbols=${a},${b.toLowerCase()}`);

    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(stream.headers['cache-control']).toBe('no-cache, no-transform');
    const events = await stream.waitForEvents(2);
    expect(stream.retry).toBe(3000);
    expect(events.map((e) => e.event)).toEqual(['quote', 'quote']);
    expect(new Map(stream.quotes().map((q) => [q.symbol, q.price]))).toEqual(new Map([[a, 101], [b, 202]]));
    for (const e of events) expect(e.id).toMatch(/^[0-9]{13}$/);
    expect(svc!.streams.size).toBe(1);
  });

  it('stream: when a quote changes, then subscribers of that symbol get one quote event with a later id, and others none', async () => {
    const provider = new ControlledProvider();
    const [a, b] = [uniqueSymbol('A'), uniqueSymbol('B')];
    provider.set(a, 101);
    provider.set(b, 202);
    const s = await start({}, provider);
    const onA = await open(`/api/stream?symbols=${a}`);
    const onB = await open(`/api/stream?symbols=${b}`);
    await onA.waitForEvents(1);
    await onB.waitForEvents(1);

    await change(s, provider, a, 105.5);
    const events = await onA.waitForEvents(2);
    expect(stream2Prices(onA)).toEqual([101, 105.5]);
    expect(Number(events[1]!.id)).toBeGreaterThan(Number(events[0]!.id));
    // The flush made b load again too when it is read; an unchanged quote is no event.
    const readB = await s.fetch(`/api/quotes/${b}`);
    expect(readB.status).toBe(200);
    await change(s, provider, a, 106);
    await onA.waitForEvents(3);
    expect(onB.events).toHaveLength(1);
  });

  it('stream: when some symbols are unknown, then a missing event names them; when none is known, then 404 envelope', async () => {
    const provider = new ControlledProvider();
    const a = uniqueSymbol('A');
    provider.set(a, 101);
    await start({}, provider);
    const mixed = await open(`/api/stream?symbols=${a},NOSUCH1`);
    const events = await mixed.waitForEvents(2);
    expect(events[0]).toMatchObject({ event: 'missing' });
    expect(JSON.parse(events[0]!.data)).toEqual({ missing: ['NOSUCH1'] });
    expect(events[1]!.event).toBe('quote');

    const none = await open('/api/stream?symbols=NOSUCH1,NOSUCH2');
    await waitFor(() => none.ended);
    expect(none.status).toBe(404);
    expect(JSON.parse(none.body)).toEqual({
      success: false,
      error: 'None of the symbols is known: NOSUCH1, NOSUCH2',
      code: 404,
      detail: 'None of the symbols is known: NOSUCH1, NOSUCH2',
    });
  });

  it('stream: when the symbols are invalid or repeated, then 422 envelope and no stream', async () => {
    await start();
    for (const query of ['symbols=', 'symbols=A%20B', 'symbols=AAA,aaa', `symbols=${Array.from({ length: 51 }, (_, i) => `S${i}`).join(',')}`, '']) {
      const res = await open(`/api/stream?${query}`);
      await waitFor(() => res.ended);
      expect(res.status, query).toBe(422);
      expect(JSON.parse(res.body)).toMatchObject({ success: false, code: 422 });
    }
    expect(svc!.streams.size).toBe(0);
  });

  it('stream: when an address holds STREAM_MAX_PER_ADDRESS streams, then the next is 429 with Retry-After, and a closed one frees its place', async () => {
    const provider = new ControlledProvider();
    const a = uniqueSymbol('A');
    provider.set(a, 101);
    await start({ STREAM_MAX_PER_ADDRESS: '2' }, provider);
    const first = await open(`/api/stream?symbols=${a}`);
    await open(`/api/stream?symbols=${a}`);
    const third = await open(`/api/stream?symbols=${a}`);
    await waitFor(() => third.ended);
    expect(third.status).toBe(429);
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    expect(JSON.parse(third.body)).toMatchObject({ success: false, code: 429 });

    first.close();
    await waitFor(() => svc!.streams.size === 1);
    const again = await open(`/api/stream?symbols=${a}`);
    expect(again.status).toBe(200);

    // From the same address, a caller with a key is not counted per address (its quota bounds it).
    for (let i = 0; i < 3; i++) {
      const keyed = await open(`/api/stream?symbols=${a}`, { 'X-API-Key': API_KEY });
      await keyed.waitForEvents(1);
      expect(keyed.status).toBe(200);
    }
    expect(svc!.streams.size).toBe(5);
    const anonymous = await open(`/api/stream?symbols=${a}`);
    await waitFor(() => anonymous.ended);
    expect(anonymous.status).toBe(429);
  });

  it('stream: when an API key holds STREAM_MAX_PER_CALLER streams, then its next is 429 with Retry-After, while another key and an anonymous caller still get one', async () => {
    const provider = new ControlledProvider();
    const a = uniqueSymbol('A');
    provider.set(a, 101);
    const otherKey = 'stream-test-other-key-0123456789';
    await start({ API_KEYS: `${API_KEY},${otherKey}`, STREAM_MAX_CLIENTS: '10', STREAM_MAX_PER_CALLER: '3', STREAM_MAX_PER_ADDRESS: '5' }, provider);
    const held: TestStream[] = [];
    for (let i = 0; i < 3; i++) {
      const keyed = await open(`/api/stream?symbols=${a}`, { 'X-API-Key': API_KEY });
      await keyed.waitForEvents(1);
      expect(keyed.status).toBe(200);
      held.push(keyed);
    }
    const over = await open(`/api/stream?symbols=${a}`, { 'X-API-Key': API_KEY });
    await waitFor(() => over.ended);
    expect(over.status).toBe(429);
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
    expect(JSON.parse(over.body)).toMatchObject({ success: false, code: 429, error: 'Too many open streams for this caller (at most 3); close one first' });
    expect(svc!.streams.size).toBe(3);

    const anonymous = await open(`/api/stream?symbols=${a}`);
    await anonymous.waitForEvents(1);
    expect(anonymous.status).toBe(200);
    const other = await open(`/api/stream?symbols=${a}`, { 'X-API-Key': otherKey });
    await other.waitForEvents(1);
    expect(other.status).toBe(200);
    expect(svc!.streams.size).toBe(5);

    // A closed stream gives its place back to the same caller.
    held[0]!.close();
    await waitFor(() => svc!.streams.size === 4);
    const again = await open(`/api/stream?symbols=${a}`, { 'X-API-Key': API_KEY });
    await again.waitForEvents(1);
    expect(again.status).toBe(200);
  });

  it('stream: IPv6 callers of one /64 share the per-address limit; another /64 has its own', async () => {
    const provider = new ControlledProvider();
    const a = uniqueSymbol('A');
    provider.set(a, 101);
    await start({ STREAM_MAX_PER_ADDRESS: '1', TRUST_PROXY: '1' }, provider);
    const first = await open(`/api/stream?symbols=${a}`, { 'X-Forwarded-For': '2001:db8:5:5::1' });
    await first.waitForEvents(1);
    const sameNetwork = await open(`/api/stream?symbols=${a}`, { 'X-Forwarded-For': '2001:db8:5:5:1234::2' });
    await waitFor(() => sameNetwork.ended);
    expect(sameNetwork.status).toBe(429);
    const otherNetwork = await open(`/api/stream?symbols=${a}`, { 'X-Forwarded-For': '2001:db8:5:6::1' });
    await otherNetwork.waitForEvents(1);
    expect(otherNetwork.status).toBe(200);
    expect(svc!.streams.size).toBe(2);
  });

  it('stream: HEAD answers the headers of a stream without opening one; a Last-Event-ID past 15 digits is 422', async () => {
    const provider = new ControlledProvider();
    const a = uniqueSymbol('A');
    provider.set(a, 101);
    await start({ STREAM_MAX_PER_ADDRESS: '1' }, provider);
    for (let i = 0; i < 3; i++) {
      const head = await svc!.fetch(`/api/stream?symbols=${a}`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      expect(await head.text()).toBe('');
    }
    expect(svc!.streams.size).toBe(0);
    expect((await svc!.fetch('/api/stream?symbols=A%20B', { method: 'HEAD' })).status).toBe(422);

    // 16 digits would pass 2^53 and come back rounded as an id the stream itself then refuses.
    const tooLong = await open(`/api/stream?symbols=${a}`, { 'Last-Event-ID': '9999999999999999' });
    await waitFor(() => tooLong.ended);
    expect(tooLong.status).toBe(422);
    const longest = await open(`/api/stream?symbols=${a}`, { 'Last-Event-ID': '999999999999999' });
    expect(longest.status).toBe(200);
  });

  it('stream: when the instance holds STREAM_MAX_CLIENTS streams, then the next is 503 with Retry-After', async () => {
    const provider = new ControlledProvider();
    const a = uniqueSymbol('A');
    provider.set(a, 101);
    await start({ STREAM_MAX_CLIENTS: '1', STREAM_MAX_PER_ADDRESS: '0' }, provider);
    await (await open(`/api/stream?symbols=${a}`)).waitForEvents(1);
    const second = await open(`/api/stream?symbols=${a}`);
    await waitFor(() => second.ended);
    expect(second.status).toBe(503);
    expect(Number(second.headers['retry-after'])).toBeGreaterThan(0);
    expect(JSON.parse(second.body)).toMatchObject({ success: false, code: 503 });
  });

  it('stream: when a client reconnects with Last-Event-ID, then it first gets only the quotes that changed since', async () => {
    const provider = new ControlledProvider();
    const [a, b] = [uniqueSymbol('A'), uniqueSymbol('B')];
    provider.set(a, 101);
    provider.set(b, 202);
    const s = await start({ STREAM_RECONNECT_MARGIN_SECONDS: '0' }, provider);
    const first = await open(`/api/stream?symbols=${a},${b}`);
    const initial = await first.waitForEvents(2);
    const lastId = initial.at(-1)!.id!;
    first.close();
    await waitFor(() => s.streams.size === 0);

    const quiet = await open(`/api/stream?symbols=${a},${b}`, { 'Last-Event-ID': lastId });
    expect(quiet.status).toBe(200);
    await waitFor(() => quiet.retry !== undefined);
    expect(quiet.events).toEqual([]);
    quiet.close();

    await change(s, provider, b, 250);
    const resumed = await open(`/api/stream?symbols=${a},${b}`, { 'Last-Event-ID': lastId });
    await resumed.waitForEvents(1);
    expect(resumed.quotes()).toEqual([expect.objectContaining({ symbol: b, price: 250 })]);
    expect(Number(resumed.events[0]!.id)).toBeGreaterThan(Number(lastId));

    // Without Last-Event-ID a client starts from scratch: both symbols.
    const fresh = await open(`/api/stream?symbols=${a},${b}`);
    await fresh.waitForEvents(2);
    expect(new Map(fresh.quotes().map((q) => [q.symbol, q.price]))).toEqual(new Map([[a, 101], [b, 250]]));
  });

  it('stream: when STREAM_HEARTBEAT_SECONDS passes, then a comment line arrives', async () => {
    const provider = new ControlledProvider();
    const a = uniqueSymbol('A');
    provider.set(a, 101);
    await start({ STREAM_HEARTBEAT_SECONDS: '1' }, provider);
    const stream = await open(`/api/stream?symbols=${a}`);
    await waitFor(() => stream.comments.length > 0, { timeoutMs: 5000, message: 'a keep-alive comment' });
    expect(stream.comments[0]).toBe('keep-alive');
  });

  it('stream: when nobody reads the quote but a subscriber waits, then the refresher loads it ahead of expiry and the change arrives', async () => {
    const provider = new ControlledProvider();
    const a = uniqueSymbol('A');
    provider.set(a, 101);
    await start({ CACHE_TTL_SECONDS: '1', STREAM_REFRESH_SECONDS: '1' }, provider);
    const stream = await open(`/api/stream?symbols=${a}`);
    await stream.waitForEvents(1);
    provider.set(a, 99.25);
    await stream.waitForEvents(2, 10_000);
    expect(stream2Prices(stream)).toEqual([101, 99.25]);
  });

  it('stream: when CORS_ORIGINS allows the page origin, then the stream carries Access-Control-Allow-Origin', async () => {
    const provider = new ControlledProvider();
    const a = uniqueSymbol('A');
    provider.set(a, 101);
    await start({ CORS_ORIGINS: 'https://app.example.com' }, provider);
    const stream = await open(`/api/stream?symbols=${a}`, { Origin: 'https://app.example.com' });
    expect(stream.status).toBe(200);
    expect(stream.headers['access-control-allow-origin']).toBe('https://app.example.com');
  });

  it('stream: when the service closes, then every stream ends at once and its request line is logged', async () => {
    const provider = new ControlledProvider();
    const a = uniqueSymbol('A');
    provider.set(a, 101);
    const s = await start({}, provider);
    const stream = await open(`/api/stream?symbols=${a}`, { 'X-Request-Id': 'stream-close-1' });
    await stream.waitForEvents(1);
    expect(s.logs.some((l) => l.reqId === 'stream-close-1' && l.msg === 'request completed')).toBe(false);

    const started = Date.now();
    await s.close();
    svc = undefined;
    // Without ending the streams first, the drain would wait out its 10 s grace period.
    expect(Date.now() - started).toBeLessThan(5000);
    await waitFor(() => stream.ended, { timeoutMs: 1000, message: 'the client saw its stream end' });
    const line = s.logs.find((l) => l.reqId === 'stream-close-1' && (l.res as { statusCode?: number } | undefined)?.statusCode === 200);
    expect(line).toBeDefined();
  });
});

function stream2Prices(stream: TestStream): number[] {
  return stream.quotes().map((q) => q.price);
}
