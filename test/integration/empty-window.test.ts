/**
 * An empty window is not an unknown symbol (issue 33, DESIGN 19): a history window with no session in
 * it (a weekend) of a symbol the store has never held is answered 200 with no candles when the
 * provider knows the symbol, and 404 only when the provider says it does not exist.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ CACHE_URL: 'redis://127.0.0.1:1/0' });
});
afterAll(async () => {
  await svc?.close();
});

describe('a history window without a session', () => {
  it('when a weekend window of a symbol never stored is asked, then 200 with no candles, in the symbol\'s currency and zone', async () => {
    const answer = await svc.fetch('/api/history/MSFT?interval=1d&start=2026-11-21&end=2026-11-22');
    const body = (await answer.json()) as { success: boolean; data: { symbol: string; currency: string; timezone: string; candles: unknown[] } };

    expect(answer.status).toBe(200);
    expect(body.data).toMatchObject({ symbol: 'MSFT', currency: 'USD', timezone: 'America/New_York', candles: [] });
  });

  it('when the same weekend window of a symbol nobody knows is asked, then 404 unknown symbol', async () => {
    const answer = await svc.fetch('/api/history/NOSUCH?interval=1d&start=2026-11-21&end=2026-11-22');
    const body = (await answer.json()) as { success: boolean; code: number; error: string };

    expect(answer.status).toBe(404);
    expect(body).toMatchObject({ success: false, code: 404, error: "Unknown symbol 'NOSUCH'" });
  });
});
