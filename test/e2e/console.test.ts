/**
 * The web console (DESIGN.md section 17) in Debian's headless Chromium, against the real service:
 * every page loads without a console error and without a serious or critical axe-core violation,
 * the chart draws candles, a watchlist row follows a price move, keys are created (shown once),
 * used and revoked from the admin page, which lists the configured provider, every control is reachable by keyboard, the JavaScript
 * budget and the markets board's first paint hold, and the console works in memory mode and with
 * DATA_REQUIRES_AUTH=true. Screenshots of each page go to test-results/ (and, with
 * MDS_SCREENSHOT_DOCS=1, the symbol page to docs/console-symbol.png for the README).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { History, HistoryQuery, MarketDataProvider, Quote, SearchResult } from '../../src/domain/ports/market-data.js';
import { SimulatedMarketDataProvider } from '../../src/infra/market/simulated-market-data-provider.js';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';
import { noteSecrets } from '../helpers/log-files.js';

// The functions handed to page.evaluate run in the browser; this file compiles without the DOM library.
/* eslint-disable @typescript-eslint/no-explicit-any */
declare const document: any;
declare const window: any;
declare const localStorage: any;
declare const getComputedStyle: any;

const ROOT = resolve(import.meta.dirname, '../..');
const RESULTS = resolve(ROOT, 'test-results');
const ASSETS = resolve(ROOT, 'dist/console/assets');
const CHROMIUM = '/usr/bin/chromium';
const ADMIN_KEY = 'console-e2e-admin-key-0123456789abcdef';
const JS_BUDGET_BYTES = 150 * 1024;
const LIVE = 'MSFT';

// The console suite's own database on the shared test Redis: its provider goes by the contract's
// name `simulated` (GET /api/admin/providers answers only names the contract knows), and its moved
// prices and cache flushes must not reach other suites' `simulated` entries in database 0.
const CONSOLE_REDIS_DB = 9;

/**
 * The simulated provider with prices a test may move and a dividend and a split added to every
 * history, so the chart's markers have something to show.
 */
class ConsoleProvider implements MarketDataProvider {
  readonly name = 'simulated';
  readonly local = true;
  readonly #simulated = new SimulatedMarketDataProvider();
  readonly #prices = new Map<string, number>();

  move(symbol: string, price: number): void {
    this.#prices.set(symbol, price);
  }

  async getQuote(symbol: string): Promise<Quote | undefined> {
    const quote = await this.#simulated.getQuote(symbol);
    const price = this.#prices.get(symbol);
    if (!quote || price === undefined || quote.prev_close === null) return quote;
    const change = price - quote.prev_close;
    return { ...quote, price, change: Math.round(change * 100) / 100, change_percent: Math.round((change / quote.prev_close) * 10_000) / 100 };
  }

  async getHistory(query: HistoryQuery): Promise<History | undefined> {
    const history = await this.#simulated.getHistory(query);
    if (!history || history.candles.length < 10) return history;
    const at = (i: number) => history.candles[Math.floor(history.candles.length * i)]!.time;
    return { ...history, events: { dividends: [{ time: at(0.3), amount: 0.82 }], splits: [{ time: at(0.7), numerator: 2, denominator: 1 }] } };
  }

  search(query: string, limit: number): Promise<SearchResult[]> {
    return this.#simulated.search(query, limit);
  }
}

interface Opened {
  page: Page;
  context: BrowserContext;
  /** Console errors and uncaught exceptions of the page. */
  errors: string[];
}

async function open(browser: Browser, url: string): Promise<Opened> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (msg) => msg.type() === 'error' && errors.push(msg.text()));
  page.on('pageerror', (err) => errors.push(err.message));
  await page.goto(url);
  return { page, context, errors };
}

/** A screenshot under test-results/, without the focus ring the keyboard check left behind. */
async function shoot(page: Page, name: string, fullPage = true): Promise<void> {
  await page.evaluate(() => document.activeElement?.blur());
  await page.screenshot({ path: resolve(RESULTS, name), fullPage });
}

