/**
 * `node --import tsx bench/files-crossed.ts [path]`: the source files whose code runs while a fresh
 * service answers one cold request (default `GET /api/quotes/AAPL`), measured with V8's precise
 * coverage. Cold means cold: this process started for the measurement, its own empty redis-server on
 * a free loopback port (never the one on 6379), a new SQLite file, the simulated provider, and the
 * first request the service answers after it listens. Counts are reset once the service is up, the
 * request is sent, and every file of src/ with a function called meanwhile is listed: what runs in
 * that window is what a reader following the request has to read, timers included.
 * FILES_CROSSED_RUNS=N (default 1) measures N such requests, each in a process of its own, and prints each.
 */
import { spawnSync } from 'node:child_process';
import { Session } from 'node:inspector/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/infra/logger.js';
import { startService } from '../src/main.js';
import { startRedis } from '../test/helpers/redis-server.js';

const target = process.argv[2] ?? '/api/quotes/AAPL';
const root = resolve(import.meta.dirname, '..');
const runs = Number(process.env.FILES_CROSSED_RUNS ?? 1);

/** One fresh service on its own empty Redis, one cold request: the src/ files with a function called meanwhile. */
async function measure(): Promise<{ status: number; cache: string | null; files: string[] }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  const dir = mkdtempSync(join(tmpdir(), 'mds-files-crossed-'));
  const redis = await startRedis();
  const config = loadConfig(
    {
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: '0',
      CACHE_URL: redis.url,
      DATABASE_URL: `sqlite:${join(dir, 'mds.sqlite')}`,
      SECRET_KEY: 'files-crossed-secret-key-0123456789abcdef',
      MARKET_DATA_PROVIDER: 'simulated',
      REFRESH_INTERVAL_SECONDS: '0',
      METRICS_PORT: '0',
      LOG_LEVEL: 'warn',
    },
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
    return { status: res.status, cache: res.headers.get('x-cache'), files: [...files].sort() };
  } finally {
    await service.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
    session.disconnect();
  }
}

if (process.env.FILES_CROSSED_CHILD === '1') {
  process.stdout.write(`${JSON.stringify(await measure())}\n`);
} else {
  for (let i = 0; i < runs; i++) {
    const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), target], { env: { ...process.env, FILES_CROSSED_CHILD: '1' }, encoding: 'utf8' });
    if (child.status !== 0) throw new Error(`the measuring process failed (${child.status}): ${child.stderr}`);
    const run = JSON.parse(child.stdout.trim().split('\n').at(-1)!) as { status: number; cache: string | null; files: string[] };
    if (run.cache !== 'MISS') throw new Error(`the request was not cold: X-Cache ${run.cache}`);
    console.log(`${run.status} ${run.cache} GET ${target}: ${run.files.length} files of src/ (a fresh process, its own empty Redis)\n${run.files.join('\n')}`);
  }
}
