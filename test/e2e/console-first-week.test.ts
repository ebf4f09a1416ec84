/**
 * The console as a newcomer meets it in the first week (issue 38), in Debian's headless Chromium
 * against the real service: the watchlist adds what the suggestions show, the symbol page keeps its
 * interval and range compatible and says "unknown symbol" once, and the administrator is asked for a
 * new password and can give one. Screenshots go to test-results/.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, startTestService, type TestService } from '../helpers/service.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
declare const window: any;
declare const localStorage: any;

const ROOT = resolve(import.meta.dirname, '../..');
const RESULTS = resolve(ROOT, 'test-results');
const CHROMIUM = '/usr/bin/chromium';
const NO_REDIS = 'redis://127.0.0.1:1/0';

async function seriousViolations(page: Page): Promise<string[]> {
  await page.evaluate(readFileSync(resolve(ROOT, 'node_modules/axe-core/axe.min.js'), 'utf8'));
  const violations = (await page.evaluate(async () => (await window.axe.run()).violations.map((v: any) => ({ id: v.id, impact: v.impact })))) as Array<{ id: string; impact: string }>;
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id);
}

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)('the console in its first week', () => {
  let svc: TestService;
  let browser: Browser;
  const errors: string[] = [];

  async function open(path: string): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(`${svc.url}${path}`);
    return page;
  }

  beforeAll(async () => {
    mkdirSync(RESULTS, { recursive: true });
    svc = await startTestService({ CACHE_URL: NO_REDIS }, { init: true });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  });
  afterAll(async () => {
    await browser?.close();
    await svc?.close();
  });

  it('watchlist: when "appl" is typed and Enter pressed, or "Microsoft" typed and Add clicked, then the suggested AAPL and MSFT are added; an unknown symbol is refused and a stored one is marked', async () => {
    const page = await open('/app/watchlist');
    const search = page.getByRole('combobox', { name: 'Add a symbol' });

    await search.fill('appl');
    await search.press('Enter');
    await page.locator('tr[data-symbol="AAPL"]').waitFor({ timeout: 8000 });
    await search.fill('Microsoft');
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    await page.locator('tr[data-symbol="MSFT"]').waitFor({ timeout: 8000 });
    await search.fill('NOSUCH');
    await search.press('Enter');
    await page.locator('.problem').first().waitFor({ timeout: 8000 });

    const rows = await page.locator('table.watchlist tbody tr').evaluateAll((trs: any[]) => trs.map((tr) => tr.dataset.symbol));
    expect(rows).toEqual(['AAPL', 'MSFT']);
    expect(await page.locator('.problem-message').first().textContent()).toMatch(/Unknown symbol 'NOSUCH'|No symbol matches 'NOSUCH'/);
    expect(await seriousViolations(page)).toEqual([]);
    await page.screenshot({ path: resolve(RESULTS, 'console-first-week-watchlist.png'), fullPage: true });

    await page.evaluate(() => localStorage.setItem('mds.watchlist', JSON.stringify(['AAPL', 'ZZZZNOPE'])));
    const stored = JSON.parse((await page.evaluate(() => localStorage.getItem('mds.watchlist'))) as string) as string[];
    expect(stored).toEqual(['AAPL', 'ZZZZNOPE']);
    await page.reload();
    await page.locator('tr[data-symbol="ZZZZNOPE"][data-unknown="true"]').waitFor({ timeout: 8000 });
    expect(await page.locator('tr[data-symbol="ZZZZNOPE"]').textContent()).toMatch(/Unknown symbol/);
    await page.context().close();
  });

  it('symbol: when "5 min" is chosen on the default 6M range, then the range moves to 1M and the chart draws; "Max" then moves back to daily bars', async () => {
    const page = await open('/app/symbol/AAPL');
    await page.locator('.chart').waitFor({ timeout: 8000 });

    await page.getByRole('button', { name: '5 min' }).click();
    await page.waitForFunction(() => window.document.querySelector('.chart')?.getAttribute('aria-label')?.includes('bars'));

    expect(await page.getByRole('group', { name: 'Range' }).getByRole('button', { pressed: true }).textContent()).toBe('1M');
    await page.waitForFunction(() => Number(window.document.querySelector('.chart')?.dataset.candles) > 1000);
    expect(await page.locator('.problem').count()).toBe(0);

    await page.getByRole('button', { name: 'Max' }).click();
    await page.waitForFunction(() => window.document.querySelector('[aria-label="Interval"] [aria-pressed="true"]')?.textContent === 'Day');
    expect(await page.locator('.problem').count()).toBe(0);
    await page.screenshot({ path: resolve(RESULTS, 'console-first-week-symbol-5m.png'), fullPage: true });
    await page.context().close();
  });

  it('symbol: when the symbol does not exist, then one problem says so, without the chart controls or the download', async () => {
    const page = await open('/app/symbol/NOSUCH');
    await page.locator('.problem').first().waitFor({ timeout: 8000 });

    expect(await page.locator('.problem').count()).toBe(1);
    expect(await page.locator('.problem').textContent()).toMatch(/404.*Unknown symbol 'NOSUCH'/);
    expect(await page.getByRole('group', { name: 'Interval' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Download CSV' }).count()).toBe(0);
    expect(await seriousViolations(page)).toEqual([]);
    await page.screenshot({ path: resolve(RESULTS, 'console-first-week-unknown-symbol.png'), fullPage: true });
    await page.context().close();
  });

  it('admin: when the administrator signs in with the configured default password, then the page asks for a new one, and changing it works and is used by the next sign-in', async () => {
    const page = await open('/app/admin');
    await page.getByLabel('Username').fill(ADMIN.username);
    await page.getByLabel('Password', { exact: true }).fill(ADMIN.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('[data-must-change]').waitFor({ timeout: 8000 });
    expect(await seriousViolations(page)).toEqual([]);
    await page.screenshot({ path: resolve(RESULTS, 'console-first-week-admin-password.png'), fullPage: true });

    await page.getByLabel('Current password').fill(ADMIN.password);
    await page.getByLabel('New password (8 to 72 bytes)').fill('a-console-chosen-pass');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.locator('[data-panel="password"] [role="status"], [data-panel="password"] [role="alert"]:not([data-must-change])').first().waitFor({ timeout: 8000 });
    expect(await page.locator('[data-panel="password"]').textContent()).toMatch(/Password changed\./);

    expect(await page.locator('[data-must-change]').count()).toBe(0);
    const login = await svc.fetch('/api/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: ADMIN.username, password: 'a-console-chosen-pass' }) });
    expect(login.status).toBe(200);
    expect(((await login.json()) as { must_change_password: boolean }).must_change_password).toBe(false);
    await page.context().close();
  });

  it('no page threw', () => {
    expect(errors).toEqual([]);
  });
});
