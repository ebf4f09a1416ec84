/**
 * How a worker thread loads a module that sits beside its caller (the compute pool's tasks, the
 * SQLite reader): the compiled `.js` under dist/, or, when the process runs from the TypeScript
 * sources (vitest, bin/dev.js), the `.ts` file through tsx's loader. Node 20 cannot load a `.ts`
 * module in a worker by itself; pointing it at the dist/ build instead would let a test compare
 * today's sources with whatever `npm run build` last compiled.
 */
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The module `name` (no extension) beside `callerUrl` (`import.meta.url`), and the `execArgv` its thread needs. */
export function workerModule(callerUrl: string, name: string): { filename: string; execArgv?: string[] } {
  const here = fileURLToPath(callerUrl);
  const ext = extname(here);
  const filename = join(dirname(here), `${name}${ext}`);
  if (ext !== '.ts') return { filename };
  let loader: string;
  try {
    loader = pathToFileURL(createRequire(callerUrl).resolve('tsx')).href;
  } catch {
    throw new Error(`A worker thread runs from the TypeScript sources (${filename}), which it loads through tsx: install the dev dependencies (npm ci), or run the build (npm run build; node bin/run.js)`);
  }
  return { filename, execArgv: ['--import', loader] };
}

