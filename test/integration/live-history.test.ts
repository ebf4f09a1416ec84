/**
 * Live bars as history (DESIGN 26), over HTTP on a real service and SQLite file: final bars are
 * written through the service's `LiveBarSink`, the service is restarted on the same file, and
 * `/api/history` serves them beyond the upstream's reach (provider `live:yahoo`), lists the session
 * minutes without a bar as missing, builds 5-minute bars from them, and, inside the upstream's reach,
 * answers with the upstream's own bars (Yahoo replayed from a recorded 1m exchange whose bars are the
 * test's) and records where a live bar diverges from them. The tests share one SQLite file and run in
 * order: the later ones read what the first stored.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LiveBar } from '../../src/domain/live-bar.js';
import { tradingSessions } from '../../src/domain/market-calendar.js';
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';

const FIXTURES = resolve(import.meta.dirname, '..', 'fixtures', 'yahoo');
const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/**
 * The service's clock, pinned for the run; the provider router reads the real one, a few seconds
 * later (its reach has a day of margin). The sessions are New York's, from the calendar, around it.
 */
const NOW = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS;
const SESSIONS = tradingSessions('US', NOW - 120 * DAY_MS, NOW).map((s) => ({ openMs: s.segments[0]!.startMs, closeMs: s.segments[s.segments.length - 1]!.endMs }));
/** Yahoo's 1m bars begin 7 days back (its plan's reach). */
const ONE_MINUTE_REACH = NOW - 7 * DAY_MS;
/** A session beyond Yahoo's 60 days of 5m bars. */
const OLD_INDEX = SESSIONS.findLastIndex((s) => s.closeMs < NOW - 70 * DAY_MS);
const OLD_OPEN = SESSIONS[OLD_INDEX]!.openMs;
/** The session before it, of which no live bar is stored. */
const OLDER_OPEN = SESSIONS[OLD_INDEX - 1]!.openMs;
/** The last session that closed within Yahoo's 7 days of 1m bars. */
const RECENT_OPEN = SESSIONS.findLast((s) => s.closeMs < NOW - 60 * MINUTE_MS && s.openMs > ONE_MINUTE_REACH)!.openMs;
/** The close of the last session before Yahoo's 1m reach begins, and the first minute of the reach the next session trades. */
const EDGE_CLOSE = SESSIONS.findLast((s) => s.closeMs <= ONE_MINUTE_REACH)!.closeMs;
const EDGE_NEXT = SESSIONS.find((s) => s.closeMs > ONE_MINUTE_REACH)!;
const EDGE_NEXT_OPEN = Math.max(EDGE_NEXT.openMs, Math.ceil(ONE_MINUTE_REACH / MINUTE_MS) * MINUTE_MS);

interface HistoryBody {
  success: boolean;
  source: string;
  from_stream?: boolean;
  data: {
    candles: Array<{ time: string; open: number; high: number; low: number; close: number; adj_close: number | null; volume: number | null; from_stream?: boolean }>;
    partial?: boolean;
    missing?: Array<{ start: string; end: string; reason?: string }>;
    sources?: Record<string, number>;
  };
}

interface Issue {
  symbol: string;
  interval: string;
  time: string;
  rule: string;
  providers: string[];
  closes?: { stored: { provider: string; close: number }; others: Array<{ provider: string; close: number }> };
}

/** A final live bar of AAPL at `timeMs`, its prices around `base`. */
function liveBar(timeMs: number, base: number): LiveBar {
  return { symbol: 'AAPL', interval: '1m', timeMs, open: base, high: base + 0.5, low: base - 0.25, close: base + 0.25, volume: 1000 + (timeMs / MINUTE_MS) % 100, final: true, revised: false, session: 'regular', upstream: 'yahoo' };
}

const iso = (ms: number) => new Date(ms).toISOString();

