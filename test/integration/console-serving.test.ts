/**
 * How the app serves the console's files (src/http/console.ts) over a real socket, from a folder
 * the test writes: the redirect, the files, the fallback to index.html, the policy header, and what
 * is refused (files outside the folder, missing assets, other methods, a console not built).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_CSP, consoleStep } from '../../src/http/console.js';
import { loadContract } from '../../src/http/contract.js';
import { handlersOf, startBareApp } from '../helpers/bare-app.js';
import { captureLogs } from '../helpers/log-capture.js';

const contract = loadContract();
const INDEX = '<!doctype html><title>console</title><script type="module" src="/app/assets/index-abc.js"></script>';

describe('the console files', () => {
  let dir: string;
  let server: Server;
  let url: string;
  let unbuilt: { server: Server; url: string };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mds-console-'));
    mkdirSync(join(dir, 'console', 'assets'), { recursive: true });
    writeFileSync(join(dir, 'console', 'index.html'), INDEX);
    writeFileSync(join(dir, 'console', 'assets', 'index-abc.js'), 'console.log("console")');
    writeFileSync(join(dir, 'console', 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
    writeFileSync(join(dir, 'secret.txt'), 'outside the console');
    const { logger } = captureLogs();
    ({ server, url } = await startBareApp(contract, handlersOf(contract, () => undefined), logger, { console: consoleStep(join(dir, 'console')) }));
    unbuilt = await startBareApp(contract, handlersOf(contract, () => undefined), logger, { console: consoleStep(join(dir, 'missing')) });
  });

  afterAll(async () => {
    await new Promise((done) => server?.close(done));
    await new Promise((done) => unbuilt?.server.close(done));
    rmSync(dir, { recursive: true, force: true });
  });

  it('when / or /app is asked for, then it redirects to /app/ with the policy', async () => {
    for (const path of ['/', '/app']) {
      const res = await fetch(`${url}${path}`, { redirect: 'manual' });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('/app/');
      expect(res.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
    }
  });

  it('when files and routes are asked for, then files are sent as built and any other path gets index.html, all with the policy', async () => {
    const index = await fetch(`${url}/app/`);
    expect(index.status).toBe(200);
    expect(await index.text()).toBe(INDEX);
    expect(index.headers.get('cache-control')).toBe('no-cache');
    expect(index.headers.get('x-content-type-options')).toBe('nosniff');

    const asset = await fetch(`${url}/app/assets/index-abc.js`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(asset.headers.get('cache-control')).toMatch(/immutable/);
    expect(asset.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
    expect(await asset.text()).toBe('console.log("console")');

    for (const path of ['/app/watchlist', '/app/symbol/AAPL', '/app/no/such/page', '/app/%E0%A4%A', '/app/missing.png']) {
      const res = await fetch(`${url}${path}`);
      expect(res.status, path).toBe(200);
      expect(await res.text(), path).toBe(INDEX);
      expect(res.headers.get('content-security-policy'), path).toBe(CONSOLE_CSP);
    }
    const head = await fetch(`${url}/app/favicon.svg`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('when a path reaches outside the folder, an asset is missing or the method is not GET, then no file is sent and the answer is the envelope', async () => {
    for (const path of ['/app/..%2fsecret.txt', '/app/assets/..%2f..%2fsecret.txt', '/app/%2e%2e/secret.txt']) {
      const res = await fetch(`${url}${path}`);
      const text = await res.text();
      expect(text, path).not.toContain('outside the console');
    }
    const missing = await fetch(`${url}/app/assets/nope.js`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ success: false, code: 404 });
    const post = await fetch(`${url}/app/`, { method: 'POST' });
    expect(post.status).toBe(404);
    expect(await post.json()).toMatchObject({ success: false, code: 404 });
  });

  it('when the console was never built, then /app/ answers 404 saying how to build it', async () => {
    const res = await fetch(`${unbuilt.url}/app/`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ success: false, error: 'The console is not built: run `npm run build`' });
  });
});
