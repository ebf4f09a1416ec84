/**
 * `npm run bench:cli -- [git ref]`: how long `mds --help` and `mds keys list` (over an existing SQLite
 * database) take from the process's start to its exit, for this checkout's build and for the build of
 * `ref` (default f8a357d, the main before the CLI loaded lazily), built once in a worktree kept by commit (`test/helpers/build-of-ref.ts`) and
 * measured in the same run. Each run is a fresh process; the builds take turns run by run, so a drift of
 * the machine's speed weighs on both alike. BENCH_CLI_RUNS (default 15) runs per command and build.
 * Prints the median and the slowest run of each, and the baseline's median over this build's.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { buildOfRef } from '../test/helpers/build-of-ref.js';
import { benchEnv, median } from './setup.js';

const ref = process.argv[2] ?? 'f8a357d';
const RUNS = Number(process.env.BENCH_CLI_RUNS ?? 15);
if (!Number.isInteger(RUNS) || RUNS < 1) {
  console.error('BENCH_CLI_RUNS must be a whole number of at least 1');
  process.exit(2);
}

const COMMANDS = { 'mds --help': ['--help'], 'mds keys list': ['keys', 'list'] } as const;
type Build = 'baseline' | 'this';

/** Wall time of one `node <bin> <args>` from spawn to exit, in ms; throws when it fails. */
function timed(bin: string, args: readonly string[], env: NodeJS.ProcessEnv): number {
  const started = process.hrtime.bigint();
  const r = spawnSync(process.execPath, [bin, ...args], { env, encoding: 'utf8' });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (r.status !== 0) throw new Error(`${bin} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

const ROOT = resolve(import.meta.dirname, '..');
const baselineTree = buildOfRef(ref);
const scratch = mkdtempSync(join(tmpdir(), 'mds-bench-cli-data-'));
try {
  const built = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (built.status !== 0) throw new Error(`npm run build failed (exit ${built.status})`);
  const bins: Record<Build, string> = { baseline: join(baselineTree, 'bin', 'run.js'), this: join(ROOT, 'bin', 'run.js') };
  // Each build over a database of its own, made by its own `mds init` and holding one key, so
  // `keys list` finds its migrations done and a row to print. Redis is never reached by these commands.
  const envs = {} as Record<Build, NodeJS.ProcessEnv>;
  for (const build of ['baseline', 'this'] as const) {
    const dir = join(scratch, build);
    // Without LOG_LEVEL, as an operator runs them: no log line is shown.
    const { LOG_LEVEL: _shown, ...env } = benchEnv(dir, 'redis://127.0.0.1:1');
    envs[build] = env;
    timed(bins[build], ['init'], envs[build]);
    timed(bins[build], ['keys', 'create', 'bench-cli'], envs[build]);
  }
  const times: Record<string, Record<Build, number[]>> = {};
  for (const [name, args] of Object.entries(COMMANDS)) {
    times[name] = { baseline: [], this: [] };
    for (let i = 0; i < RUNS; i++) {
      const order: Build[] = i % 2 === 0 ? ['baseline', 'this'] : ['this', 'baseline'];
      for (const build of order) times[name]![build].push(timed(bins[build], args, envs[build]));
    }
  }
  const fmt = (ms: number) => `${(ms / 1000).toFixed(3)} s`;
  console.log(`\n${RUNS} runs each, fresh process each, on Node ${process.versions.node}`);
  console.log(`command | ${ref}: median, max | this checkout: median, max | ${ref} median / this median`);
  for (const [name, t] of Object.entries(times)) {
    const ratio = median(t.baseline) / median(t.this);
    console.log(`${name} | ${fmt(median(t.baseline))}, ${fmt(Math.max(...t.baseline))} | ${fmt(median(t.this))}, ${fmt(Math.max(...t.this))} | ${ratio.toFixed(2)}x`);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
