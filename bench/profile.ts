/**
 * `npm run bench:profile`: CPU profiles of the general request path. For each scenario (health, an
 * admin call with a bearer token, the same with an API key) it starts `mds serve --cpu-prof` on its
 * own (and a cached `get_quote` MCP tool call), puts it under wrk load, stops it, and prints the frames with the most self time. The
 * .cpuprofile files stay in a temporary folder (printed), never in the repository.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startRedis } from '../test/helpers/redis-server.js';
import { ADMIN, API_KEY, benchEnv, initService } from './setup.js';
import { MDS_BIN } from '../test/helpers/serve-process.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 5);
const TOP = Number(process.env.PROFILE_TOP ?? 25);
/** The cached reads profiled, as bench/run.ts measures them. */
const CACHED_READS = {
  quote: '/api/quotes/AAPL',
  'quote-metrics': '/api/quotes/AAPL',
  'quote-limited': '/api/quotes/AAPL',
  history: '/api/history/AAPL?interval=1d&range=1y',
  search: '/api/search?q=apple',
} as const;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  endTime: number;
}

/** Keeps only the samples taken in the last `fromEndMs`..`toEndMs` before the profile ended (the load window). */
function loadWindow(profile: Profile, fromEndMs: number, toEndMs: number): Profile {
  let at = profile.endTime - profile.timeDeltas.reduce((a, b) => a + b, 0);
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    const beforeEndMs = (profile.endTime - at) / 1000;
    if (beforeEndMs <= fromEndMs && beforeEndMs >= toEndMs) {
      samples.push(id);
      timeDeltas.push(profile.timeDeltas[i] ?? 0);
    }
  });
  return { ...profile, samples, timeDeltas };
}

/** Self time per package (node_modules/<name>), per mds file, or `node` for Node's own code. */
function byPackage(profile: Profile): Array<{ frame: string; selfPct: number }> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const url = byId.get(id)?.callFrame.url ?? '';
    const dt = profile.timeDeltas[i] ?? 0;
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
    const key = pkg ?? (/\/(dist|src)\/(.*)$/.exec(url)?.[2] ? `mds ${/\/(dist|src)\/(.*)$/.exec(url)![2]}` : url.startsWith('node:') ? 'node' : `(${byId.get(id)?.callFrame.functionName || 'other'})`);
    self.set(key, (self.get(key) ?? 0) + dt);
    total += dt;
  });
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 15)
    .map(([frame, t]) => ({ frame, selfPct: (100 * t) / total }));
}

/** Self time per frame (function, file, line), in percent of all samples. */
function summarize(profile: Profile): Array<{ frame: string; selfPct: number }> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const node = byId.get(id);
    const dt = profile.timeDeltas[i] ?? 0;
    if (!node) return;
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url.replace(/^file:\/\//, '').replace(/^.*\/node_modules\//, '').replace(/^.*\/(dist|src)\//, '$1/');
    const key = `${functionName || '(anonymous)'} ${file}${file ? `:${lineNumber + 1}` : ''}`;
    self.set(key, (self.get(key) ?? 0) + dt);
    total += dt;
  });
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, TOP)
    .map(([frame, t]) => ({ frame, selfPct: (100 * t) / total }));
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'mds-profile-'));
  const redis = await startRedis();
  try {
    const env = benchEnv(dir, redis.url);
    initService(env);

    const only = (process.env.PROFILE_SCENARIOS ?? '').split(';').filter((x) => x.length > 0);
    for (const name of (['health', 'bearer', 'apikey', 'quote', 'quote-metrics', 'quote-limited', 'history', 'search', 'mcp'] as const).filter((n) => only.length === 0 || only.includes(n))) {
      const port = await freePort();
      // `quote-metrics`: the same cached read with Prometheus metrics on, scraped every second.
      const metricsPort = name === 'quote-metrics' ? await freePort() : 0;
      const profDir = join(dir, name);
      const child = spawn(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${profDir}`, MDS_BIN, 'serve', '--port', String(port)], {
        // `quote-limited`: the same cached read with an anonymous quota on that the load never reaches.
        env: { ...env, METRICS_PORT: String(metricsPort), ...(name === 'quote-limited' ? { RATE_LIMIT_ANONYMOUS_PER_MINUTE: '10000000' } : {}) },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      await new Promise<void>((done, fail) => {
        let err = '';
        child.stderr!.on('data', (c: Buffer) => {
          err += c.toString();
          if (err.includes('listening on')) done();
        });
        child.once('exit', (code) => fail(new Error(`serve exited ${code}: ${err}`)));
      });
      const base = `http://127.0.0.1:${port}`;
      const headers: string[] = [];
      let path = '/api/health';
      if (name === 'mcp') {
        // A get_quote tool call of a cached quote (the REST read first fills the cache and validates its target).
        await fetch(`${base}/api/quotes/AAPL`).then((r) => r.arrayBuffer());
        path = '/mcp';
        const script = join(dir, 'mcp.lua');
        const call = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_quote', arguments: { symbol: 'AAPL' } } });
        writeFileSync(script, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(call)}\nwrk.headers["Content-Type"] = "application/json"\nwrk.headers["Accept"] = "application/json, text/event-stream"\n`);
        headers.push('-s', script);
      } else if (name === 'quote' || name === 'quote-metrics' || name === 'quote-limited' || name === 'history' || name === 'search') {
        // A cached read answered by the fast path (the first request fills the cache and validates the target).
        path = CACHED_READS[name];
        await fetch(`${base}${path}`).then((r) => r.arrayBuffer());
      } else if (name !== 'health') {
        path = '/api/admin/status';
        if (name === 'bearer') {
          const login = await fetch(`${base}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN) });
          headers.push('-H', `Authorization: Bearer ${((await login.json()) as { access_token: string }).access_token}`);
        } else {
          headers.push('-H', `X-API-Key: ${API_KEY}`);
        }
      }
      const scraper = metricsPort === 0 ? undefined : setInterval(() => void fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.arrayBuffer(), () => undefined), 1000);
      const loadStartMs = Date.now();
      // Not spawnSync: the scraper's timer must keep firing during the load.
      const wrk = await new Promise<{ stdout: string }>((done, fail) => {
        const load = spawn('wrk', ['-t1', '-c50', `-d${DURATION_S}s`, ...headers, `${base}${path}`]);
        let stdout = '';
        load.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
        load.once('error', fail);
        load.once('exit', () => done({ stdout }));
      });
      const loadEndMs = Date.now();
      clearInterval(scraper);
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      const exitMs = Date.now();
      const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
      if (!file) throw new Error(`no profile in ${profDir}`);
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(wrk.stdout)?.[1] ?? '?';
      console.log(`\n== ${name}: ${path} (${rps} req/s under the profiler) — ${join(profDir, file)}`);
      // Startup (module loading, schema compiles) and shutdown are left out: only the load counts.
      const profile = loadWindow(JSON.parse(readFileSync(join(profDir, file), 'utf8')) as Profile, exitMs - loadStartMs - 500, exitMs - loadEndMs + 200);
      console.log('-- self time by package');
      for (const row of byPackage(profile)) console.log(`${row.selfPct.toFixed(1).padStart(5)}%  ${row.frame}`);
      console.log('-- self time by frame');
      for (const row of summarize(profile)) console.log(`${row.selfPct.toFixed(1).padStart(5)}%  ${row.frame}`);
    }
  } finally {
    await redis.stop();
  }
}

await main();
