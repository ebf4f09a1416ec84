/**
 * examples/stream.html in headless Chromium: the browser's own EventSource, from a page on another
 * origin (CORS), receives the first quotes and then a change the test makes happen.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlledProvider, uniqueSymbol } from '../helpers/controlled-provider.js';
import { startTestService, type TestService } from '../helpers/service.js';

const ROOT = resolve(import.meta.dirname, '../..');
const CHROMIUM = '/usr/bin/chromium';
const API_KEY = 'stream-browser-api-key-0123456789';

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)('examples/stream.html in a browser', () => {
  const provider = new ControlledProvider();
  const [a, b] = [uniqueSymbol('WEB'), uniqueSymbol('WEB')];
  let pageServer: Server;
  let origin: string;
  let svc: TestService;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    const html = readFileSync(resolve(ROOT, 'examples/stream.html'));
    pageServer = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html));
    await new Promise<void>((done) => pageServer.listen(0, '127.0.0.1', done));
    origin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
    provider.set(a, 100);
    provider.set(b, 200);
    svc = await startTestService({ API_KEYS: API_KEY, CORS_ORIGINS: origin }, { provider });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
    page = await browser.newPage();
    page.on('pageerror', (err) => pageErrors.push(err.message));
  });

  afterAll(async () => {
    await browser?.close();
    await svc?.close();
    await new Promise((done) => pageServer?.close(done));
  });

  const price = (symbol: string) => page.locator(`tr[data-symbol="${symbol}"] td.price`);

  it('stream: when the page opens an EventSource, then it shows the first quotes, then a change', async () => {
    await page.goto(`${origin}/stream.html?api=${encodeURIComponent(svc.url)}&symbols=${a},${b}`);
    await page.locator('#status').filter({ hasText: 'live' }).waitFor();
    await price(a).filter({ hasText: /^100$/ }).waitFor();
    await price(b).filter({ hasText: /^200$/ }).waitFor();
    const firstId = Number(await page.locator(`tr[data-symbol="${a}"]`).getAttribute('data-last-event-id'));
    expect(firstId).toBeGreaterThan(0);

    provider.set(a, 101.5);
    expect((await svc.fetch('/api/admin/cache', { method: 'DELETE', headers: { 'X-API-Key': API_KEY } })).status).toBe(200);
    expect((await svc.fetch(`/api/quotes/${a}`)).status).toBe(200);

    await price(a).filter({ hasText: /^101\.5$/ }).waitFor({ timeout: 10_000 });
    expect(await page.locator(`tr[data-symbol="${a}"] td.updates`).textContent()).toBe('2');
    expect(await page.locator(`tr[data-symbol="${b}"] td.updates`).textContent()).toBe('1');
    expect(Number(await page.locator(`tr[data-symbol="${a}"]`).getAttribute('data-last-event-id'))).toBeGreaterThan(firstId);
    expect(pageErrors).toEqual([]);
  });
});
