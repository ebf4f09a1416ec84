/** Reading a Prometheus scrape in tests: fetch it, pick samples by name and labels, lint it with promtool. */
import { spawnSync } from 'node:child_process';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** GETs `url` and returns the text; throws unless it is 200 with the Prometheus text content type. */
export async function scrape(url: string): Promise<string> {
  const res = await fetch(url);
  const text = await res.text();
  if (res.status !== 200 || !res.headers.get('content-type')?.startsWith('text/plain')) {
    throw new Error(`scrape of ${url}: ${res.status} ${res.headers.get('content-type')}: ${text.slice(0, 200)}`);
  }
  return text;
}

/** Every sample line of the text format (comments skipped). Label values here never contain `,` or `"`. */
export function parseSamples(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? '').split(',').filter(Boolean)) {
      const eq = pair.indexOf('=');
      labels[pair.slice(0, eq)] = pair.slice(eq + 2, -1);
    }
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** The sum of the samples named `name` whose labels include `labels` (0 when there is none). */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number {
  return parseSamples(text)
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** `promtool check metrics` on `text`: its exit status and every line it printed. */
export function promtoolCheck(text: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (r.error) throw new Error(`promtool is not runnable (apt-get install -y prometheus): ${r.error.message}`);
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}
