import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../src/domain/errors.js';
import { columnsOf, MAX_STUDIES, parseStudies, STUDIES } from '../../src/domain/indicators/catalogue.js';

function violations(list: string, intraday = false): string[] {
  try {
    parseStudies(list, intraday);
  } catch (err) {
    if (err instanceof InvalidRequestError) return err.violations.map((v) => `${v.path} ${v.message}`);
    throw err;
  }
  return [];
}

describe('parseStudies', () => {
  it('when studies are spelled differently but mean the same, then they normalise to one sorted list of keys with every default filled in', () => {
    const a = parseStudies('RSI, macd,bbands:20:2.50,sma:20,Sma', false).map((s) => s.key);
    const b = parseStudies('sma,bbands:20:2.5,rsi:14,macd:12:26:9', false).map((s) => s.key);
    expect(a).toEqual(['bbands:20:2.5', 'macd:12:26:9', 'rsi:14', 'sma:20']);
    expect(b).toEqual(a);
    expect(parseStudies('macd:5', false)[0]!.key).toBe('macd:5:26:9');
    expect(parseStudies('stoch:9', false).map((s) => s.key)).toEqual(['stoch:9:3:3']);
  });

  it('when every study is asked with its defaults, then each has a key and export columns named by it', () => {
    const all = parseStudies([...STUDIES.keys()].filter((n) => n !== 'vwap').slice(0, MAX_STUDIES).join(','), false);
    expect(all).toHaveLength(MAX_STUDIES);
    expect(columnsOf(parseStudies('macd', false)[0]!).map((c) => c.column)).toEqual(['macd_12_26_9_macd', 'macd_12_26_9_signal', 'macd_12_26_9_histogram']);
    expect(columnsOf(parseStudies('sma', false)[0]!).map((c) => c.column)).toEqual(['sma_20']);
    expect(parseStudies('vwap', true).map((s) => s.key)).toEqual(['vwap']);
  });

  it('when entries are bad, then one violation per bad entry, each naming it, and nothing past 40 characters of it is echoed', () => {
    expect(violations('sma:0,ema:x,rsi:501,wma:1.5')).toEqual([
      'query.studies study "sma:0": period must be a whole number from 1 to 500',
      'query.studies study "ema:x": period must be a whole number from 1 to 500',
      'query.studies study "rsi:501": period must be a whole number from 1 to 500',
      'query.studies study "wma:1.5": period must be a whole number from 1 to 500',
    ]);
    expect(violations('bbands:20:0.05')).toEqual(['query.studies study "bbands:20:0.05": deviations must be a number from 0.1 to 10']);
    expect(violations(`x${'y'.repeat(100)}`)[0]).toContain(`"x${'y'.repeat(39)}..."`);
    expect(violations('sma,'.repeat(11).slice(0, -1))[0]).toBe('query.studies asks for 11 studies, at most 10 are allowed');
    expect(violations('stoch::5')).toEqual(['query.studies study "stoch::5": k_period is empty']);
    expect(violations('sma:1:2')).toEqual(['query.studies study "sma:1:2": sma takes at most 1 parameter(s) (period)']);
  });
});
