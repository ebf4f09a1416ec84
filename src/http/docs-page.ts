/**
 * The documentation page as `/docs` serves it: the page `npm run docs` built (Redoc 3 with its bundle
 * inline, docs/redoc-template.hbs) and the headers it is sent with. Everything Redoc-specific about
 * serving it is here.
 *
 * The Content-Security-Policy allows the page's own inline scripts by their SHA-256 (computed from
 * the page as served, so a rebuilt page is allowed without a list to keep) and nothing else: no
 * script from anywhere, no eval, no framing (`frame-ancestors 'none'`, and `X-Frame-Options: DENY`
 * for browsers that know only that). Styles stay `'unsafe-inline'`: Redoc's styled-components write
 * their rules into `<style>` elements and `style` attributes as the page renders (a policy without
 * it leaves the page unstyled and its menu unusable, checked in Chromium).
 *
 * Two things Redoc 3 does would each be a violation of that policy on every visit, though the page
 * works without them; the page is changed so it never tries:
 * - its sidebar always shows Redocly's logo from `cdn.redoc.ly` (no option turns it off): the page
 *   must work offline and ask nothing of the network, so the logo is a local image of the same name;
 * - its search probes for a Web Worker by compiling a string with `Function()` (eval), falling back
 *   to searching on the page when that throws: with `Worker` absent it takes that path without the probe.
 */
import { createHash } from 'node:crypto';

/** The logo URLs Redoc 3's attribution renders (the sidebar open and collapsed). */
const REDOCLY_LOGOS = ['https://cdn.redoc.ly/redoc/logo-mini-full.svg', 'https://cdn.redoc.ly/redoc/logo-mini.svg'];

/** The attribution as a local image: the name, in the attribution's grey. */
const LOCAL_LOGO = `data:image/svg+xml,${encodeURIComponent(
  "<svg xmlns='http://www.w3.org/2000/svg' width='58' height='16' viewBox='0 0 58 16'><text x='0' y='12' font-family='sans-serif' font-size='12' fill='#808080'>Redocly</text></svg>",
)}`;

/** Runs before Redoc's bundle (a module script, so it runs after the document is parsed). */
const NO_WORKER = '<script>delete globalThis.Worker;</script>';

/** Every inline script of a page: the text between its tags, as the browser hashes it. */
const INLINE_SCRIPT = /<script\b[^>]*>([\s\S]*?)<\/script>/gi;

export interface DocsPage {
  html: string;
  /** Content-Security-Policy, framing and sniffing headers. */
  headers: Readonly<Record<string, string>>;
}

/** The policy of a page whose inline scripts are `scripts`. */
export function docsCsp(scripts: readonly string[]): string {
  const hashes = scripts.map((s) => `'sha256-${createHash('sha256').update(s, 'utf8').digest('base64')}'`);
  return [
    "default-src 'none'",
    `script-src ${hashes.join(' ')}`,
    "style-src 'unsafe-inline'",
    "img-src 'self' data: blob:",
    'font-src data:',
    "connect-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The page `npm run docs` built, ready to serve: the changes above made, its policy computed from the result. */
export function docsPage(built: string): DocsPage {
  let html = built;
  for (const logo of REDOCLY_LOGOS) html = html.replaceAll(logo, LOCAL_LOGO);
  const headEnd = html.search(/<\/head>/i);
  if (headEnd !== -1) html = `${html.slice(0, headEnd)}${NO_WORKER}\n${html.slice(headEnd)}`;
  const scripts = [...html.matchAll(INLINE_SCRIPT)].map((m) => m[1]!);
  return {
    html,
    headers: {
      'Content-Security-Policy': docsCsp(scripts),
      'X-Frame-Options': 'DENY',
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
    },
  };
}
