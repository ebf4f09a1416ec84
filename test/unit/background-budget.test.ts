import { describe, expect, it } from 'vitest';
import { inBackground, isBackground } from '../../src/domain/background-work.js';
import type { ProviderLink } from '../../src/domain/ports/providers.js';
import { RedisSharedCounters } from '../../src/infra/counters/redis-shared-counters.js';
import { UpstreamBusyError, UpstreamGuard } from '../../src/infra/market/upstream-guard.js';
import { indexRefreshSchedule } from '../../src/services/background-budget.js';

const DEFAULT_INDICES = ['^GSPC', '^DJI', '^IXIC', '^FTSE', '^GDAXI', '^N225', '^HSI', '000001.SS', '000300.SS', '^STOXX50E'];

/** A link that spells the symbols `spells` accepts, with a budget; nothing else is read by the schedule. */
function link(name: string, budget: { maxRps: number; dailyLimit: number }, spells: (symbol: string) => boolean, keys = 1): ProviderLink {
  return {
    name,
    budget,
    capabilities: { quote: ['index', 'equity'], history: {}, search: [], events: [] },
    keys: { size: keys },
    express: (symbol: string) => (spells(symbol) ? { code: symbol, assetClass: 'index' as const } : undefined),
  } as unknown as ProviderLink;
}

const US_INDICES = new Set(['^GSPC', '^DJI', '^IXIC']);

describe('index refresh schedule on a provider budget', () => {
  it("when the default indices meet Polygon's free plan, then the refresh runs every 90 s (3 calls in half of 5 a minute) and says why", () => {
    const schedule = indexRefreshSchedule([link('polygon', { maxRps: 5 / 60, dailyLimit: 0 }, (s) => US_INDICES.has(s))], DEFAULT_INDICES, 30_000, 0.5);
    expect(schedule.intervalMs).toBe(90_000);
    expect(schedule.reason).toContain('every 90 s instead of every 30 s');
    expect(schedule.reason).toContain("polygon's 5 calls a minute");
  });

  it('when a provider spells none of the indices, or its budget has room, then the configured interval stays and nothing is said', () => {
    expect(indexRefreshSchedule([link('alpha_vantage', { maxRps: 1, dailyLimit: 25 }, () => false)], DEFAULT_INDICES, 30_000, 0.5)).toEqual({ intervalMs: 30_000 });
    expect(indexRefreshSchedule([link('yahoo', { maxRps: 5, dailyLimit: 0 }, () => true)], DEFAULT_INDICES, 30_000, 0.5)).toEqual({ intervalMs: 30_000 });
  });

  it('when a daily limit is the small budget (FMP: 250 a day, 8 indices), then the interval fits half the day: 8 x 86400 / 125 s', () => {
    const schedule = indexRefreshSchedule([link('fmp', { maxRps: 5, dailyLimit: 250 }, (s) => s.startsWith('^'))], DEFAULT_INDICES, 30_000, 0.5);
    expect(schedule.intervalMs).toBe(Math.ceil((8 * 86_400) / 125) * 1000);
    expect(schedule.reason).toContain("fmp's 250 calls a day");
  });

  it('when the first provider of a chain spells an index, then only that provider pays for it', () => {
    const polygon = link('polygon', { maxRps: 5 / 60, dailyLimit: 0 }, (s) => US_INDICES.has(s));
    const yahoo = link('yahoo', { maxRps: 5, dailyLimit: 0 }, () => true);
    // Yahoo takes the 7 others at 5 a second: no lengthening beyond Polygon's 90 s.
    expect(indexRefreshSchedule([polygon, yahoo], DEFAULT_INDICES, 30_000, 0.5).intervalMs).toBe(90_000);
  });
});

describe('upstream guard: background work within its share, callers first', () => {
  // Mid-minute, so the whole case sits in one budget window.
  const now = () => Date.parse('2026-11-26T12:00:20Z');

  it('when background work asks 3 calls of a 5-a-minute budget with a 0.5 share, then 2 run, the third is refused at once, and callers still get the other 3', async () => {
    const guard = new UpstreamGuard({ name: `bg-${Math.random()}`, maxRps: 5 / 60, maxConcurrency: 4, maxWaitMs: 100, counters: new RedisSharedCounters(), backgroundShare: 0.5, now });
    let calls = 0;
    const call = () => guard.run(async () => ++calls);
    const background = await Promise.allSettled([1, 2, 3].map(() => inBackground(call)));
    expect(background.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
    const refused = background.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toBeInstanceOf(UpstreamBusyError);
    expect((refused.reason as UpstreamBusyError).message).toContain('background work used its share');
    expect(calls).toBe(2);
    // Callers: the three calls background work left, then the budget is spent.
    for (let i = 0; i < 3; i++) await expect(call()).resolves.toBeGreaterThan(0);
    await expect(call()).rejects.toBeInstanceOf(UpstreamBusyError);
    expect(calls).toBe(5);
    expect(guard.backgroundBudget).toEqual({ perWindow: 2, windowS: 60, perDay: null });
  });

  it('when a caller waits for a slot, then a background call is refused rather than queued ahead of or behind it', async () => {
    const guard = new UpstreamGuard({ name: `bg-${Math.random()}`, maxRps: 0, maxConcurrency: 1, maxWaitMs: 1000, counters: new RedisSharedCounters(), backgroundShare: 0.5 });
    let release: () => void = () => undefined;
    const first = guard.run(() => new Promise<void>((resolve) => (release = resolve)));
    const waiting = guard.run(async () => 'caller');
    await expect(inBackground(() => guard.run(async () => 'background'))).rejects.toThrow(/callers are waiting/);
    release();
    await first;
    await expect(waiting).resolves.toBe('caller');
  });

  it('when a daily limit is set, then background work gets its share of the day and no more', async () => {
    const guard = new UpstreamGuard({ name: `bg-${Math.random()}`, maxRps: 0, maxConcurrency: 4, maxWaitMs: 100, counters: new RedisSharedCounters(), backgroundShare: 0.5, dailyLimit: 5, now });
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await inBackground(() => guard.run(async () => 'ok')).catch((err: Error) => err.message));
    expect(results.slice(0, 2)).toEqual(['ok', 'ok']);
    expect(results[2]).toContain('share of the daily limit (2)');
  });
});

describe('the background mark', () => {
  it('when two background runs overlap, then the mark holds across awaits in both until each ends, and is gone once the last has ended', async () => {
    let releaseFirst!: () => void;
    const firstWaits = new Promise<void>((r) => (releaseFirst = r));
    const seen: Array<[string, boolean]> = [];
    const first = inBackground(async () => {
      seen.push(['first before', isBackground()]);
      await firstWaits;
      seen.push(['first after the second ended', isBackground()]);
    });
    await inBackground(async () => {
      await Promise.resolve();
      seen.push(['second', isBackground()]);
    });
    seen.push(['caller between', isBackground()]);
    releaseFirst();
    await first;
    seen.push(['caller after', isBackground()]);
    expect(seen).toEqual([
      ['first before', true],
      ['second', true],
      ['caller between', false],
      ['first after the second ended', true],
      ['caller after', false],
    ]);
  });
});
