/**
 * Another commit's build beside this checkout's, for the programs that compare two builds in one run
 * (bench/compare.ts, bench/cli-start.ts): the commit is checked out into a temporary git worktree and
 * built there with this checkout's installed packages.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** This checkout. */
export const ROOT = resolve(import.meta.dirname, '..');

/** Runs `command` with its output on ours; throws when it exits non-zero. */
export function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): void {
  const r = spawnSync(command, args, { cwd, env, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} failed in ${cwd} (exit ${r.status})`);
}

/** A build of another commit in a temporary worktree; `remove()` deletes the worktree and its folder. */
export interface OtherBuild {
  /** The worktree's root. */
  tree: string;
  /** Its `bin/run.js`. */
  bin: string;
  /** A scratch folder beside the worktree, removed with it. */
  dir: string;
  remove(): void;
}

/** Checks `ref` out into a temporary worktree and builds it (`npm run build`). */
export function buildAt(ref: string, label = 'mds-build-'): OtherBuild {
  const dir = mkdtempSync(join(tmpdir(), label));
  const tree = join(dir, 'old');
  const remove = () => {
    if (existsSync(tree)) spawnSync('git', ['worktree', 'remove', '--force', tree], { cwd: ROOT });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    run('git', ['worktree', 'add', '--detach', tree, ref], ROOT);
    // The old build runs on this checkout's installed packages (a superset when only dependencies were added).
    cpSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'), { recursive: true, verbatimSymlinks: true });
    run('npm', ['run', '--silent', 'build'], tree);
  } catch (err) {
    remove();
    throw err;
  }
  return { tree, bin: join(tree, 'bin', 'run.js'), dir, remove };
}
