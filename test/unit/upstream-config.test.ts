import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

const noFile = { readFile: false } as const;

describe('configuration of the upstream protection', () => {
  it('when nothing is set, then the yahoo budget is 5 requests a second and 4 in flight per instance', () => {
    const c = loadConfig({}, noFile);
    expect(c.market).toMatchObject({ upstreamMaxRps: 5, upstreamMaxConcurrency: 4 });
  });

  it('when set, then the values are used, and 0 turns the budget off', () => {
    const c = loadConfig({ UPSTREAM_MAX_RPS: '0', UPSTREAM_MAX_CONCURRENCY: '16' }, noFile);
    expect(c.market).toMatchObject({ upstreamMaxRps: 0, upstreamMaxConcurrency: 16 });
  });

  it('when the values are out of range, then loading fails naming both variables', () => {
    expect(() => loadConfig({ UPSTREAM_MAX_RPS: '-1', UPSTREAM_MAX_CONCURRENCY: '0' }, noFile)).toThrow(/UPSTREAM_MAX_RPS=.*UPSTREAM_MAX_CONCURRENCY=/);
    expect(() => loadConfig({ UPSTREAM_MAX_RPS: 'fast' }, noFile)).toThrow(/UPSTREAM_MAX_RPS="fast": must be a number/);
  });
});
