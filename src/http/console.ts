/**
 * The web console (DESIGN.md section 17): the static files Vite built from `web/`, served at /app/
 * by the app itself (no CDN, works offline), `/` redirecting there. It is not an API operation, so it
 * is answered before the contract's validator, which would call every path outside the contract a
 * 404 envelope. A path under /app/ that is no file gets the console's index.html, whose router shows
 * its own not-found view; only a missing file under /app/assets/ is a 404. Every console response
 * carries a strict Content-Security-Policy: the build inlines nothing, so 'self' is all it needs.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RequestHandler, Response } from 'express';
import { AppError } from '../domain/errors.js';

/** The Content-Security-Policy of every console response. */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The console could not be found: `npm run build` (run by `npm ci`) builds it into dist/console. */
export class ConsoleNotBuiltError extends AppError {
  constructor() {
    super('CONSOLE_NOT_BUILT', 'The console is not built: run `npm run build`');
  }
}

function secure(res: Response): void {
  res.setHeader('Content-Security-Policy', CONSOLE_CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('X-Frame-Options', 'DENY');
}

/** True for the paths the console answers: `/` and everything under `/app`. */
export function isConsolePath(path: string): boolean {
  return path === '/' || path === '/app' || path.startsWith('/app/');
}

/**
 * The step of the request series that serves the console from `root` (the built dist/console); any
 * other request goes on to the API.
 */
export function consoleStep(root: string): RequestHandler {
  let index: Promise<Buffer | undefined> | undefined;
  const readIndex = () => (index ??= readFile(join(root, 'index.html')).catch(() => {
    index = undefined;
    return undefined;
  }));
  const sendIndex = async (res: Response) => {
    const html = await readIndex();
    if (html === undefined) throw new ConsoleNotBuiltError();
    // The page names its hashed assets: it must be asked for again after every deploy.
    res.status(200).type('text/html; charset=utf-8').setHeader('Cache-Control', 'no-cache');
    res.end(html);
  };

  return (req, res, next) => {
    if (!isConsolePath(req.path) || (req.method !== 'GET' && req.method !== 'HEAD')) {
      next();
      return;
    }
    secure(res);
    if (req.path === '/' || req.path === '/app') {
      res.redirect(302, '/app/');
      return;
    }
    let relative: string;
    try {
      relative = decodeURIComponent(req.path.slice('/app/'.length));
    } catch {
      // Not a file name at all: the console's router shows its not-found view.
      relative = '';
    }
    if (relative === '' || relative === 'index.html' || relative.endsWith('/') || relative.includes('\0')) {
      sendIndex(res).catch(next);
      return;
    }
    const asset = relative.startsWith('assets/');
    res.sendFile(relative, { root, dotfiles: 'deny', ...(asset ? { maxAge: '365d', immutable: true } : { maxAge: 0 }) }, (err?: Error & { status?: number; statusCode?: number }) => {
      if (!err) return;
      if (res.headersSent) {
        next(err);
        return;
      }
      const status = err.status ?? err.statusCode;
      // A route of the console (no such file, not an asset): its router decides what to show.
      if (status === 404 && !asset) sendIndex(res).catch(next);
      else next(Object.assign(new Error('not found'), { status: status ?? 404, path: req.path }));
    });
  };
}
