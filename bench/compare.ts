/**
 * `npm run bench:compare -- <git ref>`: the whole bench twice in one run, first against the build of
 * `<ref>` (checked out into a temporary worktree and built there), then against this checkout, and a
 * table of both side by side. Each build's ratios are to the baselines measured around its own rounds,
 * so the two columns compare what each build makes of the same machine. Extra arguments are none;
 * BENCH_* variables apply to both runs.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const ref = process.argv[2];
if (!ref) {
  console.error('usage: npm run bench:compare -- <git ref of the build to compare with>');
  process.exit(2);
}

interface Row {
  scenario: string;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  ratio: number | null;
  /** Baseline CPU per request over the scenario's (`x CPU` of bench/run.ts), when measured. */
  cpuRatio?: number;
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): void {
  const r = spawnSync(command, args, { cwd, env, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} failed in ${cwd} (exit ${r.status})`);
}

const dir = mkdtempSync(join(tmpdir(), 'mds-bench-compare-'));
const oldTree = join(dir, 'old');
const outputs = { old: join(ROOT, 'bench', 'results', 'compare-old.json'), new: join(ROOT, 'bench', 'results', 'compare-new.json') };
try {
  run('git', ['worktree', 'add', '--detach', oldTree, ref], ROOT);
  // The old build runs on this checkout's installed packages (a superset when only dependencies were added).
  cpSync(join(ROOT, 'node_modules'), join(oldTree, 'node_modules'), { recursive: true, verbatimSymlinks: true });
  run('npm', ['run', '--silent', 'build'], oldTree);
  run('npm', ['run', '--silent', 'build'], ROOT);
  const bench = (bin: string, output: string) =>
    run(process.execPath, ['--import', 'tsx', join(ROOT, 'bench', 'run.ts')], ROOT, { ...process.env, MDS_BIN: bin, BENCH_OUTPUT: output });
  console.log(`\n== build of ${ref} ==`);
  bench(join(oldTree, 'bin', 'run.js'), outputs.old);
  console.log('\n== this checkout ==');
  bench(join(ROOT, 'bin', 'run.js'), outputs.new);

  const rowsOf = (file: string) => new Map((JSON.parse(readFileSync(file, 'utf8')) as { rows: Row[] }).rows.map((r) => [r.scenario, r]));
  const before = rowsOf(outputs.old);
  const after = rowsOf(outputs.new);
  const fmt = (n: number | null | undefined, digits = 2) => (n === null || n === undefined ? '-' : n.toFixed(digits));
  console.log(`\nscenario | ${ref}: req/s, x baseline, x CPU, p99 ms | this checkout: req/s, x baseline, x CPU, p99 ms | change of x baseline | change of x CPU`);
  const changeOf = (newer: number | null | undefined, older: number | null | undefined) =>
    newer !== null && newer !== undefined && older !== null && older !== undefined && older !== 0 ? `${fmt(((newer - older) / older) * 100, 1)} %` : '-';
  for (const [scenario, b] of before) {
    const a = after.get(scenario);
    console.log(
      `${scenario} | ${fmt(b.rps, 0)}, ${fmt(b.ratio)}, ${fmt(b.cpuRatio)}, ${fmt(b.p99Ms)} | ${fmt(a?.rps, 0)}, ${fmt(a?.ratio)}, ${fmt(a?.cpuRatio)}, ${fmt(a?.p99Ms)} | ${changeOf(a?.ratio, b.ratio)} | ${changeOf(a?.cpuRatio, b.cpuRatio)}`,
    );
  }
  console.log(`\nwritten to ${outputs.old} and ${outputs.new}`);
} finally {
  if (existsSync(oldTree)) spawnSync('git', ['worktree', 'remove', '--force', oldTree], { cwd: ROOT });
  rmSync(dir, { recursive: true, force: true });
}
