/**
 * The router's choices without I/O: links here are small in-memory providers (real implementations
 * of the port that answer from a table), so each rule is seen on its own: who is eligible, what moves
 * on, what the caller is told.
 */
import { describe, expect, it } from 'vitest';
import { DataSourceError, ProvidersUnavailableError } from '../../src/domain/errors.js';
import type { AssetClass, ProviderCapabilities, ProviderLink, ProviderSymbol } from '../../src/domain/ports/providers.js';
import type { History, HistoryQuery, Quote, SearchResult } from '../../src/domain/ports/market-data.js';
import { UpstreamFailureError, UpstreamHeldBackError } from '../../src/domain/upstream-failure.js';
import { KeyPool } from '../../src/infra/market/key-pool.js';
import { ProviderRouter } from '../../src/services/provider-router.js';

const NOW = Date.parse('2026-11-25T12:00:00Z');
const DAY_MS = 86_400_000;

type Answer<T> = T | undefined | Error;

/** A provider answering from tables; `calls` records every read put to it. */
class TableLink implements ProviderLink {
  readonly calls: string[] = [];
  readonly budget = { maxRps: 0, dailyLimit: 0 };
  readonly breakerState = 'closed' as const;
  readonly keys: KeyPool;
  quotes = new Map<string, Answer<Quote>>();
  history: Answer<History> = undefined;
  searchAnswer: Answer<SearchResult[]> = [];

  constructor(
    readonly name: string,
    readonly capabilities: ProviderCapabilities,
    readonly classes: AssetClass[] = ['equity'],
    keys: string[] = [],
  ) {
    this.keys = new KeyPool(keys, () => NOW);
  }

  express(symbol: string): ProviderSymbol | undefined {
    return symbol.startsWith('^') ? (this.classes.includes('index') ? { code: symbol, assetClass: 'index' } : undefined) : { code: symbol, assetClass: 'equity' };
  }

  async getQuote(symbol: string): Promise<Quote | undefined> {
    this.calls.push(`quote:${symbol}`);
    return settle(this.quotes.get(symbol));
  }

  async getHistory(query: HistoryQuery): Promise<History | undefined> {
    this.calls.push(`history:${query.symbol}:${query.interval}`);
    return settle(this.history);
  }

  async search(query: string): Promise<SearchResult[]> {
    this.calls.push(`search:${query}`);
    return (await settle(this.searchAnswer)) ?? [];
  }

  health() {
    return { healthy: true, lastSuccessAtMs: null, lastError: null };
  }

  async usage() {
    return { pausedUntilMs: 0, usedToday: 0, keys: this.keys.status() };
  }

  close(): void {}
}

async function settle<T>(answer: Answer<T>): Promise<T | undefined> {
  if (answer instanceof Error) throw answer;
  return answer;
}

const EQUITY_ONLY: ProviderCapabilities = { quote: ['equity'], history: { equity: { '1d': 730 } }, search: [], events: [] };
const EVERYTHING: ProviderCapabilities = { quote: ['equity', 'index'], history: { equity: { '1d': null, '1h': 60 }, index: { '1d': null } }, search: ['equity'], events: [] };

function quote(symbol: string, price: number): Quote {
  return {
    symbol, name: symbol, price, change: 0, change_percent: 0, open: null, high: null, low: null, prev_close: price, volume: null,
    currency: 'USD', timestamp: new Date(NOW).toISOString(), exchange: '', instrument_type: 'equity', timezone: 'America/New_York', market_state: 'open',
  };
}

function history(symbol: string): History {
  return { symbol, currency: 'USD', timezone: 'America/New_York', interval: '1d', candles: [], events: { dividends: [], splits: [] } };
}

function router(...links: TableLink[]): ProviderRouter {
  return new ProviderRouter({ links, now: () => NOW });
}