/** A fixtures folder: the recorded AAPL quote, and the recorded 1m exchange carrying `bars` instead of its empty weekend. */
function fixturesWith(bars: readonly LiveBar[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'mds-live-fixtures-'));
  copyFileSync(join(FIXTURES, 'yahoo-chart-AAPL-200.json'), join(dir, 'yahoo-chart-AAPL-200.json'));
  copyFileSync(join(FIXTURES, 'yahoo-chart-404.json'), join(dir, 'yahoo-chart-404.json'));
  const exchange = JSON.parse(readFileSync(join(FIXTURES, 'recorded', 'yahoo-chart-AAPL-1m-weekend-empty.json'), 'utf8')) as {
    request: { path: string };
    response: { body: { chart: { result: Array<Record<string, unknown>> } } };
  };
  const result = exchange.response.body.chart.result[0]!;
  result.timestamp = bars.map((b) => b.timeMs / 1000);
  result.indicators = {
    quote: [{ open: bars.map((b) => b.open), high: bars.map((b) => b.high), low: bars.map((b) => b.low), close: bars.map((b) => b.close), volume: bars.map((b) => b.volume) }],
  };
  mkdirSync(join(dir, 'recorded'));
  writeFileSync(join(dir, 'recorded', 'aapl-1m.json'), JSON.stringify(exchange));
  return dir;
}

