/**
 * The Python client (clients/python) against a real mds: the vitest suite starts two services (one
 * with a tiny anonymous quota, for the 429) and runs the client's own unittest suite as a process.
 * pandas comes from Debian's python3-pandas (.ci/run installs it): without it the DataFrame test
 * would be skipped, which this test counts as a failure.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEcbUpstream } from '../helpers/ecb-upstream.js';
import type { ReplayUpstream } from '../helpers/replay-upstream.js';
import { startTestService, type TestService } from '../helpers/service.js';

const CLIENT_DIR = resolve(import.meta.dirname, '../../clients/python');
/** No Redis for these two: the quota of the limited one counts in its own memory, not a shared server. */
const NO_REDIS = 'redis://127.0.0.1:1/0';

/** The first Python 3 that has pandas: the PATH's, else Debian's own (a pyenv shim may come first). */
function findPython(): { bin: string; pandas: boolean } {
  const candidates = ['python3', '/usr/bin/python3'];
  const withPandas = candidates.find((bin) => spawnSync(bin, ['-c', 'import pandas'], { encoding: 'utf8' }).status === 0);
  return { bin: withPandas ?? 'python3', pandas: withPandas !== undefined };
}
const PYTHON = findPython();
const python = () => PYTHON.bin;
/** The tests that need pandas. In CI (CI set) pandas is installed and a skip is a failure; elsewhere they are skipped, by name. */
const PANDAS_TESTS = ['test_when_history_is_asked_with_pandas_then_a_dataframe_with_a_utc_datetimeindex_and_the_candle_columns', "the README's Python example"];
const SKIP_PANDAS = !PYTHON.pandas && !process.env.CI;
if (SKIP_PANDAS) {
  console.warn(`\n!!! SKIPPED (pandas is not installed: apt-get install python3-pandas, or pip install pandas): ${PANDAS_TESTS.join('; ')}. In CI this is a failure. !!!\n`);
}

/** Runs a process without blocking this event loop: the services it calls live in this process. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd: CLIENT_DIR, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.once('error', fail);
    child.once('exit', (code) => done({ code, output }));
  });
}

let svc: TestService;
let limited: TestService;

let ecb: ReplayUpstream;

beforeAll(async () => {
  // currency= converts history at ECB's rates: the recorded ones, replayed.
  ecb = await startEcbUpstream();
  svc = await startTestService({ CACHE_URL: NO_REDIS, ECB_BASE_URL: ecb.baseUrl });
  limited = await startTestService({ CACHE_URL: NO_REDIS, RATE_LIMIT_ANONYMOUS_PER_MINUTE: '3' });
});
afterAll(async () => {
  await svc?.close();
  await limited?.close();
  await ecb?.close();
});

describe('Python client', () => {
  it('when its unittest suite runs against mds, then every test passes and none is skipped: quotes, a UTC DataFrame, study columns equal to pandas, 404, 422 and 429 as MdsError', async () => {
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, MDS_URL: svc.url, MDS_LIMITED_URL: limited.url, PYTHONDONTWRITEBYTECODE: '1' };

    const r = await run(python(), ['-m', 'unittest', '-v'], env);

    expect(r.output, r.output).toMatch(/\nOK( \(skipped=1\))?\s*$/);
    expect(r.code, r.output).toBe(0);
    const skipped = [...r.output.matchAll(/^(\w+) \(.*\) \.\.\. skipped/gm)].map((m) => m[1]);
    expect(skipped).toEqual(SKIP_PANDAS ? [PANDAS_TESTS[0]] : []);
    for (const name of [
      'test_when_quotes_of_known_and_unknown_symbols_are_asked_then_known_ones_in_order_and_the_rest_missing',
      ...(SKIP_PANDAS ? [] : ['test_when_history_is_asked_with_pandas_then_a_dataframe_with_a_utc_datetimeindex_and_the_candle_columns']),
      'test_when_the_symbol_is_unknown_then_mds_error_with_code_404',
      'test_when_the_quota_is_used_up_then_mds_error_with_code_429_and_retry_after',
      'test_when_history_is_asked_with_studies_then_one_dataframe_column_per_output_equal_to_pandas_from_the_first_row',
      'test_when_a_study_is_bad_then_mds_error_422_naming_it',
      'test_when_a_quote_is_asked_in_a_currency_then_its_prices_are_converted_and_fx_names_the_rate',
      'test_when_history_is_asked_in_a_currency_then_every_close_is_converted_at_a_euro_rate',
    ]) {
      expect(r.output).toMatch(new RegExp(`${name} \\(tests\\.test_\\w+\\.\\w+(\\.${name})?\\) \\.\\.\\. ok`));
    }
  }, 120_000);

  it.skipIf(SKIP_PANDAS)("when the README's Python example runs against mds, then it prints the volatility and the quotes without an error", async () => {
    const readme = readFileSync(resolve(CLIENT_DIR, '../../README.md'), 'utf8');
    const example = /^### From Python\n[\s\S]*?^```python\n([\s\S]*?)^```$/m.exec(readme)?.[1];
    expect(example, 'a ```python block under "From Python"').toBeDefined();
    const lines = example!.trim().split('\n');
    expect(lines).toHaveLength(5);
    // In a notebook the last value of a cell is shown; a script prints it.
    const script = [...lines.slice(0, -2), `print(${lines.at(-2)!.split('#')[0]!.trim()})`, `print(${lines.at(-1)!.split('#')[0]!.trim()})`]
      .join('\n')
      .replaceAll('http://127.0.0.1:8000', svc.url);
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, PYTHONPATH: CLIENT_DIR, PYTHONDONTWRITEBYTECODE: '1' };

    const r = await run(python(), ['-c', script], env);

    expect(r.code, r.output).toBe(0);
    expect(r.output).toMatch(/^time\n2\d{3}-\d\d-\d\d \d\d:\d\d:\d\d\+00:00 +\d/m);
    expect(r.output).toContain("'symbol': '^GSPC'");
  }, 60_000);
});
