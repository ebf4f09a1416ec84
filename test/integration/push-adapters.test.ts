/**
 * The push adapters and the lease on their own: Yahoo's streamer keeps its subscription alive by
 * saying it again; the fleet's lease gives one socket to one holder and passes it on.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { MemoryCacheStore } from '../../src/infra/cache/memory-cache-store.js';
import { YahooStreamer } from '../../src/infra/stream/yahoo-streamer.js';
import type { PushedPrice } from '../../src/domain/ports/push.js';
import { LiveFeed } from '../../src/services/live-feed.js';
import { startFakeYahooStreamer } from '../helpers/fake-push-upstream.js';
import { waitFor } from '../helpers/wait-for.js';
import { localBroadcast } from '../helpers/local-broadcast.js';

const logger = pino({ level: 'silent' });
const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

describe("Yahoo's streamer adapter", () => {
  it('when connected, then it says its whole subscription again every resubscribe interval, and unsubscribes what is dropped', async () => {
    const yahoo = await startFakeYahooStreamer();
    cleanups.push(() => yahoo.close());
    const adapter = new YahooStreamer({ url: yahoo.url, logger, resubscribeMs: 100 });
    cleanups.push(() => adapter.stop());
    const prices: PushedPrice[] = [];
    adapter.setSymbols(['AAPL', 'MSFT']);
    adapter.start({ price: (p) => prices.push(p), connected: () => undefined });
    await waitFor(() => yahoo.messages.filter((m) => JSON.stringify(m) === '{"subscribe":["AAPL","MSFT"]}').length >= 3, { message: 'three full subscriptions' });
    adapter.setSymbols(['AAPL']);
    await waitFor(() => yahoo.messages.some((m) => JSON.stringify(m) === '{"unsubscribe":["MSFT"]}'), { message: 'the unsubscribe' });
    yahoo.push({ id: 'AAPL', price: 201.5, time: 1_795_000_000_000 });
    await waitFor(() => prices.length === 1, { message: 'the price' });
    expect(prices[0]).toMatchObject({ symbol: 'AAPL', price: 201.5, timeMs: 1_795_000_000_000 });
  });
});

describe('the fleet lease', () => {
  it('when two feeds share a lease store, then one connects; when it closes, the other connects with the union of both symbol sets', async () => {
    const yahoo = await startFakeYahooStreamer();
    cleanups.push(() => yahoo.close());
    const lease = new MemoryCacheStore({ maxEntries: 100 });
    const broadcast = localBroadcast();
    const feed = (symbols: string[]) =>
      new LiveFeed({
        upstreams: [new YahooStreamer({ url: yahoo.url, logger, minReconnectMs: 20 })],
        lease,
        broadcast,
        leaseKey: (u) => `lease:${u}`,
        channel: 'live',
        symbols: () => symbols,
        onPrice: () => undefined,
        logger,
        leaseTtlMs: 400,
        tickMs: 100,
      });
    const a = feed(['AAA']);
    const b = feed(['BBB']);
    cleanups.push(() => a.close(), () => b.close());
    a.start();
    b.start();
    await waitFor(() => yahoo.subscribed().has('AAA') && yahoo.subscribed().has('BBB'), { message: 'the union subscribed' });
    expect(yahoo.open).toBe(1);
    expect([...a.leading(), ...b.leading()]).toEqual(['yahoo']);
    const [leader, other] = a.leading().length === 1 ? [a, b] : [b, a];
    await leader.close();
    await waitFor(() => other.leading().length === 1 && yahoo.open === 1, { message: 'the other feed to take over' });
    const own = other === a ? 'AAA' : 'BBB';
    const gone = other === a ? 'BBB' : 'AAA';
    // The closed feed's symbols are dropped once its announcement is older than a lease.
    await waitFor(() => yahoo.subscribed().has(own) && !yahoo.subscribed().has(gone), { message: 'only the remaining feed\'s symbols subscribed' });
    expect(yahoo.accepted).toBe(2);
  });

  it('when the lease store is not the fleet\'s (Redis away), then a feed connects alone only after the grace, and a holder keeps its socket meanwhile', async () => {
    const yahoo = await startFakeYahooStreamer();
    cleanups.push(() => yahoo.close());
    let shared = false;
    const feed = new LiveFeed({
      upstreams: [new YahooStreamer({ url: yahoo.url, logger, minReconnectMs: 20 })],
      lease: new MemoryCacheStore({ maxEntries: 100 }),
      broadcast: localBroadcast(),
      leaseKey: (u) => `lease:${u}`,
      channel: 'live',
      symbols: () => ['AAA'],
      onPrice: () => undefined,
      logger,
      leaseTtlMs: 400,
      tickMs: 50,
      shared: () => shared,
      localGraceMs: 600,
    });
    cleanups.push(() => feed.close());
    const startedAt = Date.now();
    feed.start();
    await waitFor(() => yahoo.open === 1, { message: 'the feed to connect alone after the grace' });
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(600);
    // The store becomes the fleet's: the lease taken in memory is still this store's, so it is kept.
    shared = true;
    await feed.tick();
    expect(feed.leading()).toEqual(['yahoo']);
    expect(yahoo.accepted).toBe(1);
  });
});
