/**
 * The console's currency selector (DESIGN 25) in a real browser: on the symbol page the quote, the chart
 * and its legend follow the chosen currency, and the watchlist shows the same choice in converted
 * prices. The service's clock stands on 2024-07-08, three days after the last recorded ECB rate, so the
 * replayed reference rates cover the chart's window.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEcbUpstream } from '../helpers/ecb-upstream.js';
import type { ReplayUpstream } from '../helpers/replay-upstream.js';
import { startTestService, type TestService } from '../helpers/service.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
declare const document: any;
declare const localStorage: any;

const CHROMIUM = '/usr/bin/chromium';
const NOW = Date.parse('2024-07-08T12:00:00Z');

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)('the console in another currency', () => {
  let ecb: ReplayUpstream;
  let svc: TestService;
  let browser: Browser;

  beforeAll(async () => {
    ecb = await startEcbUpstream();
    svc = await startTestService({ MARKET_DATA_PROVIDER: 'simulated', ECB_BASE_URL: ecb.baseUrl, CACHE_URL: 'redis://127.0.0.1:1/0' }, { now: () => NOW });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
  });
  afterAll(async () => {
    await browser?.close();
    await svc?.close();
    await ecb?.close();
  });

  it('symbol and watchlist: when EUR is chosen, then the quote, the chart and the watchlist are in EUR, the conversion is named, and the choice is remembered', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(`${svc.url}/app/symbol/AAPL`);
    await page.locator('.chart canvas').first().waitFor();
    const listed = Number(await page.locator('.chart').getAttribute('data-candles'));

    await page.getByLabel('Currency').first().selectOption('EUR');

    await page.locator('.legend.fx[data-fx-to="EUR"]').waitFor();
    expect(await page.locator('.legend.fx').textContent()).toMatch(/from USD to EUR at the ECB's reference rate/);
    expect(await page.locator('.quote-name').textContent()).toContain('EUR');
    expect(await page.locator('.quote-fx').textContent()).toMatch(/From USD at 0\.\d+ \(simulated, /);
    // Six months back from 2024-07-08: the bars before the first recorded rate (2024-03-28) are missing, not guessed.
    const converted = Number(await page.locator('.chart').getAttribute('data-candles'));
    expect(converted).toBeGreaterThan(60);
    expect(converted).toBeLessThan(listed);
    expect(await page.evaluate(() => localStorage.getItem('mds.currency'))).toBe('EUR');

    await page.evaluate(() => localStorage.setItem('mds.watchlist', JSON.stringify(['AAPL', 'SAP.DE'])));
    await page.goto(`${svc.url}/app/watchlist`);
    expect(await page.getByLabel('Currency').inputValue()).toBe('EUR');
    await page.waitForFunction(() => document.querySelector('tr[data-symbol="AAPL"]')?.getAttribute('data-price') !== '');
    const res = await svc.fetch('/api/quotes?symbols=AAPL,SAP.DE&currency=EUR');
    const body = (await res.json()) as { data: Array<{ symbol: string; price: number }> };
    expect(Number(await page.locator('tr[data-symbol="AAPL"]').getAttribute('data-price'))).toBe(body.data[0]!.price);
    expect(await page.locator('.stream-status').textContent()).toContain('Prices in EUR');
    expect(errors).toEqual([]);
    await context.close();
  });
});
