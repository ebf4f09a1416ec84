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
    const ours = new SeriesHistogram('d_seconds', 'Durations.', [0.1, 1], ['route']);
    const theirs = new Histogram({ name: 'd_seconds', help: 'Durations.', labelNames: ['route'], buckets: [0.1, 1], registers: [] });
    for (const [route, value] of [['/a', 0.05], ['/a', 0.1], ['/a', 0.5], ['/b', 3], ['/a', 2]] as const) {
      ours.observe(value, route);
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
    const h = new SeriesHistogram('r_seconds', 'Durations.', [1], ['route']);
    h.observe(0.5, 'x');
    h.reset();
    expect(await registered(h).metrics()).toBe('# HELP r_seconds Durations.\n# TYPE r_seconds histogram\n');
  });

  it('when three labels are observed, then each combination is its own series, numbers printed as text', async () => {
    const ours = new SeriesHistogram('t_seconds', 'Durations.', [0.1], ['method', 'route', 'status']);
    const theirs = new Histogram({ name: 't_seconds', help: 'Durations.', labelNames: ['method', 'route', 'status'], buckets: [0.1], registers: [] });
    for (const [method, route, status, value] of [['GET', '/a', 200, 0.05], ['GET', '/a', 304, 0.05], ['GET', '/b', 200, 0.5], ['HEAD', '/a', 200, 0.05], ['GET', '/a', 200, 0.2]] as const) {
      ours.observe(value, method, route, status);
      theirs.observe({ method, route, status: String(status) }, value);
    }
    const reference = new Registry();
    reference.registerMetric(theirs);
    const text = await registered(ours).metrics();
    expect(text.split('\n').sort()).toEqual((await reference.metrics()).split('\n').sort());
    expect(text).toContain('t_seconds_count{method="GET",route="/a",status="200"} 2');
  });

  it('when a label name is the reserved le, or there are none or more than three, then it is refused', () => {
    expect(() => new SeriesHistogram('l_seconds', 'Durations.', [1], ['le'])).toThrow(RangeError);
    expect(() => new SeriesHistogram('l_seconds', 'Durations.', [1], [])).toThrow(RangeError);
    expect(() => new SeriesHistogram('l_seconds', 'Durations.', [1], ['a', 'b', 'c', 'd'])).toThrow(RangeError);
  });
});
