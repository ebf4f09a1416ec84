import { describe, expect, it } from 'vitest';
import { parseDocument } from 'yaml';
import { contractFromYaml, loadContract, withSecurityPolicy } from '../../src/http/contract.js';
import { SYMBOL_PATTERN } from '../../src/domain/symbols.js';
import { argumentsProblem, generateTools, mayCall, requestOf, snakeCase } from '../../src/http/mcp/tools.js';
import { answerText, HISTORY_TEXT_ROWS } from '../../src/http/mcp/text.js';

const contract = loadContract();

describe('mcp tools from the contract', () => {
  it('when an operationId is camelCase, then its tool name is snake_case', () => {
    expect(['getQuote', 'listMarketSessions', 'searchSymbols', 'getAdminStatus'].map(snakeCase)).toEqual(['get_quote', 'list_market_sessions', 'search_symbols', 'get_admin_status']);
  });

  it('when the contract gains a read operation, then a tool is made for it with no code written for it', () => {
    const doc = parseDocument(contract.yaml);
    doc.setIn(
      ['paths', '/api/indicators/{symbol}'],
      doc.createNode({
        get: {
          operationId: 'getIndicators',
          summary: 'Get indicators',
          description: 'Studies over the stored candles. The rest of the reference, for people, which a model need not read at every start.',
          tags: ['Market data'],
          security: [{}, { apiKeyAuth: [] }],
          parameters: [{ $ref: '#/components/parameters/Symbol' }, { name: 'studies', in: 'query', required: true, description: 'The studies.', schema: { type: 'string', maxLength: 200 } }],
          responses: { '200': { description: 'The studies.', content: { 'application/json': { schema: { type: 'object', properties: { data: { type: 'object' } } } } } } },
        },
      }),
    );
    const tools = generateTools(contractFromYaml(doc.toString()));
    const tool = tools.find((t) => t.name === 'get_indicators');
    expect(tool).toMatchObject({
      operationId: 'getIndicators',
      description: 'Get indicators. Studies over the stored candles.',
      audience: 'anyone',
      inputSchema: { type: 'object', required: ['symbol', 'studies'], additionalProperties: false },
    });
    expect(tool!.inputSchema.properties.symbol).toMatchObject({ pattern: SYMBOL_PATTERN, maxLength: 32 });
  });

  it('when the stream and the writes are looked at, then they are no tools: only reads that answer JSON are', () => {
    const names = generateTools(contract).map((t) => t.name);
    expect(names).not.toContain('stream_quotes');
    expect(names).not.toContain('create_user');
    expect(names).not.toContain('flush_cache');
    expect(names).not.toContain('get_health');
  });

  it('when a tool is listed, then it carries no output schema: the answers are the contract\'s, and their schemas would triple the list', () => {
    for (const tool of generateTools(contract)) expect(Object.keys(tool), tool.name).not.toContain('outputSchema');
  });

  it('when an argument is not one of its enum, then the problem names the parameter as REST does and lists the allowed values', () => {
    const history = generateTools(contract).find((t) => t.name === 'get_history')!;
    expect(argumentsProblem(history, { symbol: 'AAPL', range: 'last month' })).toBe('query.range must be equal to one of the allowed values (1d, 5d, 1mo, 3mo, 6mo, 1y, 2y, 5y, 10y, ytd, max)');
    expect(argumentsProblem(history, { symbol: 'AAPL', range: '1y', interval: '1d' })).toBeUndefined();
    expect(argumentsProblem(history, { symbol: 'AA PL' })).toMatch(/^path\.symbol must match pattern "/);
  });

  it('when DATA_REQUIRES_AUTH closes the data, then market tools need credentials and admin tools an administrator', () => {
    const open = generateTools(contract);
    const closed = generateTools(withSecurityPolicy(contract, { dataRequiresAuth: true }));
    expect(open.find((t) => t.name === 'get_quote')!.audience).toBe('anyone');
    expect(closed.find((t) => t.name === 'get_quote')!.audience).toBe('authenticated');
    const usage = open.find((t) => t.name === 'get_usage')!;
    expect([mayCall(usage, undefined), mayCall(usage, { isAdmin: false }), mayCall(usage, { isAdmin: true })]).toEqual([false, false, true]);
  });

  it('when a call has arguments, then they are encoded into the path and query; a missing path parameter is named; unknown ones go to the contract to refuse', () => {
    const tools = generateTools(contract);
    const history = tools.find((t) => t.name === 'get_history')!;
    expect(requestOf(history, { symbol: '^GSPC', interval: '1d', range: '1y' })).toEqual({ path: '/api/history/%5EGSPC?interval=1d&range=1y' });
    expect(requestOf(history, { symbol: '../admin/users' })).toEqual({ path: '/api/history/..%2Fadmin%2Fusers' });
    expect(requestOf(history, { range: '1y' })).toEqual({ missing: ['symbol'] });
    expect(requestOf(tools.find((t) => t.name === 'get_quotes')!, { symbols: 'AAPL,MSFT', extra: 1 })).toEqual({ path: '/api/quotes?symbols=AAPL%2CMSFT&extra=1' });
  });
});

describe('mcp text', () => {
  it('when a history has more candles than the text shows, then it shows the last ones and says how many there are and where the rest is', () => {
    const candles = Array.from({ length: HISTORY_TEXT_ROWS + 20 }, (_, i) => ({ time: `2026-01-01T00:00:${String(i).padStart(3, '0')}Z`, open: 1, high: 2, low: 0.5, close: 1.5, adj_close: 1.5, volume: i }));
    const text = answerText({ success: true, data: { symbol: 'AAPL', interval: '1d', currency: 'USD', candles } }, 'mds://history/AAPL/1d?range=1y');
    expect(text).toContain(`${HISTORY_TEXT_ROWS + 20} in all`);
    expect(text).toContain(`Showing the last ${HISTORY_TEXT_ROWS}`);
    expect(text).toContain('mds://history/AAPL/1d?range=1y');
    expect(text.split('\n').filter((l) => l.startsWith('2026-'))).toHaveLength(HISTORY_TEXT_ROWS);
  });

  it('when an indicators answer is read, then the text is a table of the last bars like history, a column per series named as the exports, numbers rounded', () => {
    const count = HISTORY_TEXT_ROWS + 20;
    const times = Array.from({ length: count }, (_, i) => new Date(Date.UTC(2026, 0, 1 + i)).toISOString());
    const series = (value: (i: number) => number | null) => Array.from({ length: count }, (_, i) => value(i));
    const data = {
      symbol: 'AAPL',
      interval: '1d',
      times,
      studies: {
        'macd:12:26:9': { macd: series(() => 0.00123456789), signal: series(() => -1.23456789), histogram: series(() => 2) },
        'rsi:14': series((i) => (i === count - 1 ? null : 55.5)),
        'sma:20': series(() => 238.96300000000002),
      },
    };
    const text = answerText({ success: true, data, source: 'simulated', updated_at: '2026-11-29T00:00:00.000Z' });
    const lines = text.split('\n');
    expect(lines[0]).toBe(`AAPL 1d indicators (times UTC): ${count} bars, ${times[0]} to ${times.at(-1)}.`);
    expect(lines[1]).toBe(`Showing the last ${HISTORY_TEXT_ROWS}. All ${count} are in the structured content (data.times, data.studies).`);
    expect(lines[2]).toBe('time macd_12_26_9_macd macd_12_26_9_signal macd_12_26_9_histogram rsi_14 sma_20');
    const rows = lines.filter((l) => l.startsWith('2026-'));
    expect(rows).toHaveLength(HISTORY_TEXT_ROWS);
    expect(rows[0]).toBe(`${times[20]} 0.001235 -1.2346 2 55.5 238.963`);
    expect(rows.at(-1)).toBe(`${times.at(-1)} 0.001235 -1.2346 2 - 238.963`);
    expect(text).not.toContain('238.96300000000002');
  });
});
