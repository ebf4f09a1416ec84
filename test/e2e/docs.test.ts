/**
 * The documentation page in a real browser with the network cut off: GET /docs must render the whole
 * contract (title, every operation, both security schemes) from the page alone, under the
 * Content-Security-Policy it is served with, without a single violation of it, and refuse to be framed.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { startTestService, type TestService } from '../helpers/service.js';

// The functions handed to the page run in the browser; this file compiles without the DOM library.
/* eslint-disable @typescript-eslint/no-explicit-any */
declare const document: any;
declare const window: any;

const ROOT = resolve(import.meta.dirname, '../..');
const CHROMIUM = '/usr/bin/chromium';
const DOCS_HTML = resolve(ROOT, 'dist/docs/index.html');
const DOCS_INPUTS = ['openapi.yaml', 'redocly.yaml', 'docs/redoc-template.hbs'].map((f) => resolve(ROOT, f));
const RESULTS = resolve(ROOT, 'test-results');

interface Operation {
  summary: string;
  tags: string[];
}
interface Spec {
  info: { title: string };
  tags: Array<{ name: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, { type: string; name?: string; bearerFormat?: string }> };
}

const spec = parse(readFileSync(resolve(ROOT, 'openapi.yaml'), 'utf8')) as Spec;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'];
const operationsByTag = new Map<string, string[]>(spec.tags.map((t) => [t.name, []]));
for (const item of Object.values(spec.paths)) {
  for (const [method, op] of Object.entries(item)) {
    if (!METHODS.includes(method)) continue;
    const tag = op.tags[0];
    if (tag === undefined) throw new Error(`operation "${op.summary}" has no tag`);
    operationsByTag.get(tag)?.push(op.summary);
  }
}

const hasChromium = existsSync(CHROMIUM);
if (!hasChromium && !process.env.CI) {
  console.warn(
    `\n${'!'.repeat(78)}\n!! SKIPPING the docs browser test: ${CHROMIUM} is missing.\n` +
      `!! Install Debian's chromium (apt-get install -y chromium) to run it; in CI it fails instead.\n${'!'.repeat(78)}\n`,
  );
}

function isLocal(url: string): boolean {
  const { protocol, hostname } = new URL(url);
  if (protocol === 'data:' || protocol === 'blob:' || protocol === 'about:') return true;
  return ['127.0.0.1', 'localhost', '[::1]'].includes(hostname);
}

/** Waits until Redoc has hydrated the page; until then its links are plain server-rendered anchors. */
async function hydrated(page: Page): Promise<void> {
  // A function, not a string: a string predicate is evaluated by eval in the page, which its policy refuses.
  await page.waitForFunction(() => [...document.querySelectorAll('#redoc a')].some((a: object) => Object.keys(a).some((k) => k.startsWith('__reactProps$'))));
}

function exactText(text: string): RegExp {
  return new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
}

/** Rebuilds dist/docs when it is missing or older than what it is built from (`npm test` builds it first). */
function ensureDocsBuilt(): void {
  const builtMs = existsSync(DOCS_HTML) ? statSync(DOCS_HTML).mtimeMs : 0;
  if (DOCS_INPUTS.some((f) => statSync(f).mtimeMs > builtMs)) {
    execFileSync('npm', ['run', '--silent', 'docs'], { cwd: ROOT, stdio: 'pipe' });
  }
}

