/**
 * Builds the console into dist/console, served by mds at /app/. Everything is bundled (no CDN) and
 * nothing is inlined into the HTML, so the Content-Security-Policy can stay at 'self'.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/app/',
  publicDir: 'public',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    // An inlined asset would be a data: URL; the policy allows only files of this origin.
    assetsInlineLimit: 0,
    target: 'es2022',
    reportCompressedSize: false,
    sourcemap: false,
  },
});
