import { describe, expect, it } from 'vitest';
import { DataSourceError } from '../../src/domain/errors.js';
import { createMarketDataProvider } from '../../src/infra/market/index.js';
import { CircuitOpenError, ResilientMarketDataProvider } from '../../src/infra/market/resilient-market-data-provider.js';
import { UpstreamGuard } from '../../src/infra/market/upstream-guard.js';
import { RedisSharedCounters } from '../../src/infra/counters/redis-shared-counters.js';
import { createLogger } from '../../src/infra/logger.js';
import { UpstreamBusyError } from '../../src/infra/market/upstream-guard-errors.js';
import type { MarketDataProvider, Quote } from '../../src/domain/ports/market-data.js';
import type { UpstreamOutcome } from '../../src/domain/ports/metrics.js';

function captureLogger() {
  const lines: Array<{ level: number; msg: string; provider?: string }> = [];
  const logger = createLogger({ level: 'info', name: 'test' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
  return { logger, lines };
}

/** A provider whose behaviour the test scripts: the port, not fetch, is what is replaced here. */
function scripted(getQuote: () => Promise<Quote | undefined>, extra: { local?: boolean } = {}): MarketDataProvider & { local?: boolean } {
  return {
    name: 'scripted',
    getQuote,
    getHistory: () => Promise.resolve(undefined),
    search: () => Promise.resolve([]),
    ...extra,
  };
}

describe('ResilientMarketDataProvider', () => {
  it('when the provider never settles, gives up after timeoutMs plus the margin with DataSourceError', async () => {
    const provider = new ResilientMarketDataProvider(scripted(() => new Promise<Quote | undefined>(() => {})), { timeoutMs: 100, timeoutMarginMs: 50 });
    const start = performance.now();

    const error = await provider.getQuote('X').catch((e: unknown) => e);

    expect(error).toBeInstanceOf(DataSourceError);
    expect((error as Error).message).toMatch(/did not answer within 150 ms/);
    expect(performance.now() - start).toBeLessThan(600);
    expect(provider.health()).toMatchObject({ healthy: false, last_error: expect.stringMatching(/150 ms/) });
    provider.close();
  });

  it('when the provider breaks its contract and throws something else, still rejects with DataSourceError', async () => {
    const provider = new ResilientMarketDataProvider(scripted(() => Promise.reject(new TypeError('boom'))), { timeoutMs: 100 });
    const error = await provider.getQuote('X').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataSourceError);
    expect((error as Error).message).toMatch(/boom/);
    provider.close();
  });

  it('a provider that declares itself local is healthy before its first call; after a failure it is not, until a success', async () => {
    let fail = false;
    const provider = new ResilientMarketDataProvider(
      scripted(() => (fail ? Promise.reject(new DataSourceError('down')) : Promise.resolve(undefined)), { local: true }),
      { timeoutMs: 100, volumeThreshold: 100 },
    );
    expect(provider.health()).toEqual({ provider: 'scripted', healthy: true, last_success_at: null, last_error: null });

    fail = true;
    await expect(provider.getQuote('X')).rejects.toThrow('down');
    expect(provider.health()).toMatchObject({ healthy: false, last_error: 'down' });

    fail = false;
    await provider.getQuote('X');
    expect(provider.health()).toMatchObject({ healthy: true, last_error: null, last_success_at: expect.any(String) });
    provider.close();
  });

  it('when the upstream guard refuses calls, then the provider is not asked, the breaker stays closed and health is unchanged', async () => {
    let asked = 0;
    const provider = new ResilientMarketDataProvider(
      scripted(() => {
        asked += 1;
        return Promise.resolve(undefined);
      }, { local: true }),
      { timeoutMs: 100, volumeThreshold: 2, guard: { run: () => Promise.reject(new UpstreamBusyError('busy', 3)) } },
    );
    for (let i = 0; i < 6; i++) {
      const error = await provider.getQuote('X').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UpstreamBusyError);
      expect((error as DataSourceError).retryAfterSeconds).toBe(3);
    }
    expect(asked).toBe(0);
    expect(provider.state).toBe('closed');
    expect(provider.health()).toEqual({ provider: 'scripted', healthy: true, last_success_at: null, last_error: null });
    provider.close();
  });

  it('when every upstream slot is held by a failing call, then the refusals of the calls behind them do not dilute the failures: the breaker opens', async () => {
    // One slot, refused at once when taken (a chain's guard); the upstream fails after 20 ms.
    const guard = new UpstreamGuard({ name: 'scripted', maxRps: 0, maxConcurrency: 1, maxWaitMs: 250, refuseWhenFull: true, counters: new RedisSharedCounters() });
    let asked = 0;
    const provider = new ResilientMarketDataProvider(
      scripted(() => {
        asked += 1;
        return new Promise((_, reject) => setTimeout(() => reject(new DataSourceError('upstream failed')), 20));
      }),
      { timeoutMs: 100, volumeThreshold: 3, guard },
    );
    // Three waves of four calls at once: one reaches the upstream and fails, three are refused.
    for (let wave = 0; wave < 3; wave++) {
      const outcomes = await Promise.all(Array.from({ length: 4 }, () => provider.getQuote('X').catch((e: unknown) => e)));
      expect(outcomes.filter((e) => e instanceof UpstreamBusyError)).toHaveLength(3);
    }
    // 3 failures in 3 calls the breaker saw (counting the 9 refusals as successes, it saw 3 in 12: 25 %, closed).
    expect(asked).toBe(3);
    expect(provider.state).toBe('open');
    // Open: the next call fails fast without taking the guard's slot or asking the upstream.
    const error = await provider.getQuote('X').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CircuitOpenError);
    expect(guard.load).toEqual({ queued: 0, active: 0 });
    expect(asked).toBe(3);
    provider.close();
  });

  it('when the provider answers "unknown" (undefined), then that is a success', async () => {
    const provider = new ResilientMarketDataProvider(scripted(() => Promise.resolve(undefined)), { timeoutMs: 100, volumeThreshold: 1 });
    await expect(provider.getQuote('NOPE')).resolves.toBeUndefined();
    expect(provider.state).toBe('closed');
    expect(provider.health()).toMatchObject({ healthy: true, last_error: null, last_success_at: expect.any(String) });
    provider.close();
  });

  it('after close, calls reject with DataSourceError', async () => {
    const provider = new ResilientMarketDataProvider(scripted(() => Promise.resolve(undefined)), { timeoutMs: 100 });
    provider.close();
    await expect(provider.getQuote('X')).rejects.toBeInstanceOf(DataSourceError);
  });
});

