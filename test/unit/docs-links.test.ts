/**
 * The README and the pages of docs/ as a newcomer reads them: every relative link reaches a file of the
 * repository and every anchor a heading of its page, and the README stays short enough to read in ten
 * minutes.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const PAGES = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const README_MAX_LINES = 350;

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\- _]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a Markdown page (headings outside code fences). */
function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (heading) found.add(slug(heading[1]!));
  }
  return found;
}

/** Relative link targets of a page, outside code fences and code spans. */
function links(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```$/gm, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

describe('documentation links', () => {
  it(`when the README is read, then it is at most ${README_MAX_LINES} lines`, () => {
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(README_MAX_LINES);
  });

  it('when every relative link of the README and docs/ is followed, then its file exists and its anchor is a heading there', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const page of PAGES) {
      const text = readFileSync(join(ROOT, page), 'utf8');
      for (const target of links(text)) {
        checked += 1;
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const file = path === '' ? join(ROOT, page) : resolve(dirname(join(ROOT, page)), decodeURI(path));
        if (!existsSync(file)) {
          broken.push(`${page}: ${target} (no such file)`);
          continue;
        }
        if (anchor && file.endsWith('.md') && !anchors(readFileSync(file, 'utf8')).has(anchor)) broken.push(`${page}: ${target} (no such heading)`);
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(broken).toEqual([]);
  });

  it('when a link is broken in a copy of a page, then the check finds it', () => {
    const text = '# Page\n\n## A heading\n\nSee [there](#a-heading) and [nowhere](#no-heading).\n';
    expect(anchors(text).has('a-heading')).toBe(true);
    expect(links(text).filter((t) => t.startsWith('#') && !anchors(text).has(t.slice(1)))).toEqual(['#no-heading']);
  });
});
