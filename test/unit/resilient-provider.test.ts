import { describe, expect, it } from 'vitest';
import { DataSourceError } from '../../src/errors.js';
import { createMarketDataProvider } from '../../src/infra/market/index.js';
import { ResilientMarketDataProvider } from '../../src/infra/market/resilient-market-data-provider.js';
import { createLogger } from '../../src/logger.js';
import type { MarketDataProvider, Quote, UpstreamOutcome } from '../../src/ports.js';

function captureLogger() {
  const lines: Array<{ level: number; msg: string; provider?: string }> = [];
  const logger = createLogger({ level: 'info', name: 'test' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
  return { logger, lines };
}

/** A provider whose behaviour the test scripts: the port, not fetch, is what is replaced here. */
function scripted(getIndices: () => Promise<Quote[]>, extra: { local?: boolean } = {}): MarketDataProvider & { local?: boolean } {
  return { name: 'scripted', getIndices, ...extra };
}

describe('ResilientMarketDataProvider', () => {
  it('when the provider never settles, gives up after timeoutMs plus the margin with DataSourceError', async () => {
    const provider = new ResilientMarketDataProvider(scripted(() => new Promise<Quote[]>(() => {})), { timeoutMs: 100, timeoutMarginMs: 50 });
    const start = performance.now();

    const error = await provider.getIndices().catch((e: unknown) => e);

    expect(error).toBeInstanceOf(DataSourceError);
    expect((error as Error).message).toMatch(/did not answer within 150 ms/);
    expect(performance.now() - start).toBeLessThan(600);
    expect(provider.health()).toMatchObject({ healthy: false, last_error: expect.stringMatching(/150 ms/) });
    provider.close();
  });

  it('when the provider breaks its contract and throws something else, still rejects with DataSourceError', async () => {
    const provider = new ResilientMarketDataProvider(scripted(() => Promise.reject(new TypeError('boom'))), { timeoutMs: 100 });
    const error = await provider.getIndices().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataSourceError);
    expect((error as Error).message).toMatch(/boom/);
    provider.close();
  });

  it('a provider that declares itself local is healthy before its first call; after a failure it is not, until a success', async () => {
    let fail = false;
    const provider = new ResilientMarketDataProvider(
      scripted(() => (fail ? Promise.reject(new DataSourceError('down')) : Promise.resolve([])), { local: true }),
      { timeoutMs: 100, volumeThreshold: 100 },
    );
    expect(provider.health()).toEqual({ provider: 'scripted', healthy: true, last_success_at: null, last_error: null });

    fail = true;
    await expect(provider.getIndices()).rejects.toThrow('down');
    expect(provider.health()).toMatchObject({ healthy: false, last_error: 'down' });

    fail = false;
    await provider.getIndices();
    expect(provider.health()).toMatchObject({ healthy: true, last_error: null, last_success_at: expect.any(String) });
    provider.close();
  });

  it('after close, calls reject with DataSourceError', async () => {
    const provider = new ResilientMarketDataProvider(scripted(() => Promise.resolve([])), { timeoutMs: 100 });
    provider.close();
    await expect(provider.getIndices()).rejects.toBeInstanceOf(DataSourceError);
  });
});

describe('createMarketDataProvider', () => {
  const market = { baseUrl: 'http://127.0.0.1:9', symbols: ['^GSPC', '^N225'], timeoutMs: 1000 };

  it('for simulated, logs that the data is demo data and how to switch, and serves the configured symbols', async () => {
    const { logger, lines } = captureLogger();
    const provider = createMarketDataProvider({ ...market, provider: 'simulated' }, logger);

    expect(provider.name).toBe('simulated');
    expect(provider.health().healthy).toBe(true);
    expect((await provider.getIndices()).map((q) => q.symbol)).toEqual(['^GSPC', '^N225']);
    const notice = lines.find((l) => /SIMULATED/.test(l.msg));
    expect(notice?.msg).toMatch(/demo data/);
    expect(notice?.msg).toMatch(/MARKET_DATA_PROVIDER=yahoo/);
    provider.close();
  });

  it('for yahoo, builds a remote provider that is not healthy before it has answered', () => {
    const { logger, lines } = captureLogger();
    const provider = createMarketDataProvider({ ...market, provider: 'yahoo' }, logger);

    expect(provider.name).toBe('yahoo');
    expect(provider.health()).toEqual({ provider: 'yahoo', healthy: false, last_success_at: null, last_error: null });
    expect(lines.some((l) => /Yahoo Finance/.test(l.msg))).toBe(true);
    provider.close();
  });

  it('when calls succeed, fail, time out and meet the open breaker, then each is measured with its outcome', async () => {
    const measured: Array<{ outcome: UpstreamOutcome; seconds: number }> = [];
    const metrics = { upstreamRequest: (outcome: UpstreamOutcome, seconds: number) => void measured.push({ outcome, seconds }) };
    let behaviour: 'ok' | 'fail' | 'hang' = 'ok';
    const provider = new ResilientMarketDataProvider(
      scripted(() => (behaviour === 'ok' ? Promise.resolve([]) : behaviour === 'fail' ? Promise.reject(new DataSourceError('down')) : new Promise<Quote[]>(() => {}))),
      { timeoutMs: 50, timeoutMarginMs: 0, volumeThreshold: 3, errorThresholdPercentage: 50, metrics },
    );
    await provider.getIndices();
    behaviour = 'fail';
    await provider.getIndices().catch(() => undefined);
    behaviour = 'hang';
    await provider.getIndices().catch(() => undefined);
    expect(provider.state).toBe('open');
    await provider.getIndices().catch(() => undefined);

    expect(measured.map((m) => m.outcome)).toEqual(['success', 'failure', 'timeout', 'rejected']);
    expect(measured[2]!.seconds).toBeGreaterThanOrEqual(0.04);
    expect(measured.every((m) => m.seconds >= 0 && m.seconds < 5)).toBe(true);
    provider.close();
  });
});
