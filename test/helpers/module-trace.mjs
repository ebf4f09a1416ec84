/**
 * `node --import <this file> bin/run.js ...` with MODULE_TRACE_FILE set: every module the process
 * loads is written to that file, one URL or path a line. ES modules are recorded as they are resolved
 * (by a resolve hook, on the loader's thread, so none is missed if the process exits abruptly);
 * CommonJS modules (most packages: typeorm, express, ioredis) from the require cache as the process
 * exits. Used to prove which modules a command loads (test/e2e/cli-modules.test.ts).
 */
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';

const out = process.env.MODULE_TRACE_FILE;
if (!out) throw new Error('module-trace: set MODULE_TRACE_FILE to the file to write');

const hooks = `
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(${JSON.stringify(out)}, resolved.url + '\\n');
  return resolved;
}
`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);

const cache = createRequire(import.meta.url).cache;
process.on('exit', () => appendFileSync(out, Object.keys(cache).map((path) => `${path}\n`).join('')));
