/**
 * Live bars (DESIGN 26) end to end on one instance with its own redis-server: a local replay of
 * Yahoo's streamer sends frames made from the recorded BTC-USD capture (times moved into the running
 * minute); a WebSocket client (`"bars":"1m"`) and an SSE client (`bars=1m`) receive `bar` events, the
 * final bar equals the reference built from the same ticks and arrives within 1 s of the minute's end
 * plus the grace, and a late tick sends the bar again with `revised: true`.
 *
 * The interval stays one real minute: the test starts its ticks in a minute with enough of it left,
 * and waits for that minute to end (at most about 70 s).
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { btcReplay, frameOf, referenceBars, type ReplayTick } from '../helpers/bar-replay.js';
import { schemaViolations } from '../helpers/contract-schema.js';
import { ControlledProvider } from '../helpers/controlled-provider.js';
import { startFakeYahooStreamer, type FakeYahooStreamer } from '../helpers/fake-push-upstream.js';
import { startRedis, type RedisProcess } from '../helpers/redis-server.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { openStream, type TestStream } from '../helpers/sse.js';
import { openWs, type TestWs, type WsEvent } from '../helpers/ws-client.js';
import { waitFor } from '../helpers/wait-for.js';

const MINUTE = 60_000;
const GRACE_MS = 500;

let redis: RedisProcess;
let yahoo: FakeYahooStreamer;
let svc: TestService;
const provider = new ControlledProvider();
const closers: Array<() => unknown> = [];

beforeAll(async () => {
  redis = await startRedis();
  yahoo = await startFakeYahooStreamer();
  closers.push(() => yahoo.close());
  svc = await startTestService(
    { CACHE_URL: `${redis.url}/0`, STREAM_UPSTREAMS: 'yahoo', YAHOO_STREAM_URL: yahoo.url, STREAM_REFRESH_SECONDS: '0', STREAM_MAX_PER_ADDRESS: '0', LIVE_BAR_GRACE_MS: String(GRACE_MS) },
    { provider, pushReconnectMs: 50 },
  );
  closers.push(() => svc.close());
});

afterAll(async () => {
  for (const close of closers.reverse()) await close();
  await redis?.stop();
});

/** A crypto pair nobody else uses: bars are built every minute of every day. */
function cryptoSymbol(): string {
  return `B${randomBytes(3).toString('hex').toUpperCase()}-USD`;
}

/** The start of a minute with at least `leftMs` of it still to come, once it has begun. */
async function aMinuteWithTimeLeft(leftMs: number): Promise<number> {
  const now = Date.now();
  const minute = Math.floor(now / MINUTE) * MINUTE;
  if (minute + MINUTE - now >= leftMs) return minute;
  await waitFor(() => Date.now() >= minute + MINUTE, { timeoutMs: MINUTE, intervalMs: 20, message: 'the next minute' });
  return minute + MINUTE;
}

type Bar = { symbol: string; interval: string; time: string; open: number; high: number; low: number; close: number; volume: number | null; final: boolean; revised: boolean; session: string };

function wsBars(ws: TestWs): Array<{ bar: Bar; at: number }> {
  return ws.events.flatMap((e, i) => (e.event === 'bar' ? [{ bar: e.data as unknown as Bar, at: ws.arrivals[i]! }] : []));
}

function sseBars(sse: TestStream): Bar[] {
  return sse.events.filter((e) => e.event === 'bar').map((e) => JSON.parse(e.data) as Bar);
}

const ohlcv = (b: Bar) => ({ time: b.time, open: b.open, high: b.high, low: b.low, close: b.close, volume: b.volume });

