import { describe, expect, it } from 'vitest';
import { listedMarketOfSymbol, marketOfSymbol } from '../../src/domain/provider-symbols.js';

describe("a symbol's market, by the symbol rule", () => {
  it('when a symbol names its market by its spelling, then that market comes back, with no quote or time zone asked', () => {
    expect(listedMarketOfSymbol('AAPL')).toBe('US');
    expect(listedMarketOfSymbol('brk-b')).toBe('US');
    expect(listedMarketOfSymbol('^GSPC')).toBe('US');
    expect(listedMarketOfSymbol('^N225')).toBe('JP');
    expect(listedMarketOfSymbol('VOD.L')).toBe('UK');
    expect(listedMarketOfSymbol('SAP.DE')).toBe('DE');
    expect(listedMarketOfSymbol('BTC-USD')).toBe('CRYPTO');
    expect(listedMarketOfSymbol('EURUSD=X')).toBe('FX');
  });

  it('when the exchange suffix is not one this codebase lists, then no market is claimed, while the providers still spell it as a US one', () => {
    expect(listedMarketOfSymbol('BHP.AX')).toBeUndefined();
    expect(marketOfSymbol('BHP.AX')).toBe('US');
  });
});
