/**
 * DESIGN 24: a door never reads a credential or an address itself; the caller step decides who is
 * calling, once, for every door. This test reads every source file and fails when a module outside the
 * caller step reads (or forges) the headers that carry a credential or the client's address.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const SRC = join(ROOT, 'src');

/** The caller step: the step itself, the contract's credential check, and the authenticator it calls. */
const CALLER_STEP = new Set(['src/http/caller.ts', 'src/http/security.ts', 'src/infra/auth/passport-auth.ts']);
/** Modules that name the headers without reading them: the log's redaction paths. */
const NAMES_ONLY = new Set(['src/infra/logger.ts']);

/** Reads of `req.headers.authorization`, `headers['x-api-key']`, ...; a header-shaped object forged with one. */
const READS = [
  /\.headers\s*(\??\.)\s*authorization\b/i,
  /\.headers\s*\??\.?\s*\[\s*['"`](authorization|x-api-key|x-forwarded-for)['"`]\s*\]/i,
  /headers\s*:\s*\{[^}]*\b(authorization|['"`](x-api-key|x-forwarded-for)['"`])\s*:/i,
  /['"`]x-forwarded-for['"`]/i,
];

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'generated' ? [] : sources(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** The code of a file without its comments (block and line), so a comment may name the headers. */
function codeOf(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
}

describe('the caller step alone reads credentials and addresses', () => {
  it('when the sources are read, then no module but the caller step reads Authorization, X-API-Key or X-Forwarded-For', () => {
    const offenders: string[] = [];
    for (const file of sources(SRC)) {
      const name = relative(ROOT, file).replaceAll('\\', '/');
      if (CALLER_STEP.has(name) || NAMES_ONLY.has(name)) continue;
      const code = codeOf(readFileSync(file, 'utf8'));
      code.split('\n').forEach((line, i) => {
        if (READS.some((pattern) => pattern.test(line))) offenders.push(`${name}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(offenders).toEqual([]);
  });

  it('when a module reads a credential header, then the scan finds it (the patterns can fail)', () => {
    const samples = ["const key = req.headers['x-api-key'];", 'const auth = req.headers.authorization;', "if (req.headers['X-Forwarded-For']) {}", "check({ headers: { authorization: `Bearer ${t}` } });"];
    for (const sample of samples) expect(READS.some((pattern) => pattern.test(sample)), sample).toBe(true);
  });
});
