/**
 * The build of another commit of this repository, for running an older release beside this checkout
 * (the rolling-upgrade test, `npm run bench:compare`): the commit is checked out with
 * `git worktree add --detach` under the system's temporary directory, given this checkout's installed
 * packages through a symlink (a superset of its own when only dependencies were added), and compiled
 * with this checkout's `tsc`. The build is kept, keyed by commit, so a second run starts at once; the
 * web console and the docs page are not built (a missing one is a 404, nothing a test of the API reads).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');
/** Written last: a folder without it is a build cut short, built again. */
const DONE_MARK = '.mds-build-done';

function git(args: string[]): { ok: boolean; out: string; err: string } {
  const r = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
  return { ok: r.status === 0, out: r.stdout.trim(), err: r.stderr.trim() };
}

/** The full commit id `ref` names in this clone; throws a sentence saying what to do when the clone does not have it. */
export function commitOf(ref: string): string {
  const r = git(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]);
  if (!r.ok || r.out === '') {
    throw new Error(
      `${ref} is not a commit in this clone's history (${ROOT}): fetch it (git fetch --unshallow, or git fetch origin ${ref}) or change the ref asked for`,
    );
  }
  return r.out;
}

/**
 * Builds `ref` once and answers the folder of its build (its `bin/run.js` runs it). `nice` runs the
 * compiler at the lowest priority, so a build on a shared machine slows nothing else down. Throws when
 * the commit is not in this clone, or when it does not compile (with the compiler's output).
 */
export function buildOfRef(ref: string): string {
  const commit = commitOf(ref);
  const dir = join(tmpdir(), `mds-build-${commit}`);
  if (existsSync(join(dir, DONE_MARK))) return dir;
  // A build cut short: its worktree is dropped and made again.
  if (existsSync(dir)) {
    git(['worktree', 'remove', '--force', dir]);
    rmSync(dir, { recursive: true, force: true });
  }
  git(['worktree', 'prune']);
  const added = git(['worktree', 'add', '--detach', dir, commit]);
  if (!added.ok) throw new Error(`git worktree add ${dir} ${commit} failed: ${added.err}`);
  symlinkSync(realpathSync(join(ROOT, 'node_modules')), join(dir, 'node_modules'), 'dir');
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const built = spawnSync('nice', ['-n', '19', process.execPath, tsc, '-p', 'tsconfig.json'], { cwd: dir, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`tsc failed for ${ref} (${commit}) in ${dir}:\n${built.stdout}${built.stderr}`);
  writeFileSync(join(dir, DONE_MARK), `${commit}\n`);
  return dir;
}

/** Drops the build of `ref` and its worktree (nothing when there is none). */
export function removeBuildOfRef(ref: string): void {
  const dir = join(tmpdir(), `mds-build-${commitOf(ref)}`);
  if (!existsSync(dir)) return;
  git(['worktree', 'remove', '--force', dir]);
  rmSync(dir, { recursive: true, force: true });
}
