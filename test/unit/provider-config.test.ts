import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/domain/errors.js';
import { assetClassOf, cryptoPairOf, fxPairOf, marketOfSymbol, usTickerOf } from '../../src/domain/provider-symbols.js';
import { KeyPool, nextUtcMidnight } from '../../src/infra/market/key-pool.js';

const noFile = { readFile: false } as const;

/** The one-line message loading fails with, or '' when it loads. */
function failure(env: Record<string, string>): string {
  try {
    loadConfig(env, noFile);
    return '';
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
}

describe('configuration of the provider chain', () => {
  it('when nothing is set, then the chain is simulated alone and every provider has its public host and free-tier limits', () => {
    const c = loadConfig({}, noFile);
    expect(c.market.providers).toEqual(['simulated']);
    expect(c.market.provider).toBe('simulated');
    expect(c.market.providerSettings.alpha_vantage).toEqual({ apiKeys: [], baseUrl: 'https://www.alphavantage.co', maxRps: 1, dailyLimit: 25, timeoutMs: 5000, plan: { name: 'free', historyDays: null, intradayDays: 9500 } });
    expect(c.market.providerSettings.polygon).toMatchObject({ baseUrl: 'https://api.polygon.io', maxRps: 5 / 60, dailyLimit: 0, plan: { name: 'basic', historyDays: 730, intradayDays: 730 } });
    expect(c.market.providerSettings.ecb.baseUrl).toBe('https://www.ecb.europa.eu');
    // Yahoo keeps its existing variables as defaults.
    expect(c.market.providerSettings.yahoo).toEqual({ apiKeys: [], baseUrl: 'https://query1.finance.yahoo.com', maxRps: 5, dailyLimit: 0, timeoutMs: 5000 });
  });

  it('when MARKET_DATA_PROVIDERS lists providers with keys, then the order is kept, the first is the single provider, and each pool is split on commas', () => {
    const c = loadConfig({ MARKET_DATA_PROVIDERS: ' Polygon, tiingo ,yahoo', POLYGON_API_KEYS: 'p1, p2,,', TIINGO_API_KEYS: 't1', TIINGO_TIMEOUT_MS: '1500', POLYGON_BASE_URL: 'http://127.0.0.1:9999/', POLYGON_MAX_RPS: '0.5', TIINGO_DAILY_LIMIT: '0' }, noFile);
    expect(c.market.providers).toEqual(['polygon', 'tiingo', 'yahoo']);
    expect(c.market.provider).toBe('polygon');
    expect(c.market.providerSettings.polygon).toEqual({ apiKeys: ['p1', 'p2'], baseUrl: 'http://127.0.0.1:9999', maxRps: 0.5, dailyLimit: 0, timeoutMs: 5000, plan: { name: 'basic', historyDays: 730, intradayDays: 730 } });
    expect(c.market.providerSettings.tiingo).toMatchObject({ apiKeys: ['t1'], timeoutMs: 1500, dailyLimit: 0 });
  });

  it('when <P>_PLAN names a paid tier, then its reach, rate and daily limit are the defaults, and <P>_HISTORY_DAYS, <P>_INTRADAY_DAYS, <P>_MAX_RPS and <P>_DAILY_LIMIT override them', () => {
    const developer = loadConfig({ POLYGON_PLAN: 'developer', ALPHA_VANTAGE_PLAN: 'premium', TIINGO_PLAN: 'power', FMP_PLAN: 'ultimate' }, noFile).market.providerSettings;
    expect(developer.polygon).toMatchObject({ maxRps: 0, dailyLimit: 0, plan: { name: 'developer', historyDays: 3652, intradayDays: 3652 } });
    expect(developer.alpha_vantage).toMatchObject({ maxRps: 75 / 60, dailyLimit: 0, plan: { name: 'premium' } });
    expect(developer.tiingo).toMatchObject({ maxRps: 5000 / 3600, dailyLimit: 0, plan: { name: 'power', intradayDays: 30 } });
    expect(developer.fmp).toMatchObject({ maxRps: 50, dailyLimit: 0, plan: { name: 'ultimate' } });
    const overridden = loadConfig({ POLYGON_HISTORY_DAYS: '3650', POLYGON_INTRADAY_DAYS: '30', POLYGON_MAX_RPS: '2', FMP_DAILY_LIMIT: '10' }, noFile).market.providerSettings;
    expect(overridden.polygon).toMatchObject({ maxRps: 2, plan: { name: 'basic', historyDays: 3650, intradayDays: 30 } });
    expect(overridden.fmp).toMatchObject({ dailyLimit: 10, plan: { name: 'basic' } });
    // Providers without plans have none, and no plan variables.
    expect(overridden.yahoo.plan).toBeUndefined();
    expect(overridden.ecb.plan).toBeUndefined();
  });

  it('when <P>_PLAN names a tier the provider does not publish, or BACKGROUND_BUDGET_SHARE is out of 0..1, then startup stops naming the variable and the tiers', () => {
    expect(() => loadConfig({ POLYGON_PLAN: 'gold' }, noFile)).toThrow(/POLYGON_PLAN="gold": must be one of basic, starter, developer, advanced/);
    expect(() => loadConfig({ POLYGON_HISTORY_DAYS: '0' }, noFile)).toThrow(/POLYGON_HISTORY_DAYS/);
    expect(() => loadConfig({ BACKGROUND_BUDGET_SHARE: '1.5' }, noFile)).toThrow(/BACKGROUND_BUDGET_SHARE/);
    expect(loadConfig({}, noFile).market.backgroundShare).toBe(0.5);
    expect(loadConfig({ BACKGROUND_BUDGET_SHARE: '0.2' }, noFile).market.backgroundShare).toBe(0.2);
  });

  it('when only MARKET_DATA_PROVIDER names one provider, then it is the chain (the one-provider form)', () => {
    const c = loadConfig({ MARKET_DATA_PROVIDER: 'yahoo' }, noFile);
    expect(c.market.providers).toEqual(['yahoo']);
    expect(c.market.provider).toBe('yahoo');
    expect(loadConfig({ MARKET_DATA_PROVIDER: 'ecb' }, noFile).market.providers).toEqual(['ecb']);
  });

  it('when a keyed provider is listed without a key, then startup stops with one line naming <P>_API_KEYS', () => {
    const message = failure({ MARKET_DATA_PROVIDERS: 'alpha_vantage,yahoo' });
    expect(message).toMatch(/^Invalid configuration: ALPHA_VANTAGE_API_KEYS must hold at least one key/);
    expect(message).not.toContain('\n');
    expect(failure({ MARKET_DATA_PROVIDER: 'fmp' })).toMatch(/FMP_API_KEYS/);
    // Keyless providers need none; a keyed provider that is not listed needs none either.
    expect(failure({ MARKET_DATA_PROVIDERS: 'ecb,yahoo,simulated' })).toBe('');
  });

  it('when a name is unknown or repeated, then startup stops naming MARKET_DATA_PROVIDERS and the name', () => {
    expect(failure({ MARKET_DATA_PROVIDERS: 'polygon,bloomberg', POLYGON_API_KEYS: 'k' })).toMatch(/MARKET_DATA_PROVIDERS="polygon,bloomberg": unknown provider 'bloomberg'/);
    expect(failure({ MARKET_DATA_PROVIDERS: 'yahoo,ecb,yahoo' })).toMatch(/MARKET_DATA_PROVIDERS="yahoo,ecb,yahoo": 'yahoo' is listed twice/);
    expect(failure({ MARKET_DATA_PROVIDERS: 'yahoo,,ecb' })).toMatch(/MARKET_DATA_PROVIDERS=.*empty name/);
  });

  it('when <P>_DAILY_LIMIT is -1, a base URL is not http(s), or a timeout is out of range, then startup stops naming the variable', () => {
    expect(failure({ ALPHA_VANTAGE_DAILY_LIMIT: '-1' })).toMatch(/ALPHA_VANTAGE_DAILY_LIMIT="-1": must be at least 0/);
    expect(failure({ TIINGO_BASE_URL: 'ftp://api.tiingo.com' })).toMatch(/TIINGO_BASE_URL="ftp:\/\/api.tiingo.com": must be an http\(s\) URL/);
    expect(failure({ ECB_BASE_URL: 'not a url' })).toMatch(/ECB_BASE_URL=/);
    expect(failure({ FMP_TIMEOUT_MS: '5' })).toMatch(/FMP_TIMEOUT_MS="5": must be at least 100/);
    expect(failure({ POLYGON_MAX_RPS: 'fast' })).toMatch(/POLYGON_MAX_RPS="fast": must be a number/);
  });

  it('when a key pool variable is wrong elsewhere, then the error never quotes the keys', () => {
    const message = failure({ POLYGON_API_KEYS: 'secret-key-1', POLYGON_DAILY_LIMIT: '-1', MARKET_DATA_PROVIDERS: 'polygon,nope' });
    expect(message).toMatch(/POLYGON_DAILY_LIMIT/);
    expect(message).not.toContain('secret-key-1');
  });
});

describe('Yahoo-style symbols read by their spelling', () => {
  it('when a symbol is read, then its asset class, pair and market follow Yahoo\'s conventions', () => {
    expect(['^GSPC', 'EURUSD=X', 'JPY=X', 'BTC-USD', 'BRK-B', 'AAPL', 'VOD.L'].map(assetClassOf)).toEqual(['index', 'fx', 'fx', 'crypto', 'equity', 'equity', 'equity']);
    expect(fxPairOf('USDJPY=X')).toEqual({ base: 'USD', quote: 'JPY' });
    expect(fxPairOf('JPY=X')).toEqual({ base: 'USD', quote: 'JPY' });
    expect(cryptoPairOf('ETH-EUR')).toEqual({ base: 'ETH', quote: 'EUR' });
    expect(cryptoPairOf('BRK-B')).toBeUndefined();
    expect(usTickerOf('BRK-B')).toEqual({ base: 'BRK', shareClass: 'B' });
    expect(usTickerOf('VOD.L')).toBeUndefined();
    expect(['AAPL', '^FTSE', '^NDX', 'VOD.L', '7203.T', 'BTC-USD', 'EURUSD=X'].map(marketOfSymbol)).toEqual(['US', 'UK', 'US', 'UK', 'JP', 'CRYPTO', 'FX']);
  });
});

describe('key pool', () => {
  it('when keys are taken, then they come in turn, a key set aside is skipped, and status shows only the last four characters', () => {
    let now = Date.parse('2026-11-25T10:00:00Z');
    const pool = new KeyPool(['aaaa-1111', 'bbbb-2222', 'cccc-3333'], () => now);
    expect([pool.takeNow()?.index, pool.takeNow()?.index, pool.takeNow()?.index, pool.takeNow()?.index]).toEqual([0, 1, 2, 0]);
    pool.setAside(1, 'unauthorized');
    expect([pool.takeNow()?.index, pool.takeNow()?.index]).toEqual([2, 0]);
    expect(pool.status()).toEqual([
      { index: 0, lastFour: '1111', state: 'active', usedToday: 3 },
      { index: 1, lastFour: '2222', state: 'set_aside', reason: 'unauthorized', usedToday: 1 },
      { index: 2, lastFour: '3333', state: 'active', usedToday: 2 },
    ]);
    expect(JSON.stringify(pool.status())).not.toContain('aaaa');
    expect(pool.exhaustedReason()).toBeUndefined();

    // A daily limit sets a key aside until the next UTC midnight, then it comes back with its count reset.
    pool.setAside(0, 'limit_reached', nextUtcMidnight(now));
    pool.setAside(2, 'limit_reached', nextUtcMidnight(now));
    expect(pool.takeNow()).toBeUndefined();
    expect(pool.exhaustedReason()).toBe('limit_reached');
    now = Date.parse('2026-11-26T00:00:01Z');
    expect(pool.takeNow()?.index).toBe(2);
    expect(pool.status()[2]).toEqual({ index: 2, lastFour: '3333', state: 'active', usedToday: 1 });
    expect(pool.status()[0]).toEqual({ index: 0, lastFour: '1111', state: 'active', usedToday: 0 });
    expect(pool.status()[1]?.state).toBe('set_aside');
  });

  it('when the pool is empty (a keyless provider), then no key is handed out', async () => {
    const pool = new KeyPool([]);
    expect(pool.size).toBe(0);
    expect(await pool.take()).toBeUndefined();
    expect(pool.status()).toEqual([]);
  });
});
