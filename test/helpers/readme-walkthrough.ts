/**
 * The README's "First calls" section as a test: its fenced `sh` blocks are run in one bash, in order,
 * and what each command prints is compared with the `# -> ` lines under it. In a documented line,
 * `...` stands for any text; a `# -> ...` line on its own for any number of lines.
 */
import { spawn } from 'node:child_process';

/** One command of the walk-through (continuation lines joined as bash reads them) and what it should print. */
export interface Step {
  /** The command as written, continuation lines included. */
  command: string;
  /** The `# -> ` lines under it, without the marker; empty when the output is not documented. */
  expected: string[];
}

/** What one step printed on stdout and the status it ended with. */
export interface StepOutput {
  stdout: string;
  status: number;
}

/** One documented output that the service's answer does not match. */
export interface Mismatch {
  command: string;
  expected: string[];
  actual: string[];
}

const EXPECTED_MARKER = /^# -> ?(.*)$/;

/** The text of the section whose heading is `title` (any level), up to the next heading of that level or higher. */
export function section(markdown: string, title: string): string {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => new RegExp(`^#{1,6} ${title}\\s*$`).test(line));
  if (start < 0) throw new Error(`README has no section '${title}'`);
  const level = /^#+/.exec(lines[start]!)![0].length;
  let inFence = false;
  let end = lines.length;
  for (let i = start + 1; i < lines.length; i++) {
    if (lines[i]!.startsWith('```')) inFence = !inFence;
    const heading = /^(#{1,6}) /.exec(lines[i]!);
    if (!inFence && heading && heading[1]!.length <= level) {
      end = i;
      break;
    }
  }
  return lines.slice(start, end).join('\n');
}

/** The steps of every ```sh block of `text`, in order. */
export function parseSteps(text: string): Step[] {
  const steps: Step[] = [];
  const blocks = [...text.matchAll(/^```(?:sh|bash|shell)\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  for (const block of blocks) {
    const lines = block.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      const documented = EXPECTED_MARKER.exec(line);
      if (documented) {
        const last = steps.at(-1);
        if (last === undefined) throw new Error(`a '# -> ' line before any command: ${line}`);
        last.expected.push(documented[1]!.trimEnd());
        continue;
      }
      if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
      const command = [line];
      while (command.at(-1)!.endsWith('\\') && i + 1 < lines.length) command.push(lines[++i]!);
      steps.push({ command: command.join('\n'), expected: [] });
    }
  }
  return steps;
}

/** A documented line as a regular expression: literal text, `...` any text. */
function lineMatcher(expected: string): RegExp {
  const pattern = expected
    .split('...')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${pattern}$`);
}

/** True when `actual` lines match the documented `expected` lines, `...` lines spanning any number. */
export function outputMatches(expected: readonly string[], actual: readonly string[]): boolean {
  const matchers = expected.map((line) => (line === '...' ? undefined : lineMatcher(line)));
  const from = (e: number, a: number): boolean => {
    if (e === matchers.length) return a === actual.length;
    const matcher = matchers[e];
    if (matcher === undefined) {
      for (let k = a; k <= actual.length; k++) if (from(e + 1, k)) return true;
      return false;
    }
    return a < actual.length && matcher.test(actual[a]!) && from(e + 1, a + 1);
  };
  return from(0, 0);
}

/** The lines a command printed: line endings (CRLF too) removed, trailing blank lines dropped. */
export function outputLines(stdout: string): string[] {
  const lines = stdout.replace(/\r/g, '').split('\n');
  while (lines.length > 0 && lines.at(-1) === '') lines.pop();
  return lines;
}

/** Every documented output that `outputs` (one per step, in order) does not match. */
export function compare(steps: readonly Step[], outputs: readonly StepOutput[]): Mismatch[] {
  if (steps.length !== outputs.length) throw new Error(`${steps.length} steps but ${outputs.length} outputs`);
  const mismatches: Mismatch[] = [];
  steps.forEach((step, i) => {
    if (step.expected.length === 0) return;
    const actual = outputLines(outputs[i]!.stdout);
    if (!outputMatches(step.expected, actual)) mismatches.push({ command: step.command, expected: step.expected, actual });
  });
  return mismatches;
}

const STEP_END = '@@readme-step-end';

/**
 * Runs the steps in one bash (so variables carry from one to the next), each command's output
 * separated by a marker line carrying its exit status. Resolves with each step's stdout and status,
 * and the whole stderr.
 */
export function runSteps(steps: readonly Step[], options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<{ outputs: StepOutput[]; stderr: string }> {
  const script = steps.map((step) => `${step.command}\nprintf '\\n${STEP_END} %d\\n' $?\n`).join('');
  return new Promise((done, fail) => {
    const bash = spawn('bash', ['--noprofile', '--norc', '-s'], { cwd: options.cwd, env: options.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => bash.kill('SIGKILL'), options.timeoutMs);
    bash.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    bash.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    bash.once('error', fail);
    bash.once('exit', () => {
      clearTimeout(timer);
      const outputs: StepOutput[] = [];
      const pattern = new RegExp(`\\n${STEP_END} (\\d+)\\n`, 'g');
      let from = 0;
      for (const match of stdout.matchAll(pattern)) {
        outputs.push({ stdout: stdout.slice(from, match.index), status: Number(match[1]) });
        from = match.index + match[0].length;
      }
      done({ outputs, stderr });
    });
    bash.stdin.end(script);
  });
}
