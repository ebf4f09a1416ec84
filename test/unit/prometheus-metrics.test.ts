import { describe, expect, it } from 'vitest';
import { PrometheusMetrics } from '../../src/infra/metrics/index.js';
import { sampleValue } from '../helpers/metrics.js';

describe('PrometheusMetrics', () => {
  it('when stream clients come and go, events are sent and refresh runs end, then the gauge and the counters follow', async () => {
    const metrics = new PrometheusMetrics();
    metrics.streamClients(1);
    metrics.streamClients(1);
    metrics.streamClients(-1);
    for (let i = 0; i < 3; i += 1) metrics.streamEvent();
    metrics.streamRefresh('poll');
    metrics.streamRefresh('push');
    metrics.streamRefresh('push');

    const text = await metrics.render();
    expect(sampleValue(text, 'mds_stream_clients')).toBe(1);
    expect(sampleValue(text, 'mds_stream_events_total')).toBe(3);
    expect(sampleValue(text, 'mds_stream_refresh_runs_total', { mode: 'poll' })).toBe(1);
    expect(sampleValue(text, 'mds_stream_refresh_runs_total', { mode: 'push' })).toBe(2);
  });

  it('when a method is not a standard one, then it is counted as _OTHER', async () => {
    const metrics = new PrometheusMetrics();
    metrics.httpRequest('PROPFIND', 'unmatched', 405, 0.001);
    metrics.httpRequest('GET', '/api/health', 200, 0.002);

    const text = await metrics.render();
    expect(sampleValue(text, 'http_server_request_duration_seconds_count', { http_request_method: '_OTHER', http_route: 'unmatched' })).toBe(1);
    expect(text).not.toContain('PROPFIND');
    expect(sampleValue(text, 'http_server_request_duration_seconds_sum', { http_route: '/api/health' })).toBeCloseTo(0.002, 6);
  });

  it('when the data-quality checks report findings, then mds_data_issues_total counts them by rule, action and provider', async () => {
    const metrics = new PrometheusMetrics();
    metrics.dataIssue('unit_100x', 'repaired', 'yahoo');
    metrics.dataIssue('unit_100x', 'repaired', 'yahoo');
    metrics.dataIssue('non_positive_price', 'dropped', 'polygon');

    const text = await metrics.render();
    expect(sampleValue(text, 'mds_data_issues_total', { rule: 'unit_100x', action: 'repaired', provider: 'yahoo' })).toBe(2);
    expect(sampleValue(text, 'mds_data_issues_total', { rule: 'non_positive_price', action: 'dropped', provider: 'polygon' })).toBe(1);
  });

  it('when nothing watches the cache or the breaker, then their gauges have no samples rather than a guess', async () => {
    const text = await new PrometheusMetrics().render();
    expect(text).toMatch(/^# TYPE mds_cache_mode gauge$/m);
    expect(text).not.toMatch(/^mds_cache_mode\{/m);
    expect(text).not.toMatch(/^mds_upstream_breaker_state\{/m);
  });
});
