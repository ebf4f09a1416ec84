/**
 * Every action priced (DESIGN 24; issue 46 item 3): a request's points are computed from its shape
 * before any work (`x-mds-cost` in the contract, src/domain/prices.ts), `RateLimit` counts points, and a
 * caller who cannot pay gets 429 with nothing computed.
 */
import { describe, expect, it } from 'vitest';
import { priceOf } from '../../src/domain/prices.js';
import { servicesOnOwnRedis } from '../helpers/own-redis.js';

const ADMIN_KEY = 'prices-test-admin-key-0123456789abcdef';
const { start } = servicesOnOwnRedis({ API_KEYS: ADMIN_KEY, MARKET_DATA_PROVIDER: 'simulated' });

/** The points left that a `RateLimit` header says. */
function remaining(res: Response): number {
  const match = /;r=(\d+);/.exec(res.headers.get('ratelimit') ?? '');
  if (match === null) throw new Error(`no RateLimit header: ${res.headers.get('ratelimit')}`);
  return Number(match[1]);
}

const DAY_MS = 86_400_000;
/** Ten ADX studies of long periods over three days of 1-minute bars: the dearest indicator request found. */
function worstIndicators(): { path: string; input: Record<string, string> } {
  const end = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - DAY_MS);
  const start = new Date(end.getTime() - 3 * DAY_MS);
  const input = { symbol: 'BTC-USD', interval: '1m', start: start.toISOString(), end: end.toISOString(), studies: Array.from({ length: 10 }, (_, i) => `adx:${500 - i}`).join(',') };
  const query = new URLSearchParams({ interval: input.interval, start: input.start, end: input.end, studies: input.studies });
  return { path: `/api/indicators/BTC-USD?${query.toString()}`, input };
}

describe('prices', () => {
  it('when the contract is served, then every operation names its price rule', async () => {
    const svc = await start();
    const document = (await (await svc.fetch('/openapi.json')).json()) as { paths: Record<string, Record<string, { operationId?: string; 'x-mds-cost'?: string }>> };
    const rules = Object.values(document.paths).flatMap((item) => Object.values(item).filter((op) => op.operationId !== undefined).map((op) => [op.operationId, op['x-mds-cost']]));
    expect(rules.length).toBeGreaterThan(20);
    for (const [operationId, rule] of rules) expect(['fixed', 'symbols', 'bars', 'studies'], String(operationId)).toContain(rule);
    expect(Object.fromEntries(rules)).toMatchObject({ getQuotes: 'symbols', getHistory: 'bars', getIndicators: 'studies', getQuote: 'fixed' });
  });

  it('when quotes of 25 symbols are asked, then 3 points are charged, and a single quote 1', async () => {
    const svc = await start({ RATE_LIMIT_ANONYMOUS_PER_MINUTE: '100' });
    const symbols = ['AAPL', ...Array.from({ length: 24 }, (_, i) => `SYM${i}`)].join(',');
    const first = await svc.fetch('/api/quotes/AAPL');
    expect(first.status).toBe(200);
    expect(remaining(first)).toBe(99);
    const many = await svc.fetch(`/api/quotes?symbols=${symbols}`);
    expect(many.status).toBe(200);
    expect(remaining(many)).toBe(96);
  });

  it('when the dearest indicator request is made, then it costs what its shape says (at least 40 points), charged before the work', async () => {
    const svc = await start({ RATE_LIMIT_ANONYMOUS_PER_MINUTE: '1000' });
    const { path, input } = worstIndicators();
    const points = priceOf('studies', input);
    expect(points, 'ten ADX studies of period ~500 over 4,320 one-minute bars and their warm-up').toBeGreaterThanOrEqual(40);
    const before = await svc.fetch('/api/markets');
    const answer = await svc.fetch(path);
    expect(answer.status).toBe(200);
    expect(remaining(before) - remaining(answer)).toBe(points);
  }, 60_000);

  it('when a caller cannot pay for a request, then it gets 429 with Retry-After and nothing is computed', async () => {
    const svc = await start({ RATE_LIMIT_ANONYMOUS_PER_MINUTE: '30' });
    const { path } = worstIndicators();
    const { data: statusBefore } = (await (await svc.fetch('/api/admin/status', { headers: { 'X-API-Key': ADMIN_KEY } })).json()) as { data: { cache: { misses: number } } };
    const refused = await svc.fetch(path);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await refused.json()).toMatchObject({ success: false, code: 429 });
    const { data: statusAfter } = (await (await svc.fetch('/api/admin/status', { headers: { 'X-API-Key': ADMIN_KEY } })).json()) as { data: { cache: { misses: number } } };
    expect(statusAfter.cache.misses, 'no history or indicator was loaded for the refused request').toBe(statusBefore.cache.misses);
  });
});
