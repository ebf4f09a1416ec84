/**
 * The one symbol rule: it must say what the contract says (every symbol pattern of openapi.yaml), and
 * every reader (requests, MARKET_INDICES) goes through it with the same messages.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { InvalidRequestError } from '../../src/domain/errors.js';
import { canonicalSymbol, isSymbol, MAX_SYMBOL_LENGTH, MAX_SYMBOLS, parseSymbolList, SYMBOL_CHARS, SYMBOL_LIST_PATTERN, SYMBOL_PATTERN } from '../../src/domain/symbols.js';
import { loadContract } from '../../src/http/contract.js';

type Schema = { pattern?: string; maxLength?: number };

/** Every schema of `node` (at any depth) whose pattern is about symbols, with where it is. */
function symbolSchemas(node: unknown, at = '#'): Array<{ at: string; schema: Schema }> {
  if (typeof node !== 'object' || node === null) return [];
  const found: Array<{ at: string; schema: Schema }> = [];
  const pattern = (node as Schema).pattern;
  if (typeof pattern === 'string' && pattern.includes('A-Za-z0-9^.=-')) found.push({ at, schema: node as Schema });
  for (const [key, value] of Object.entries(node)) found.push(...symbolSchemas(value, `${at}/${key}`));
  return found;
}

const violation = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidRequestError && err.violations[0] !== undefined) return err.violations[0];
  }
  throw new Error('expected an InvalidRequestError');
};

describe('the symbol rule and the contract', () => {
  const document = loadContract().document as { components: { parameters: { Symbol: { schema: Schema } } } };

  it('when the contract names one symbol, then its pattern and length are the rule', () => {
    expect(document.components.parameters.Symbol.schema.pattern).toBe(SYMBOL_PATTERN);
    expect(document.components.parameters.Symbol.schema.maxLength).toBe(MAX_SYMBOL_LENGTH);
  });

  it('when any schema of the contract takes symbols, then it is the rule: one symbol, a list of 1 to 50, or a quoted symbol of the same characters', () => {
    const schemas = symbolSchemas(document);
    expect(schemas.length).toBeGreaterThanOrEqual(3);
    for (const { at, schema } of schemas) {
      const quoted = schema.pattern === `^${SYMBOL_CHARS.replace(`{0,${MAX_SYMBOL_LENGTH - 1}}`, '*')}$` && schema.maxLength === MAX_SYMBOL_LENGTH;
      expect([SYMBOL_PATTERN, SYMBOL_LIST_PATTERN].includes(schema.pattern!) || quoted, `${at}: ${schema.pattern}`).toBe(true);
    }
  });
});

describe('readers of symbols', () => {
  it('when a symbol is valid in any case, then its canonical form is upper case; else the message names the rule', () => {
    expect(canonicalSymbol('brk-b', 'path.symbol')).toBe('BRK-B');
    expect(isSymbol('^GSPC')).toBe(true);
    expect(isSymbol('a'.repeat(MAX_SYMBOL_LENGTH + 1))).toBe(false);
    expect(violation(() => canonicalSymbol('AA PL', 'path.symbol'))).toEqual({ path: 'path.symbol', message: 'must be 1 to 32 characters of A-Z a-z 0-9 ^ . = - (not starting with a dot)' });
  });

  it('when a list is parsed, then 1 to 50 distinct symbols come back upper-cased, in order, and anything else is refused with its reason', () => {
    expect(parseSymbolList('aapl,MSFT,^gspc', 'query.symbols')).toEqual(['AAPL', 'MSFT', '^GSPC']);
    expect(parseSymbolList(Array.from({ length: MAX_SYMBOLS }, (_, i) => `S${i}`).join(','), 'query.symbols')).toHaveLength(MAX_SYMBOLS);
    expect(violation(() => parseSymbolList('', 'query.symbols'))).toEqual({ path: 'query.symbols', message: 'must list 1 to 50 symbols, comma-separated' });
    expect(violation(() => parseSymbolList(Array.from({ length: MAX_SYMBOLS + 1 }, (_, i) => `S${i}`).join(','), 'query.symbols')).message).toBe('must list 1 to 50 symbols, comma-separated');
    expect(violation(() => parseSymbolList('AAPL,,MSFT', 'query.symbols')).message).toBe("must list symbols of 1 to 32 characters of A-Z a-z 0-9 ^ . = - (not starting with a dot) (got '')");
    expect(violation(() => parseSymbolList('AAPL,aapl', 'query.symbols')).message).toBe("must not repeat a symbol ('AAPL')");
  });

  it('when MARKET_INDICES lists symbols in any case, then the configuration holds them upper-cased; a bad one fails naming the setting', () => {
    expect(loadConfig({ MARKET_INDICES: 'aapl, ^gspc' }, { readFile: false }).market.symbols).toEqual(['AAPL', '^GSPC']);
    expect(() => loadConfig({ MARKET_INDICES: 'AAPL,not a symbol' }, { readFile: false })).toThrow(/MARKET_INDICES/);
  });
});