describe('docs', () => {
  // Skipped (loudly, above) only on a developer machine without chromium; in CI the launch fails instead.
  describe.skipIf(!hasChromium && !process.env.CI)('in a browser with the network cut off', () => {
    let svc: TestService;
    let browser: Browser;
    let page: Page;
    /** Requests that reached the network layer for a non-loopback host (aborted there). */
    const reachedNetwork: string[] = [];
    /** Every non-loopback request the page started, whatever stopped it. */
    const attempted: string[] = [];
    const cspBlocked: string[] = [];
    const pageErrors: string[] = [];
    /** Every `securitypolicyviolation` event of the page, and every console line about the policy. */
    const cspViolations: string[] = [];
    const cspConsole: string[] = [];

    beforeAll(async () => {
      ensureDocsBuilt();
      svc = await startTestService();
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
      });
      page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      await page.route('**/*', (route) => {
        const url = route.request().url();
        if (isLocal(url)) return route.continue();
        reachedNetwork.push(url);
        return route.abort();
      });
      page.on('request', (req) => {
        if (!isLocal(req.url())) attempted.push(req.url());
      });
      page.on('requestfailed', (req) => {
        if (req.failure()?.errorText === 'csp') cspBlocked.push(req.url());
      });
      page.on('pageerror', (err) => pageErrors.push(err.message));
      page.on('console', (msg) => {
        if (/Content Security Policy|Content-Security-Policy/i.test(msg.text())) cspConsole.push(msg.text());
      });
      // Reported through a binding, installed before any script of the page runs: the policy itself
      // does not apply to either.
      await page.exposeFunction('reportCspViolation', (violation: string) => cspViolations.push(violation));
      await page.addInitScript(() => {
        document.addEventListener('securitypolicyviolation', (e: { effectiveDirective: string; blockedURI: string; sourceFile: string; lineNumber: number }) => {
          void window.reportCspViolation(`${e.effectiveDirective} blocked ${e.blockedURI || '(inline)'} at ${e.sourceFile}:${e.lineNumber}`);
        });
      });
    });

    afterAll(async () => {
      await browser?.close();
      await svc?.close();
    });

    it('docs: when opened, then it comes with a policy allowing only its own inline scripts and no framing, renders the API title and guide, and saves a screenshot', async () => {
      const res = await page.goto(`${svc.url}/docs`);
      expect(res?.status()).toBe(200);
      const headers = res!.headers();
      expect(headers['content-type']).toMatch(/^text\/html/);
      expect(headers['x-frame-options']).toBe('DENY');
      const policy = new Map((headers['content-security-policy'] ?? '').split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...sources]) => [name!, sources]));
      expect(policy.get('default-src')).toEqual(["'none'"]);
      expect(policy.get('frame-ancestors')).toEqual(["'none'"]);
      expect(policy.get('object-src')).toEqual(["'none'"]);
      expect(policy.get('base-uri')).toEqual(["'none'"]);
      // Scripts by hash only: not from anywhere, not any inline one, no eval.
      const scripts = policy.get('script-src') ?? [];
      expect(scripts.length).toBeGreaterThan(0);
      for (const source of scripts) expect(source).toMatch(/^'sha256-[A-Za-z0-9+/]+=*'$/);
      expect(await page.title()).toBe(spec.info.title);

      await page.locator('main h1').filter({ hasText: spec.info.title }).waitFor();
      await hydrated(page);
      for (const heading of ['Getting started', 'Quotes, history and search', 'Errors', 'Live quotes', 'Rate limits', 'Caching']) {
        await page.locator('main h2').filter({ hasText: exactText(heading) }).waitFor();
      }

      mkdirSync(RESULTS, { recursive: true });
      await page.screenshot({ path: resolve(RESULTS, 'docs.png'), fullPage: true });
    });

    it('docs: when each tag and operation is chosen in the menu, then every operation of openapi.yaml is shown', async () => {
      const menu = page.locator('[data-component-name="Menu/Menu"]').first();
      const shown: string[] = [];
      for (const [tag, summaries] of operationsByTag) {
        await menu.getByRole('link', { name: tag, exact: true }).click();
        for (const summary of summaries) {
          await menu.getByRole('link', { name: new RegExp(`^${exactText(summary).source.slice(1, -1)}`) }).click();
          await page.locator('main h2').filter({ hasText: exactText(summary) }).waitFor({ timeout: 5000 });
          shown.push(summary);
        }
      }
      expect(shown).toEqual([...operationsByTag.values()].flat());
      expect(shown.length).toBeGreaterThanOrEqual(12);
    }, 60_000);

    it('docs: when the security details of an admin operation are opened, then both schemes are described', async () => {
      const schemes = spec.components.securitySchemes;
      const menu = page.locator('[data-component-name="Menu/Menu"]').first();
      await menu.getByRole('link', { name: 'Admin', exact: true }).click();
      await menu.getByRole('link', { name: /^List users/ }).click();
      await page.waitForURL(/#\/admin\/listusers$/);
      const section = page.locator('[data-section-id="/admin/listusers"]');
      await section.getByText('View security details').click();

      // The dialog: the innermost element holding the scheme tabs and the selected scheme's details.
      const dialog = page
        .locator('div')
        .filter({ has: page.getByRole('tab', { name: 'apiKeyAuth', exact: true }) })
        .filter({ hasText: 'Required scopes' })
        .last();
      for (const [name, scheme] of Object.entries(schemes)) {
        await dialog.getByRole('tab', { name, exact: true }).click();
        // What only the selected scheme's panel says: the header name of an API key, the bearer format.
        const detail = (scheme.type === 'apiKey' ? scheme.name : scheme.bearerFormat) ?? name;
        await expect.poll(() => dialog.innerText()).toContain(detail);
      }
      expect(Object.keys(schemes).sort()).toEqual(['apiKeyAuth', 'bearerAuth']);
      await page.screenshot({ path: resolve(RESULTS, 'docs-security.png') });
    });

    it('docs: when the search is used, then it finds the history operation (searching on the page: no worker, no eval)', async () => {
      // Afresh: the security dialog of the test before covers the page.
      await page.goto(`${svc.url}/docs`);
      await hydrated(page);
      await page.getByTestId('search-trigger').first().click();
      await page.locator('[data-component-name="Search/SearchInput"]').first().waitFor();
      await page.keyboard.type('history');
      await page.locator('[data-component-name="Search/SearchItem"]').filter({ hasText: '/api/history/{symbol}' }).first().waitFor({ timeout: 10_000 });
      await page.keyboard.press('Escape');
    });

    it('docs: when browsed, then nothing was fetched from outside the loopback, nothing broke the policy and no script failed', () => {
      expect(reachedNetwork).toEqual([]);
      expect(attempted).toEqual([]);
      expect(cspBlocked).toEqual([]);
      expect(cspViolations).toEqual([]);
      expect(cspConsole).toEqual([]);
      expect(pageErrors).toEqual([]);
    });

    it('docs: when another page frames it, then the browser refuses to show it there', async () => {
      const framing = await browser.newPage();
      try {
        const refused: string[] = [];
        framing.on('console', (msg) => {
          if (/frame-ancestors/.test(msg.text())) refused.push(msg.text());
        });
        await framing.setContent(`<iframe src="${svc.url}/docs" width="800" height="600"></iframe>`);
        await expect.poll(() => refused.length, { timeout: 10_000 }).toBeGreaterThan(0);
        const frame = framing.frames().find((f) => f !== framing.mainFrame());
        const title = await frame?.evaluate(() => document.title).catch(() => '');
        expect(title).not.toBe(spec.info.title);
      } finally {
        await framing.close();
      }
    });
  });
});