describe('createMarketDataProvider', () => {
  const market = { baseUrl: 'http://127.0.0.1:9', timeoutMs: 1000 };

  it('when the provider is simulated, then it logs that the data is demo data and how to switch, and is healthy at once', async () => {
    const { logger, lines } = captureLogger();
    const provider = createMarketDataProvider({ ...market, provider: 'simulated' }, logger);

    expect(provider.name).toBe('simulated');
    expect(provider.health().healthy).toBe(true);
    const notice = lines.find((l) => /SIMULATED/.test(l.msg));
    expect(notice?.msg).toMatch(/demo data/);
    expect(notice?.msg).toMatch(/MARKET_DATA_PROVIDER=yahoo/);
    provider.close();
  });

  it('when the provider is yahoo, then it builds a remote provider that is not healthy before it has answered', () => {
    const { logger, lines } = captureLogger();
    const provider = createMarketDataProvider({ ...market, provider: 'yahoo', upstreamMaxRps: 7, upstreamMaxConcurrency: 2 }, logger);

    expect(provider.name).toBe('yahoo');
    expect(provider.health()).toEqual({ provider: 'yahoo', healthy: false, last_success_at: null, last_error: null });
    expect(lines.find((l) => /Yahoo Finance/.test(l.msg))).toMatchObject({ maxRps: 7, maxConcurrency: 2, sharedBudget: false });
    provider.close();
  });

  it('when calls succeed, fail, time out and meet the open breaker, then each is measured with its outcome', async () => {
    const measured: Array<{ outcome: UpstreamOutcome; seconds: number }> = [];
    const metrics = { upstreamRequest: (outcome: UpstreamOutcome, seconds: number) => void measured.push({ outcome, seconds }) };
    let behaviour: 'ok' | 'fail' | 'hang' = 'ok';
    const provider = new ResilientMarketDataProvider(
      scripted(() => (behaviour === 'ok' ? Promise.resolve(undefined) : behaviour === 'fail' ? Promise.reject(new DataSourceError('down')) : new Promise<Quote | undefined>(() => {}))),
      { timeoutMs: 50, timeoutMarginMs: 0, volumeThreshold: 3, errorThresholdPercentage: 50, metrics },
    );
    await provider.getQuote('X');
    behaviour = 'fail';
    await provider.getQuote('X').catch(() => undefined);
    behaviour = 'hang';
    await provider.getQuote('X').catch(() => undefined);
    expect(provider.state).toBe('open');
    await provider.getQuote('X').catch(() => undefined);

    expect(measured.map((m) => m.outcome)).toEqual(['success', 'failure', 'timeout', 'rejected']);
    expect(measured[2]!.seconds).toBeGreaterThanOrEqual(0.04);
    expect(measured.every((m) => m.seconds >= 0 && m.seconds < 5)).toBe(true);
    provider.close();
  });
});