describe('provider router', () => {
  it('when a provider cannot spell the symbol or does not serve its class, then it is not asked', async () => {
    const first = new TableLink('polygon', EQUITY_ONLY);
    const second = new TableLink('yahoo', EVERYTHING, ['equity', 'index']);
    second.quotes.set('^GSPC', quote('^GSPC', 5000));
    const answer = await router(first, second).getQuote('^GSPC');
    expect(answer).toMatchObject({ price: 5000, source: 'yahoo' });
    expect(first.calls).toEqual([]);
  });

  it('when the window starts before a provider\'s retention or asks an interval it lacks, then the next one serves the history', async () => {
    const first = new TableLink('polygon', EQUITY_ONLY);
    const second = new TableLink('yahoo', EVERYTHING);
    second.history = history('AAPL');
    const r = router(first, second);
    const old = await r.getHistory({ symbol: 'AAPL', interval: '1d', startMs: NOW - 1000 * DAY_MS, endMs: NOW });
    expect(old && r.sourceOf(old)).toBe('yahoo');
    await r.getHistory({ symbol: 'AAPL', interval: '1h', range: '5d' });
    expect(first.calls).toEqual([]);
    first.history = history('AAPL');
    const recent = await r.getHistory({ symbol: 'AAPL', interval: '1d', range: '1y' });
    expect(recent && r.sourceOf(recent)).toBe('polygon');
  });

  it('when a provider says unknown, then the next is asked, and the first is not asked that symbol again', async () => {
    const first = new TableLink('polygon', EQUITY_ONLY);
    const second = new TableLink('fmp', EQUITY_ONLY);
    second.quotes.set('ZZ', quote('ZZ', 1));
    const r = router(first, second);
    expect(await r.getQuote('ZZ')).toMatchObject({ source: 'fmp' });
    expect(await r.getQuote('ZZ')).toMatchObject({ source: 'fmp' });
    expect(first.calls).toEqual(['quote:ZZ']);
  });

  it('when every provider fails, then the error names each with its reason in order and carries the soonest recovery', async () => {
    const first = new TableLink('polygon', EQUITY_ONLY);
    const second = new TableLink('fmp', EQUITY_ONLY);
    first.quotes.set('AAPL', new UpstreamHeldBackError('breaker_open', 'open', 7));
    second.quotes.set('AAPL', new UpstreamFailureError('throttled', 'slow down', { retryAfterSeconds: 3 }));
    const error = await router(first, second).getQuote('AAPL').then(() => undefined, (err: unknown) => err);
    expect(error).toBeInstanceOf(ProvidersUnavailableError);
    expect((error as ProvidersUnavailableError).attempts).toEqual([
      { provider: 'polygon', reason: 'breaker open' },
      { provider: 'fmp', reason: '429' },
    ]);
    expect((error as ProvidersUnavailableError).retryAfterSeconds).toBe(3);
  });

  it('when the chain has one provider, then its own failure is rethrown and quotes carry no source of their own', async () => {
    const only = new TableLink('yahoo', EVERYTHING);
    const failure = new DataSourceError('down', { retryAfterSeconds: 9 });
    only.quotes.set('AAPL', failure);
    only.quotes.set('MSFT', quote('MSFT', 2));
    const r = router(only);
    await expect(r.getQuote('AAPL')).rejects.toBe(failure);
    const msft = await r.getQuote('MSFT');
    expect(msft).not.toHaveProperty('source');
    expect(msft && r.sourceOf(msft)).toBe('yahoo');
    expect(r.name).toBe('yahoo');
  });

  it('when a key is refused, then it is set aside and the same provider is asked again with the next key', async () => {
    const first = new TableLink('polygon', EQUITY_ONLY, ['equity'], ['key-a', 'key-b']);
    let calls = 0;
    first.getQuote = async (symbol: string) => {
      calls += 1;
      const key = first.keys.takeNow();
      if (key?.index === 0) throw new UpstreamFailureError('unauthorized', 'key #0 refused', { keyIndex: 0 });
      return quote(symbol, 3);
    };
    const second = new TableLink('fmp', EQUITY_ONLY);
    expect(await router(first, second).getQuote('AAPL')).toMatchObject({ source: 'polygon' });
    expect(calls).toBe(2);
    expect(first.keys.status().map((k) => k.state)).toEqual(['set_aside', 'active']);
    expect(second.calls).toEqual([]);
  });

  it('when the first search answers an empty list, then that is the answer', async () => {
    const first = new TableLink('yahoo', EVERYTHING);
    const second = new TableLink('fmp', EVERYTHING);
    second.searchAnswer = [{ symbol: 'AAPL', name: 'Apple', exchange: '', instrument_type: 'equity' }];
    const r = router(first, second);
    const results = await r.search('nothing', 5);
    expect(results).toEqual([]);
    expect(r.sourceOf(results)).toBe('yahoo');
    expect(second.calls).toEqual([]);
  });
});