describe("live bars from Yahoo's streamer", () => {
  it('when frames of one minute are pushed, then WS and SSE clients get open bars, then the final bar (equal to the reference) within 1 s of the minute end plus grace, and a late tick revises it', async () => {
    const symbol = cryptoSymbol();
    provider.set(symbol, 94_000);
    const ws = await openWs(`${svc.url.replace(/^http/, 'ws')}/api/ws`);
    closers.push(() => ws.close());
    ws.send({ action: 'subscribe', symbols: [symbol], bars: '1m' });
    await ws.waitFor((e: WsEvent) => e.event === 'subscribed', 'subscribed');
    const sse = await openStream(`${svc.url}/api/stream?symbols=${symbol}&bars=1m`);
    closers.push(() => sse.close());
    expect(sse.status).toBe(200);
    await yahoo.waitForSubscribed(symbol);

    const minute = await aMinuteWithTimeLeft(8000);
    // Ticks in the running minute, stamped as the streamer would (market time = now), the last one at least a second before its end.
    const ticks: ReplayTick[] = btcReplay([minute], 12).map((t) => ({ ...t, symbol, timeMs: Math.min(Date.now() + 1, minute + MINUTE - 1000) }));
    for (const [i, tick] of ticks.entries()) {
      tick.timeMs = Math.min(Date.now() + i, minute + MINUTE - 1000 + i);
      expect(yahoo.push(frameOf(tick))).toBe(1);
    }
    const reference = referenceBars(ticks);
    expect(reference).toHaveLength(1);

    // The open bar comes while the minute runs.
    const open = await ws.waitFor((e) => e.event === 'bar' && (e.data as unknown as Bar).final === false, 'an open bar');
    expect(open.data).toMatchObject({ symbol, interval: '1m', time: new Date(minute).toISOString(), final: false, revised: false, session: 'regular' });

    const final = await ws.waitFor((e) => e.event === 'bar' && (e.data as unknown as Bar).final === true, 'the final bar', MINUTE + 5000);
    const finalAt = wsBars(ws).find((b) => b.bar.final)!.at;
    const due = minute + MINUTE + GRACE_MS;
    const wallAt = Date.now() - (performance.now() - finalAt);
    expect(ohlcv(final.data as unknown as Bar)).toEqual(reference[0]);
    expect(final.data).toMatchObject({ symbol, interval: '1m', final: true, revised: false, session: 'regular' });
    expect(wallAt).toBeGreaterThanOrEqual(due - 50);
    expect(wallAt).toBeLessThanOrEqual(due + 1000);
    console.log(`final bar after the minute end plus grace: ${(wallAt - due).toFixed(0)} ms`);

    // The same bar over SSE.
    await waitFor(() => sseBars(sse).some((b) => b.final), { timeoutMs: 5000, message: 'the final bar over SSE' });
    expect(ohlcv(sseBars(sse).find((b) => b.final)!)).toEqual(reference[0]);
    expect(sseBars(sse).filter((b) => !b.final).length).toBeGreaterThanOrEqual(1);

    // A late tick of that minute: the bar again, revised.
    const late: ReplayTick = { symbol, price: 99_000, timeMs: minute + MINUTE - 500, dayVolume: ticks[ticks.length - 1]!.dayVolume + 777 };
    expect(yahoo.push(frameOf(late))).toBe(1);
    const revised = await ws.waitFor((e) => e.event === 'bar' && (e.data as unknown as Bar).revised === true, 'the revised bar', 5000);
    expect(ohlcv(revised.data as unknown as Bar)).toEqual(referenceBars([...ticks, late])[0]);
    expect(revised.data).toMatchObject({ final: true, revised: true });
    await waitFor(() => sseBars(sse).some((b) => b.revised), { timeoutMs: 5000, message: 'the revised bar over SSE' });

    // Every bar sent, over both doors, is a LiveBar of openapi.yaml.
    for (const bar of [...wsBars(ws).map((b) => b.bar), ...sseBars(sse)]) expect(schemaViolations('LiveBar', bar)).toEqual([]);

    // One final bar per minute, no bar for a minute without ticks.
    expect(wsBars(ws).filter((b) => b.bar.final && !b.bar.revised).map((b) => b.bar.time)).toEqual([new Date(minute).toISOString()]);
    expect(new Set(wsBars(ws).map((b) => b.bar.time))).toEqual(new Set([new Date(minute).toISOString()]));
  }, 90_000);

  it('when a subscribe asks for bars of another interval, then it is refused (422) and nothing is followed', async () => {
    const ws = await openWs(`${svc.url.replace(/^http/, 'ws')}/api/ws`);
    closers.push(() => ws.close());
    ws.send({ action: 'subscribe', symbols: ['AAPL'], bars: '5m' });
    const refused = await ws.waitFor((e) => e.event === 'error', 'the refusal');
    expect(refused).toMatchObject({ code: 422 });
    const res = await svc.fetch('/api/stream?symbols=AAPL&bars=5m');
    expect(res.status).toBe(422);
  });
});
