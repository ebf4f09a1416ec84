/**
 * The documentation page as /docs serves it (src/http/docs-page.ts): its policy allows exactly the
 * inline scripts of the page it serves, and that page asks nothing of Redocly's CDN. The browser test
 * (test/e2e/docs.test.ts) proves the real page renders under it without a violation.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { docsPage } from '../../src/http/docs-page.js';

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

const BUILT = [
  '<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title>',
  '<script>var mode = "é";</script>',
  '<script type="module">const src = e ? `https://cdn.redoc.ly/redoc/logo-mini-full.svg` : `https://cdn.redoc.ly/redoc/logo-mini.svg`;</script>',
  '</head><body><div id="redoc"></div></body></html>',
].join('\n');

describe('docs page', () => {
  it('when the built page is prepared, then the policy lists the SHA-256 of each inline script served, and nothing else runs', () => {
    const page = docsPage(BUILT);

    const scripts = [...page.html.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[1]!);
    expect(scripts).toHaveLength(3);
    const policy = page.headers['Content-Security-Policy']!;
    expect(policy).toContain(`script-src ${scripts.map(sha256).join(' ')};`);
    expect(policy).toMatch(/^default-src 'none'; /);
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).not.toMatch(/unsafe-eval/);
    expect(policy.match(/script-src [^;]*/)![0]).not.toMatch(/unsafe-inline|'self'|https?:/);
    expect(page.headers['X-Frame-Options']).toBe('DENY');
  });

  it("when the built page is prepared, then Redocly's logo is a local image and Redoc finds no Worker to probe for before its bundle runs", () => {
    const page = docsPage(BUILT);

    expect(page.html).not.toContain('cdn.redoc.ly');
    expect(page.html).toContain('src = e ? `data:image/svg+xml,');
    const noWorker = page.html.indexOf('<script>delete globalThis.Worker;</script>');
    expect(noWorker).toBeGreaterThan(page.html.indexOf('<head>'));
    expect(noWorker).toBeLessThan(page.html.indexOf('</head>'));
  });
});