describe('live bars as history', () => {
  /** The upstream's own 1m bars of the recent session's first ten minutes. */
  const upstreamBars = Array.from({ length: 10 }, (_, i) => liveBar(RECENT_OPEN + i * MINUTE_MS, 230 + i));
  /** The upstream's own bars of the first minutes after the edge of its reach. */
  const edgeUpstream = Array.from({ length: 5 }, (_, i) => liveBar(EDGE_NEXT_OPEN + i * MINUTE_MS, 220 + i));
  const fixtures = fixturesWith([...edgeUpstream, ...upstreamBars]);
  const dir = mkdtempSync(join(tmpdir(), 'mds-live-history-'));
  let upstream: FakeUpstream;
  let svc: TestService | undefined;

  beforeAll(async () => {
    upstream = await startFakeUpstream({ fixturesDir: fixtures });
  });
  afterEach(async () => {
    await svc?.close();
    svc = undefined;
  });
  afterAll(async () => {
    await upstream?.close();
    rmSync(fixtures, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (env: Record<string, string> = {}) => {
    svc = await startTestService({ MARKET_DATA_PROVIDER: 'yahoo', MARKET_DATA_BASE_URL: upstream.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0', ...env }, { init: true, dir, now: () => NOW });
    return svc;
  };
  const history = async (query: string) => {
    const res = await svc!.fetch(`/api/history/AAPL?${query}`);
    return { status: res.status, body: (await res.json()) as HistoryBody };
  };
  const oneMinuteRequests = () => upstream.requestLog.filter((r) => r.url.startsWith('/v8/finance/chart/AAPL') && r.url.includes('interval=1m'));

  // The old session's first ten minutes, with no bar in the sixth (the socket was down).
  const oldBars = Array.from({ length: 10 }, (_, i) => liveBar(OLD_OPEN + i * MINUTE_MS, 200 + i)).filter((b) => b.timeMs !== OLD_OPEN + 5 * MINUTE_MS);

  it('when live bars were stored and the service restarted, then a 1m window beyond the upstream\'s reach answers them as live:yahoo, the minute without a bar listed missing', async () => {
    await (await start()).liveBars.storeFinal([...oldBars, { ...liveBar(OLD_OPEN + 20 * MINUTE_MS, 1), final: false }]);
    await svc!.close();
    svc = undefined;
    await start();
    const asked = oneMinuteRequests().length;

    const res = await history(`interval=1m&start=${iso(OLD_OPEN)}&end=${iso(OLD_OPEN + 10 * MINUTE_MS)}`);

    expect(res.status).toBe(200);
    expect(res.body.source).toBe('live:yahoo');
    expect(res.body.from_stream).toBe(true);
    expect(res.body.data.candles).toEqual(
      oldBars.map((b) => ({ time: iso(b.timeMs), open: b.open, high: b.high, low: b.low, close: b.close, adj_close: null, volume: b.volume, from_stream: true })),
    );
    expect(res.body.data.partial).toBe(true);
    expect(res.body.data.missing).toEqual([{ start: iso(OLD_OPEN + 5 * MINUTE_MS), end: iso(OLD_OPEN + 6 * MINUTE_MS), reason: 'no_stream_data' }]);
    // Beyond its reach, the upstream is not asked.
    expect(oneMinuteRequests().length).toBe(asked);
    // The bar not yet final was not stored: its minute is missing, not invented.
    const later = await history(`interval=1m&start=${iso(OLD_OPEN + 9 * MINUTE_MS)}&end=${iso(OLD_OPEN + 22 * MINUTE_MS)}`);
    expect(later.status).toBe(200);
    expect(later.body.data.candles.map((c) => c.time)).toEqual([iso(OLD_OPEN + 9 * MINUTE_MS)]);
    expect(later.body.data.missing).toEqual([{ start: iso(OLD_OPEN + 10 * MINUTE_MS), end: iso(OLD_OPEN + 22 * MINUTE_MS), reason: 'no_stream_data' }]);
  });

  it('when 5m bars are asked over stored live minutes, then they are built from them (open first, close last, high max, low min, volume sum), the absent minute listed', async () => {
    await start();

    const res = await history(`interval=5m&start=${iso(OLD_OPEN)}&end=${iso(OLD_OPEN + 10 * MINUTE_MS)}`);

    expect(res.status).toBe(200);
    const build = (bars: readonly LiveBar[]) => ({
      time: iso(bars[0]!.timeMs),
      open: bars[0]!.open,
      high: Math.max(...bars.map((b) => b.high)),
      low: Math.min(...bars.map((b) => b.low)),
      close: bars[bars.length - 1]!.close,
      adj_close: null,
      volume: bars.reduce((sum, b) => sum + b.volume!, 0),
      from_stream: true,
    });
    expect(res.body.data.candles).toEqual([build(oldBars.slice(0, 5)), { ...build(oldBars.slice(5)), time: iso(OLD_OPEN + 5 * MINUTE_MS) }]);
    expect(res.body.source).toBe('live:yahoo');
    expect(res.body.data.missing).toEqual([{ start: iso(OLD_OPEN + 5 * MINUTE_MS), end: iso(OLD_OPEN + 6 * MINUTE_MS), reason: 'no_stream_data' }]);
  });

  it('when a window beyond the upstream\'s reach holds no live bar, then it still answers 422', async () => {
    await start();

    const res = await history(`interval=1m&start=${iso(OLDER_OPEN)}&end=${iso(OLDER_OPEN + 10 * MINUTE_MS)}`);

    expect(res.status).toBe(422);
  });

  it('when the upstream has its own bars for minutes with live bars, then its bars answer and each live bar that diverges is recorded, whichever came first', async () => {
    await start();
    // Live bars of the recent session: the same as the upstream's but 13:33's close 2 % off.
    const live = upstreamBars.map((b, i) => (i === 3 ? { ...b, close: b.close * 1.02 } : b));
    await svc!.liveBars.storeFinal(live);

    const res = await history(`interval=1m&start=${iso(RECENT_OPEN)}&end=${iso(RECENT_OPEN + 10 * MINUTE_MS)}`);

    expect(res.status).toBe(200);
    expect(res.body.source).toBe('yahoo');
    expect(res.body.from_stream).toBeUndefined();
    expect(res.body.data.candles.map((c) => c.close)).toEqual(upstreamBars.map((b) => b.close));
    expect(oneMinuteRequests().length).toBeGreaterThan(0);

    // A live bar arriving after the upstream's own is compared, not stored over it.
    await svc!.liveBars.storeFinal([{ ...upstreamBars[7]!, close: upstreamBars[7]!.close * 0.97, revised: true }]);
    const token = await svc!.login(ADMIN.username, ADMIN.password);
    const issues = (await (await svc!.fetch('/api/admin/data-issues?symbol=AAPL', { headers: { authorization: `Bearer ${token}` } })).json()) as { data: Issue[] };
    const divergent = issues.data.filter((i) => i.rule === 'divergent' && i.interval === '1m').sort((a, b) => a.time.localeCompare(b.time));
    expect(divergent.map((i) => ({ time: i.time, providers: i.providers, closes: i.closes }))).toEqual([
      { time: iso(RECENT_OPEN + 3 * MINUTE_MS), providers: ['yahoo', 'live:yahoo'], closes: { stored: { provider: 'yahoo', close: upstreamBars[3]!.close }, others: [{ provider: 'live:yahoo', close: live[3]!.close }] } },
      { time: iso(RECENT_OPEN + 7 * MINUTE_MS), providers: ['yahoo', 'live:yahoo'], closes: { stored: { provider: 'yahoo', close: upstreamBars[7]!.close }, others: [{ provider: 'live:yahoo', close: upstreamBars[7]!.close * 0.97 }] } },
    ]);
    await svc!.fetch('/api/admin/cache', { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
    const again = await history(`interval=1m&start=${iso(RECENT_OPEN)}&end=${iso(RECENT_OPEN + 10 * MINUTE_MS)}`);
    expect(again.body.data.candles.map((c) => c.close)).toEqual(upstreamBars.map((b) => b.close));
  });

  it('when a window straddles the edge of the upstream\'s reach, then live bars answer before it and the upstream\'s after, each live candle marked and both counted', async () => {
    await start();
    const edgeLive = Array.from({ length: 5 }, (_, i) => liveBar(EDGE_CLOSE - (5 - i) * MINUTE_MS, 210 + i));
    await svc!.liveBars.storeFinal(edgeLive);

    const res = await history(`interval=1m&start=${iso(EDGE_CLOSE - 5 * MINUTE_MS)}&end=${iso(EDGE_NEXT_OPEN + 5 * MINUTE_MS)}`);

    expect(res.status).toBe(200);
    expect(res.body.source).toBe('yahoo');
    expect(res.body.from_stream).toBeUndefined();
    expect(res.body.data.sources).toEqual({ yahoo: 5, 'live:yahoo': 5 });
    expect(res.body.data.candles.map((c) => [c.time, c.close, c.from_stream ?? false])).toEqual([
      ...edgeLive.map((b) => [iso(b.timeMs), b.close, true]),
      ...edgeUpstream.map((b) => [iso(b.timeMs), b.close, false]),
    ]);
    // Minutes of the next session before the reach begins have neither.
    const before = EDGE_NEXT_OPEN > EDGE_NEXT.openMs ? [{ start: iso(EDGE_NEXT.openMs), end: iso(EDGE_NEXT_OPEN), reason: 'no_stream_data' }] : undefined;
    expect(res.body.data.missing).toEqual(before);
  });

  it('when HISTORY_KEEP_1M is shorter than the live bars are old, then retention drops them with the other 1m bars and the window answers 422 again; younger ones stay', async () => {
    await start({ HISTORY_KEEP_1M: '30d' });

    await svc!.runJob('history-retention');

    expect((await history(`interval=1m&start=${iso(OLD_OPEN)}&end=${iso(OLD_OPEN + 10 * MINUTE_MS)}`)).status).toBe(422);
    const edge = await history(`interval=1m&start=${iso(EDGE_CLOSE - 5 * MINUTE_MS)}&end=${iso(EDGE_CLOSE)}`);
    expect(edge.status).toBe(200);
    expect(edge.body.data.candles).toHaveLength(5);
    expect(edge.body.source).toBe('live:yahoo');
  });
});
