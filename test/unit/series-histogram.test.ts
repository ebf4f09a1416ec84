import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SeriesHistogram } from '../../src/infra/metrics/series-histogram.js';

function registered(h: SeriesHistogram): Registry {
  const registry = new Registry();
  registry.registerMetric(h as unknown as Histogram);
  return registry;
}

describe('SeriesHistogram', () => {
  it('when values are observed, then the registry prints the same text as a prom-client Histogram given the same values', async () => {
    const ours = new SeriesHistogram('d_seconds', 'Durations.', [0.1, 1]);
    const theirs = new Histogram({ name: 'd_seconds', help: 'Durations.', labelNames: ['route'], buckets: [0.1, 1], registers: [] });
    for (const [route, value] of [['/a', 0.05], ['/a', 0.1], ['/a', 0.5], ['/b', 3], ['/a', 2]] as const) {
      ours.observe(route, () => ({ route }), value);
      theirs.observe({ route }, value);
    }
    const reference = new Registry();
    reference.registerMetric(theirs);
    const text = await registered(ours).metrics();
    expect(text).toBe(await reference.metrics());
    expect(text).toContain('d_seconds_bucket{le="0.1",route="/a"} 2');
    expect(text).toContain('d_seconds_count{route="/b"} 1');
  });

  it('when reset, then no series is left', async () => {
    const h = new SeriesHistogram('r_seconds', 'Durations.', [1]);
    h.observe('x', () => ({ route: 'x' }), 0.5);
    h.reset();
    expect(await registered(h).metrics()).toBe('# HELP r_seconds Durations.\n# TYPE r_seconds histogram\n');
  });

  it('when a series brings the reserved label le, then it is refused', () => {
    const h = new SeriesHistogram('l_seconds', 'Durations.', [1]);
    expect(() => h.observe('x', () => ({ le: '1' }), 0.5)).toThrow(RangeError);
  });
});
