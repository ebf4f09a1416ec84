/**
 * `node --import tsx bench/files-crossed.ts [path]`: the source files whose code runs while the real
 * service (memory cache, SQLite, the simulated provider) answers one cold request (default
 * `GET /api/quotes?symbols=AAPL,MSFT`), measured with V8's precise coverage: counts are reset once the
 * service is up, the request is sent, and every file of src/ with a function called meanwhile is listed.
 */
import { Session } from 'node:inspector/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/logger.js';
import { startService } from '../src/main.js';
import { Writable } from 'node:stream';

const target = process.argv[2] ?? '/api/quotes?symbols=AAPL,MSFT';
const root = resolve(import.meta.dirname, '..');
const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });

/** One fresh service, one cold request: the src/ files with a function called meanwhile. */
async function once(): Promise<{ status: number; files: Set<string> }> {
  const dir = mkdtempSync(join(tmpdir(), 'mds-files-crossed-'));
  const config = loadConfig(
    { NODE_ENV: 'test', HOST: '127.0.0.1', PORT: '0', DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`, SECRET_KEY: 'files-crossed-secret-key-0123456789abcdef', REFRESH_INTERVAL_SECONDS: '0', METRICS_PORT: '0', LOG_LEVEL: 'warn' },
    { readFile: false },
  );
  const logger = createLogger({ level: 'warn' }, new Writable({ write: (_c, _e, done) => done() }));
  const service = await startService(config, logger, { scheduler: false });
  try {
    await session.post('Profiler.takePreciseCoverage');
    const res = await fetch(`${service.url}${target}`);
    await res.arrayBuffer();
    const { result } = await session.post('Profiler.takePreciseCoverage');
    const files = new Set<string>();
    for (const script of result) {
      if (!script.url.startsWith('file://')) continue;
      const path = relative(root, fileURLToPath(script.url));
      if (!path.startsWith('src/') || path.startsWith('src/generated/')) continue;
      if (script.functions.some((f) => f.ranges.some((r) => r.count > 0))) files.add(path);
    }
    return { status: res.status, files };
  } finally {
    await service.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

// Timers of the service (usage flushes, pools) run in some windows and not others: a file counts when
// every one of the runs crossed it.
const runs: Array<{ status: number; files: Set<string> }> = [];
for (let i = 0; i < Number(process.env.FILES_CROSSED_RUNS ?? 3); i++) runs.push(await once());
session.disconnect();
const every = [...runs[0]!.files].filter((f) => runs.every((r) => r.files.has(f))).sort();
console.log(`${runs.map((r) => r.status).join(',')} GET ${target}: ${every.length} files of src/ in every one of ${runs.length} runs (${runs.map((r) => r.files.size).join(', ')} in each)\n${every.join('\n')}`);