/** axe-core 4.14 run in the page: the serious and critical violations, by rule. */
async function axeViolations(page: Page): Promise<string[]> {
  // Through the DevTools protocol: page.addScriptTag would add an inline <script>, which the
  // console's Content-Security-Policy refuses, as it should.
  await page.evaluate(readFileSync(resolve(ROOT, 'node_modules/axe-core/axe.min.js'), 'utf8'));
  const violations = await page.evaluate(async () => {
    const result = await (window as unknown as { axe: { run: () => Promise<{ violations: Array<{ id: string; impact: string | null; nodes: unknown[] }> }> } }).axe.run();
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}, ${v.nodes} nodes)`);
}

/** Tabs through the page and checks that every visible control took the focus on the way. */
async function unreachableByKeyboard(page: Page): Promise<string[]> {
  const controls = await page.evaluate(() => {
    const all: any[] = [...document.querySelectorAll('a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea')];
    return all.filter((el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden').map((el, i): string => {
      el.dataset.kbd = String(i);
      return String(i);
    });
  });
  const reached = new Set<string>();
  await page.evaluate(() => document.activeElement?.blur());
  for (let i = 0; i < controls.length + 10; i += 1) {
    await page.keyboard.press('Tab');
    const id = await page.evaluate(() => (document.activeElement?.dataset?.kbd as string | undefined) ?? '');
    if (id) reached.add(id);
  }
  const missing = controls.filter((id) => !reached.has(id));
  return page.evaluate((ids) => ids.map((id) => (document.querySelector(`[data-kbd="${id}"]`)?.outerHTML as string | undefined)?.slice(0, 120) ?? id), missing);
}

/** Gzipped bytes of the JavaScript files a page loaded from the console's assets. */
async function javascriptBytes(page: Page): Promise<{ files: string[]; gzipped: number }> {
  const files = await page.evaluate(() =>
    performance
      .getEntriesByType('resource')
      .map((e) => new URL(e.name).pathname)
      .filter((p) => p.startsWith('/app/assets/') && p.endsWith('.js')),
  );
  const gzipped = files.reduce((sum, p) => sum + gzipSync(readFileSync(resolve(ASSETS, p.slice('/app/assets/'.length))), { level: 9 }).length, 0);
  return { files, gzipped };
}

/** Pixels of the chart's canvases in the candles' up and down colours. */
async function candlePixels(page: Page): Promise<number> {
  return page.evaluate(() => {
    let count = 0;
    for (const canvas of [...document.querySelectorAll('.chart canvas')] as any[]) {
      const context = canvas.getContext('2d');
      if (!context || canvas.width === 0 || canvas.height === 0) continue;
      const data: number[] = context.getImageData(0, 0, canvas.width, canvas.height).data;
      for (let i = 0; i < data.length; i += 4) {
        const [r, g, b] = [data[i]!, data[i + 1]!, data[i + 2]!];
        // #0a7d3b (up) and #c62828 (down), with some room for anti-aliasing.
        if ((Math.abs(r - 10) < 12 && Math.abs(g - 125) < 12 && Math.abs(b - 59) < 12) || (Math.abs(r - 198) < 12 && Math.abs(g - 40) < 12 && Math.abs(b - 40) < 12)) count += 1;
      }
    }
    return count;
  });
}

/** Per chart canvas: its top on the page and how many of its pixels are near `rgb`. */
async function pixelsOf(page: Page, rgb: readonly [number, number, number]): Promise<Array<{ top: number; count: number }>> {
  return page.evaluate(([r0, g0, b0]) => {
    return ([...document.querySelectorAll('.chart canvas')] as any[]).map((canvas) => {
      const context = canvas.getContext('2d');
      let count = 0;
      if (context && canvas.width > 0 && canvas.height > 0) {
        const data: number[] = context.getImageData(0, 0, canvas.width, canvas.height).data;
        for (let i = 0; i < data.length; i += 4) if (Math.abs(data[i]! - r0) < 14 && Math.abs(data[i + 1]! - g0) < 14 && Math.abs(data[i + 2]! - b0) < 14) count += 1;
      }
      return { top: canvas.getBoundingClientRect().top as number, count };
    });
  }, rgb);
}

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)('the web console in a browser', () => {
  const provider = new ConsoleProvider();
  let svc: TestService;
  let browser: Browser;
  const figures: Record<string, unknown> = {};

  beforeAll(async () => {
    mkdirSync(RESULTS, { recursive: true });
    noteSecrets(ADMIN_KEY);
    svc = await startTestService({ API_KEYS: ADMIN_KEY, CACHE_URL: `redis://127.0.0.1:${inject('redisPort')}/${CONSOLE_REDIS_DB}` }, { provider, init: true });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
  });

  afterAll(async () => {
    console.log(`console figures: ${JSON.stringify(figures)}`);
    await browser?.close();
    await svc?.close();
  });

  it('serving: when / and /app/ are asked for, then / redirects to the console and every console answer carries the strict policy', async () => {
    const root = await svc.fetch('/', { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/app/');
    const index = await svc.fetch('/app/');
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = index.headers.get('content-security-policy') ?? '';
    expect(csp).toMatch(/default-src 'self'/);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
    const html = await index.text();
    // Nothing inline for the policy to refuse, nothing from another origin.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|<style|style=|https?:\/\//);
    const script = /src="(\/app\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const asset = await svc.fetch(script!);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-security-policy')).toBe(csp);
    expect(asset.headers.get('content-type')).toMatch(/javascript/);
    const route = await svc.fetch('/app/no/such/page');
    expect(route.status).toBe(200);
    expect(await route.text()).toBe(html);
    expect((await svc.fetch('/app/assets/no-such-file.js')).status).toBe(404);
  });

  it('markets: when the board opens, then every market shows its state and holiday, the countdown runs, and first paint is within 1 s', async () => {
    // The browser's own first start (its renderer and compiler warming up) is not the console's
    // paint: one visit in a throwaway context first, then a fresh context (empty cache) is measured.
    const firstPaint = (p: Page) =>
      p.evaluate(() => {
        const entry = performance.getEntriesByName('first-contentful-paint')[0] ?? performance.getEntriesByName('first-paint')[0];
        return entry?.startTime as number | undefined;
      });
    const warmUp = await open(browser, `${svc.url}/app/`);
    await warmUp.page.locator('table.board tbody tr').first().waitFor();
    const cold = await firstPaint(warmUp.page);
    figures.marketsColdBrowserFirstPaintMs = cold === undefined ? undefined : Math.round(cold);
    await warmUp.context.close();
    const { page, context, errors } = await open(browser, `${svc.url}/app/`);
    const api = (await (await svc.fetch('/api/markets')).json()) as { data: Array<{ market: string; state: string; holiday: string | null }> };
    await page.locator('table.board tbody tr').first().waitFor();
    // An upper bound of when the rows were drawn: they were there by the time this was asked.
    figures.marketsBoardShownByMs = Math.round(await page.evaluate(() => performance.now()));
    expect(await page.locator('table.board tbody tr').count()).toBe(api.data.length);
    expect(await page.getByText('Loading the mds console').count()).toBe(0);
    for (const market of api.data) {
      const row = page.locator(`tr[data-market="${market.market}"]`);
      expect(await row.getAttribute('data-state')).toBe(market.state);
      expect((await row.locator('td.holiday').textContent()) ?? '').toBe(market.holiday ?? '');
    }
    const timed = page.locator('tr td.countdown[data-target]:not([data-target=""])').first();
    const before = await timed.textContent();
    await page.waitForFunction((text) => document.querySelector('tr td.countdown[data-target]:not([data-target=""])')?.textContent !== text, before, { timeout: 3000 });

    const paint = await firstPaint(page);
    figures.marketsFirstPaintMs = paint === undefined ? undefined : Math.round(paint);
    expect(paint).toBeDefined();
    expect(paint!).toBeLessThanOrEqual(1000);
    const js = await javascriptBytes(page);
    figures.marketsJsGzipBytes = js.gzipped;
    expect(js.gzipped).toBeLessThanOrEqual(JS_BUDGET_BYTES);
    expect(await axeViolations(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'console-markets.png');
    expect(errors).toEqual([]);
    await context.close();
  });

  it('watchlist: when a symbol is added from the suggestions and its price moves, then its row changes within 2 s and the list is remembered', async () => {
    const { page, context, errors } = await open(browser, `${svc.url}/app/watchlist`);
    const search = page.getByRole('combobox', { name: 'Add a symbol' });
    await search.fill('Apple');
    await page.locator('#symbol-suggestions li', { hasText: 'AAPL' }).first().waitFor();
    await search.press('ArrowDown');
    await search.press('Enter');
    await page.locator('tr[data-symbol="AAPL"]').waitFor();
    await search.fill(LIVE);
    await page.locator('#symbol-suggestions li', { hasText: LIVE }).first().waitFor();
    await search.press('Enter');
    const row = page.locator(`tr[data-symbol="${LIVE}"]`);
    await page.waitForFunction((s) => document.querySelector(`tr[data-symbol="${s}"]`)?.dataset.price !== '', LIVE);
    await page.locator('.stream-status[data-state="live"]').waitFor();
    const before = Number(await row.getAttribute('data-price'));
    const moved = Math.round((before * 1.05 + 1) * 100) / 100;

    provider.move(LIVE, moved);
    expect((await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': ADMIN_KEY } })).status).toBe(200);
    const fetched = await svc.fetch(`/api/quotes/${LIVE}`);
    expect(fetched.status).toBe(200);
    const movedAt = Date.now();
    await page.waitForFunction(([s, p]) => document.querySelector(`tr[data-symbol="${s}"]`)?.dataset.price === String(p), [LIVE, moved] as const, { timeout: 2000 });
    figures.watchlistChangeMs = Date.now() - movedAt;
    await page.waitForFunction((s) => document.querySelector(`tr[data-symbol="${s}"]`)?.classList.contains('flash-up') === true, LIVE, { timeout: 2000 });
    expect(await row.locator('td.price').textContent()).toBe(new Intl.NumberFormat('en-US', { maximumFractionDigits: 4 }).format(moved));

    expect(await axeViolations(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    expect((await javascriptBytes(page)).gzipped).toBeLessThanOrEqual(JS_BUDGET_BYTES);
    await shoot(page, 'console-watchlist.png');

    await page.reload();
    await page.locator(`tr[data-symbol="${LIVE}"]`).waitFor();
    expect(await page.locator('table.watchlist tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-symbol')))).toEqual(['AAPL', LIVE]);
    await page.getByRole('button', { name: 'Remove AAPL' }).click();
    await page.locator('tr[data-symbol="AAPL"]').waitFor({ state: 'detached' });
    await expect.poll(() => page.evaluate(() => localStorage.getItem('mds.watchlist') as string | null)).toBe(JSON.stringify([LIVE]));
    expect(errors).toEqual([]);
    await context.close();
  });

  it('symbol: when a symbol page opens, then the chart draws candles with markers, the buttons change it, and the CSV holds what is shown', async () => {
    const { page, context, errors } = await open(browser, `${svc.url}/app/symbol/AAPL`);
    await page.locator('.quote .state').waitFor();
    expect(await page.locator('.quote .state').textContent()).toMatch(/^Market (open|closed|pre|post)$/);
    await page.locator('.chart canvas').first().waitFor();
    await page.waitForFunction(() => document.querySelectorAll('.chart canvas').length > 0);
    await expect.poll(() => candlePixels(page), { timeout: 5000 }).toBeGreaterThan(200);
    figures.candlePixels = await candlePixels(page);
    expect(await page.locator('.legend').textContent()).toMatch(/1 dividends · 1 splits/);
    const attribution = page.locator('.attribution a');
    expect(await attribution.getAttribute('href')).toBe('https://www.tradingview.com/');
    expect(await attribution.textContent()).toMatch(/TradingView/);

    const daily = Number(await page.locator('.chart').getAttribute('data-candles'));
    expect(daily).toBeGreaterThan(50);
    await page.getByRole('group', { name: 'Interval' }).getByRole('button', { name: 'Week' }).click();
    await page.waitForFunction((n) => Number(document.querySelector('.chart')?.getAttribute('data-candles')) !== n, daily);
    const weekly = Number(await page.locator('.chart').getAttribute('data-candles'));
    expect(weekly).toBeLessThan(daily);
    expect(await page.getByRole('group', { name: 'Interval' }).getByRole('button', { name: 'Week' }).getAttribute('aria-pressed')).toBe('true');

    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Download CSV' }).click();
    const file = await download;
    expect(file.suggestedFilename()).toBe('AAPL-1wk-6mo.csv');
    const csv = readFileSync((await file.path())!, 'utf8').trim().split('\n');
    expect(csv[0]).toMatch(/^time,open,high,low,close/);
    expect(csv.length - 1).toBe(weekly);

    await page.getByRole('group', { name: 'Interval' }).getByRole('button', { name: 'Day' }).click();
    await page.waitForFunction((n) => Number(document.querySelector('.chart')?.getAttribute('data-candles')) === n, daily);
    await expect.poll(() => candlePixels(page), { timeout: 5000 }).toBeGreaterThan(200);
    expect(await axeViolations(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    const js = await javascriptBytes(page);
    figures.symbolJsGzipBytes = js.gzipped;
    expect(js.gzipped).toBeLessThanOrEqual(JS_BUDGET_BYTES);
    await page.mouse.move(0, 0);
    await page.evaluate(() => document.activeElement?.blur());
    await shoot(page, 'console-symbol.png');
    if (process.env.MDS_SCREENSHOT_DOCS === '1') await page.screenshot({ path: resolve(ROOT, 'docs/console-symbol.png'), fullPage: true });
    expect(errors).toEqual([]);
    await context.close();
  });

  it('admin: when an administrator signs in, then a key is created and shown once, works with X-API-Key, and fails once revoked', async () => {
    const { page, context, errors } = await open(browser, `${svc.url}/app/admin`);
    await page.getByRole('heading', { name: 'Sign in as an administrator' }).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await page.getByLabel('Username').fill(ADMIN.username);
    await page.getByLabel('Password', { exact: true }).fill(ADMIN.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-panel="cache"]').waitFor();
    // The data-quality records are listed (none on a clean start).
    await page.locator('[data-panel="data-issues"]').getByText('No data issues recorded.').waitFor();

    // The providers panel lists the configured provider, in the API's words, in place of the placeholder.
    const providerRow = page.locator('[data-panel="providers"] tr[data-provider="simulated"]');
    await providerRow.waitFor();
    expect(await page.locator('[data-placeholder]').count()).toBe(0);
    const chain = (await (await svc.fetch('/api/admin/providers', { headers: { 'X-API-Key': ADMIN_KEY } })).json()) as { data: Array<{ name: string; healthy: boolean; breaker: string }> };
    expect(chain.data.map((p) => p.name)).toEqual(['simulated']);
    expect(await page.locator('[data-panel="providers"] tbody tr').count()).toBe(chain.data.length);
    expect(await providerRow.getAttribute('data-healthy')).toBe('true');
    expect(await providerRow.getAttribute('data-breaker')).toBe('closed');
    expect(await providerRow.locator('th[scope="row"]').textContent()).toBe('simulated');
    expect(await providerRow.locator('td').nth(1).textContent()).toBe('healthy');
    expect(await providerRow.locator('td').nth(2).textContent()).toBe('closed');
    expect(await page.locator('[data-panel="providers"] table caption').count()).toBe(1);
    expect(await providerRow.locator('td').last().textContent()).toBe('none needed');

    const name = `console-key-${Date.now()}`;
    await page.locator('input[name="key-name"]').fill(name);
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = page.locator('.created-key code.secret');
    await secret.waitFor();
    const key = (await secret.textContent()) ?? '';
    noteSecrets(key);
    expect(key.length).toBeGreaterThan(20);
    await page.locator(`tr[data-key-name="${name}"]`).waitFor();
    const keyId = await page.locator(`tr[data-key-name="${name}"]`).getAttribute('data-key-id');

    const used = await svc.fetch('/api/quotes/AAPL', { headers: { 'X-API-Key': key } });
    expect(used.status).toBe(200);
    const listed = await (await svc.fetch('/api/admin/api-keys', { headers: { 'X-API-Key': ADMIN_KEY } })).text();
    expect(listed).toContain(name);
    expect(listed).not.toContain(key);

    await page.getByRole('button', { name: 'I have copied it' }).click();
    await secret.waitFor({ state: 'detached' });
    expect(await page.content()).not.toContain(key);

    // The key's request shows in the usage table.
    await page.getByRole('button', { name: 'Refresh usage' }).click();
    await page.locator(`[data-panel="usage"] tr[data-caller="${keyId}"]`).waitFor();
    expect(await page.locator(`[data-panel="usage"] tr[data-caller="${keyId}"] td.num`).allTextContents()).toEqual(['1', '1', '0']);
    expect(await page.locator(`[data-panel="usage"] tr[data-caller="${keyId}"] td[data-field="operations"]`).textContent()).toBe('rest getQuote 1 pts (1 req)');

    await page.getByRole('button', { name: 'Flush the cache' }).click();
    await page.getByText(/^Removed \d+ cached entries\.$/).waitFor();

    const user = `console-user-${Date.now() % 100000}`;
    await page.locator('input[name="new-username"]').fill(user);
    await page.locator('input[name="new-password"]').fill('console-password-123');
    await page.getByRole('button', { name: 'Create user' }).click();
    await page.locator(`tr[data-username="${user}"]`).waitFor();

    expect(await axeViolations(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    figures.adminJsGzipBytes = (await javascriptBytes(page)).gzipped;
    expect(figures.adminJsGzipBytes as number).toBeLessThanOrEqual(JS_BUDGET_BYTES);
    await shoot(page, 'console-admin.png');

    await page.getByRole('button', { name: `Delete ${user}` }).click();
    await page.locator(`tr[data-username="${user}"]`).waitFor({ state: 'detached' });
    await page.getByRole('button', { name: `Revoke ${name}` }).click();
    await page.locator(`tr[data-key-name="${name}"]`).waitFor({ state: 'detached' });
    const refused = await svc.fetch('/api/quotes/AAPL', { headers: { 'X-API-Key': key } });
    expect(refused.status).toBe(401);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('bad input: when a console route is unknown or an API call fails, then the console says so in its own view and in the envelope words', async () => {
    const { page, context, errors } = await open(browser, `${svc.url}/app/no/such/page`);
    await page.locator('[data-view="not-found"]').waitFor();
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Page not found');
    expect(await axeViolations(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'console-not-found.png', false);
    expect(errors).toEqual([]);

    const envelope = (await (await svc.fetch('/api/quotes/NOSUCH9')).json()) as { error: string };
    await page.goto(`${svc.url}/app/symbol/NOSUCH9`);
    const message = page.locator('.problem .problem-message').first();
    await message.waitFor();
    expect(await message.textContent()).toBe(envelope.error);
    await shoot(page, 'console-error.png', false);
    await context.close();
  });

  it('usage: when a key and a user call the API, then GET /api/admin/usage counts their requests for today', async () => {
    const token = await svc.login(ADMIN.username, ADMIN.password);
    for (let i = 0; i < 3; i += 1) expect((await svc.fetch('/api/markets', { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
    const res = await svc.fetch('/api/admin/usage?days=30', { headers: { 'X-API-Key': ADMIN_KEY } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { days: number; data: Array<{ day: string; caller_kind: string; caller: string; requests: number; rate_limited: number }> };
    expect(body.days).toBe(30);
    const today = new Date().toISOString().slice(0, 10);
    const admin = body.data.find((r) => r.caller_kind === 'user' && r.caller === ADMIN.username && r.day === today);
    expect(admin?.requests).toBeGreaterThanOrEqual(3);
    expect(body.data.some((r) => r.caller_kind === 'api-key' && r.caller.startsWith('static:'))).toBe(true);
    expect((await svc.fetch('/api/admin/usage?days=91', { headers: { 'X-API-Key': ADMIN_KEY } })).status).toBe(422);
  });

  it('studies: when SMA and RSI are chosen from the menu, then the SMA is drawn over the price and the RSI in a pane below it, and the choice is remembered', async () => {
    const { page, context, errors } = await open(browser, `${svc.url}/app/symbol/AAPL`);
    await page.locator('.chart canvas').first().waitFor();
    const menu = page.getByRole('group', { name: 'Studies' });
    await menu.getByRole('checkbox', { name: 'SMA 20' }).check();
    await menu.getByRole('checkbox', { name: 'RSI 14' }).check();
    await page.waitForFunction(() => document.querySelector('.chart')?.getAttribute('data-studies') === 'sma:20,rsi:14');
    // The studies are chosen at once; the RSI's pane follows once its values have come.
    await expect.poll(() => page.locator('.chart').getAttribute('data-panes'), { timeout: 10_000 }).toBe('2');
    expect(await page.locator('.chart').getAttribute('aria-label')).toMatch(/SMA 20, RSI 14$/);

    // SMA (#d97706) in the price pane's canvas; RSI (#7c3aed) in a canvas below it.
    // The price pane is found again on every try: while the RSI pane is being added (slow on a loaded
    // machine) the panes are still being laid out, and a top read before that never matches again.
    const priceTop = async () => Math.min(...(await pixelsOf(page, [10, 125, 59])).filter((c) => c.count > 0).map((c) => c.top));
    await expect.poll(async () => { const top = await priceTop(); return (await pixelsOf(page, [217, 119, 6])).filter((c) => c.top === top).reduce((n, c) => n + c.count, 0); }, { timeout: 10_000 }).toBeGreaterThan(100);
    await expect.poll(async () => { const top = await priceTop(); return (await pixelsOf(page, [124, 58, 237])).filter((c) => c.top > top + 200).reduce((n, c) => n + c.count, 0); }, { timeout: 10_000 }).toBeGreaterThan(100);
    figures.studyPixels = { sma: await pixelsOf(page, [217, 119, 6]), rsi: await pixelsOf(page, [124, 58, 237]) };
    expect(await axeViolations(page)).toEqual([]);
    expect(await unreachableByKeyboard(page)).toEqual([]);
    await shoot(page, 'console-symbol-studies.png');

    // Remembered: a reload draws them again, the boxes still ticked.
    await page.reload();
    await page.waitForFunction(() => document.querySelector('.chart')?.getAttribute('data-studies') === 'sma:20,rsi:14');
    expect(await page.getByRole('group', { name: 'Studies' }).getByRole('checkbox', { name: 'RSI 14' }).isChecked()).toBe(true);
    expect(await page.getByRole('group', { name: 'Studies' }).getByRole('checkbox', { name: 'MACD 12, 26, 9' }).isChecked()).toBe(false);
    expect(await page.evaluate(() => localStorage.getItem('mds.studies'))).toBe('["sma","rsi"]');
    const js = await javascriptBytes(page);
    expect(js.gzipped).toBeLessThanOrEqual(JS_BUDGET_BYTES);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('budget: when the console is built, then no page loads more than 150 KB of gzipped JavaScript', () => {
    const files = readdirSync(ASSETS).filter((f) => f.endsWith('.js'));
    const sizes = Object.fromEntries(files.map((f) => [f, gzipSync(readFileSync(resolve(ASSETS, f)), { level: 9 }).length]));
    figures.chunks = sizes;
    // The heaviest page carries the entry chunk and at most every lazily loaded one.
    const total = Object.values(sizes).reduce((a, b) => a + b, 0);
    expect(total).toBeLessThanOrEqual(JS_BUDGET_BYTES);
  });
});

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)('the web console without Redis and with DATA_REQUIRES_AUTH=true', () => {
  const KEY = 'console-e2e-read-key-0123456789abcdef';
  let svc: TestService;
  let browser: Browser;

  beforeAll(async () => {
    noteSecrets(KEY);
    // Port 1 refuses connections: the cache serves from process memory.
    // Christmas Day 2026 for the market states, so the board has holidays to name.
    svc = await startTestService(
      { CACHE_URL: 'redis://127.0.0.1:1/0', DATA_REQUIRES_AUTH: 'true', API_KEYS: KEY, MARKET_DATA_PROVIDER: 'simulated' },
      { init: true, now: () => Date.UTC(2026, 11, 25, 15, 0) },
    );
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await svc?.close();
  });

  it('auth: when the data needs credentials, then the board asks for a sign-in, and with a key the board, chart and watchlist work', async () => {
    const { data: status } = (await (await svc.fetch('/api/admin/status', { headers: { 'X-API-Key': KEY } })).json()) as { data: { cache: { mode: string } } };
    expect(status.cache.mode).toBe('memory');
    const { page, context } = await open(browser, `${svc.url}/app/`);
    await page.getByRole('heading', { name: 'Sign in to continue' }).waitFor();
    expect(await page.locator('.problem-message').first().textContent()).toMatch(/Not authenticated/);
    await page.getByLabel('Or an API key').fill(KEY);
    await page.getByRole('button', { name: 'Use this key' }).click();
    await page.locator('table.board tbody tr').first().waitFor();
    const markets = (await (await svc.fetch('/api/markets', { headers: { 'X-API-Key': KEY } })).json()) as { data: Array<{ market: string; holiday: string | null }> };
    const holidays = markets.data.filter((m) => m.holiday !== null);
    expect(holidays.map((m) => m.market)).toContain('US');
    for (const m of holidays) expect(await page.locator(`tr[data-market="${m.market}"] td.holiday`).textContent()).toBe(m.holiday);
    await shoot(page, 'console-markets-holiday.png', false);

    // The key stays in memory while links are followed inside the console.
    await page.getByRole('link', { name: 'Watchlist' }).click();
    const search = page.getByRole('combobox', { name: 'Add a symbol' });
    await search.fill('AAPL');
    await page.locator('#symbol-suggestions li', { hasText: 'AAPL' }).first().waitFor();
    await search.press('Enter');
    await page.waitForFunction(() => document.querySelector('tr[data-symbol="AAPL"]')?.dataset.price !== '');
    await page.locator('tr[data-symbol="AAPL"] a').click();
    await expect.poll(() => candlePixels(page), { timeout: 5000 }).toBeGreaterThan(200);
    await shoot(page, 'console-auth-symbol.png', false);
    await context.close();
  });

  it('auth: when an administrator signs in with a password, then the admin page works without Redis', async () => {
    const { page, context, errors } = await open(browser, `${svc.url}/app/admin`);
    await page.getByLabel('Username').fill(ADMIN.username);
    await page.getByLabel('Password', { exact: true }).fill(ADMIN.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-panel="cache"] [data-cache-mode="memory"]').waitFor();
    await page.locator('[data-panel="providers"] tr[data-provider="simulated"][data-healthy="true"]').waitFor();
    expect(errors).toEqual([]);
    await context.close();
  });
});
