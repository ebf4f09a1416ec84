/**
 * `npm run bench:compare -- <git ref>`: the bench for the build of `<ref>` (checked out into a
 * temporary worktree and built there) and for this checkout, side by side in one run, and a table of
 * both. The builds take turns in passes ordered A B B A (BENCH_COMPARE_PASSES, default 2: old, new,
 * new, old), so a drift of the machine's speed over the run, which on a shared 2-core host is larger
 * than the differences looked for, weighs on both builds alike instead of on whichever ran last. Each
 * build's figures are the medians over all its rounds of every pass, each round a ratio to the
 * baselines measured around it. Extra arguments are none; BENCH_* variables apply to every pass.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildAt, ROOT, run } from './builds.js';
import { median } from './setup.js';

const ref = process.argv[2];
if (!ref) {
  console.error('usage: npm run bench:compare -- <git ref of the build to compare with>');
  process.exit(2);
}
const PASSES = Number(process.env.BENCH_COMPARE_PASSES ?? 2);
if (!Number.isInteger(PASSES) || PASSES < 1) {
  console.error('BENCH_COMPARE_PASSES must be a whole number of at least 1');
  process.exit(2);
}

interface Round {
  rps: number;
  p99Ms: number;
  baselineRps: number;
  cpuUsPerRequest?: number;
  baselineCpuUs?: number;
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
  rounds?: Round[];
}

/** One build's row over every pass: medians over all the rounds (or, for a row without rounds, over the passes). */
interface Merged {
  scenario: string;
  rps: number;
  p99Ms: number;
  non2xx: number;
  ratio: number | null;
  cpuRatio?: number;
  /** The row's `x baseline` in each pass, in pass order. */
  ratioByPass: Array<number | null>;
}

function merge(passes: Row[][]): Map<string, Merged> {
  const merged = new Map<string, Merged>();
  const scenarios = [...new Set(passes.flatMap((rows) => rows.map((r) => r.scenario)))];
  for (const scenario of scenarios) {
    const rows = passes.map((p) => p.find((r) => r.scenario === scenario));
    const present = rows.filter((r): r is Row => r !== undefined);
    const rounds = present.flatMap((r) => r.rounds ?? []);
    const cpuRounds = rounds.filter((r) => r.cpuUsPerRequest !== undefined && r.baselineCpuUs !== undefined);
    const ratios = present.map((r) => r.ratio).filter((r): r is number => r !== null);
    const cpuRatios = present.map((r) => r.cpuRatio).filter((r): r is number => r !== undefined);
    merged.set(scenario, {
      scenario,
      rps: rounds.length > 0 ? median(rounds.map((r) => r.rps)) : median(present.map((r) => r.rps)),
      p99Ms: rounds.length > 0 ? median(rounds.map((r) => r.p99Ms)) : median(present.map((r) => r.p99Ms)),
      non2xx: present.reduce((sum, r) => sum + r.non2xx, 0),
      ratio: rounds.length > 0 ? median(rounds.map((r) => r.rps / r.baselineRps)) : ratios.length > 0 ? median(ratios) : null,
      ...(cpuRounds.length > 0 && cpuRounds.length === rounds.length
        ? { cpuRatio: median(cpuRounds.map((r) => r.baselineCpuUs! / r.cpuUsPerRequest!)) }
        : rounds.length === 0 && cpuRatios.length > 0
          ? { cpuRatio: median(cpuRatios) }
          : {}),
      ratioByPass: rows.map((r) => r?.ratio ?? null),
    });
  }
  return merged;
}

const outputs = { old: join(ROOT, 'bench', 'results', 'compare-old.json'), new: join(ROOT, 'bench', 'results', 'compare-new.json') };
// Made before the hour of passes, not after: a fresh clone has no bench/results (ignored by git), and
// failing to write there lost every pass's figures with the temporary folder.
mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
const old = buildAt(ref, 'mds-bench-compare-');
const dir = old.dir;
try {
  run('npm', ['run', '--silent', 'build'], ROOT);
  const bins = { old: old.bin, new: join(ROOT, 'bin', 'run.js') } as const;
  const passes: Record<'old' | 'new', Row[][]> = { old: [], new: [] };
  for (let pass = 0; pass < PASSES; pass++) {
    const order = pass % 2 === 0 ? (['old', 'new'] as const) : (['new', 'old'] as const);
    for (const build of order) {
      const output = join(dir, `${build}-${pass}.json`);
      console.log(`\n== pass ${pass + 1} of ${PASSES}: ${build === 'old' ? `the build of ${ref}` : 'this checkout'} ==`);
      run(process.execPath, ['--import', 'tsx', join(ROOT, 'bench', 'run.ts')], ROOT, { ...process.env, MDS_BIN: bins[build], BENCH_OUTPUT: output });
      passes[build].push((JSON.parse(readFileSync(output, 'utf8')) as { rows: Row[] }).rows);
    }
  }
  const before = merge(passes.old);
  const after = merge(passes.new);
  writeFileSync(outputs.old, `${JSON.stringify({ ref, passes: PASSES, rows: [...before.values()] }, null, 2)}\n`);
  writeFileSync(outputs.new, `${JSON.stringify({ ref: 'this checkout', passes: PASSES, rows: [...after.values()] }, null, 2)}\n`);

  const fmt = (n: number | null | undefined, digits = 2) => (n === null || n === undefined ? '-' : n.toFixed(digits));
  const byPass = (m: Merged | undefined) => (m === undefined ? '-' : m.ratioByPass.map((r) => fmt(r)).join('/'));
  console.log(`\nscenario | ${ref}: req/s, x baseline (each pass), x CPU, p99 ms | this checkout: req/s, x baseline (each pass), x CPU, p99 ms | change of x baseline | change of x CPU`);
  const changeOf = (newer: number | null | undefined, older: number | null | undefined) =>
    newer !== null && newer !== undefined && older !== null && older !== undefined && older !== 0 ? `${fmt(((newer - older) / older) * 100, 1)} %` : '-';
  for (const [scenario, b] of before) {
    const a = after.get(scenario);
    console.log(
      `${scenario} | ${fmt(b.rps, 0)}, ${fmt(b.ratio)} (${byPass(b)}), ${fmt(b.cpuRatio)}, ${fmt(b.p99Ms)} | ${fmt(a?.rps, 0)}, ${fmt(a?.ratio)} (${byPass(a)}), ${fmt(a?.cpuRatio)}, ${fmt(a?.p99Ms)} | ${changeOf(a?.ratio, b.ratio)} | ${changeOf(a?.cpuRatio, b.cpuRatio)}`,
    );
  }
  console.log(`\nwritten to ${outputs.old} and ${outputs.new}`);
} finally {
  old.remove();
}
