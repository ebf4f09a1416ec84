import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// Every log line of this run lands under its own directory (test/helpers/log-files.ts), for the leak
// scan that runs last; the directories of earlier runs are dropped first.
const LOGS_ROOT = join(import.meta.dirname, 'test-results', 'logs');
rmSync(LOGS_ROOT, { recursive: true, force: true });
const runLogDir = join(LOGS_ROOT, `run-${Date.now()}`);

/** Tests whose assertions are latency bounds (no request over 1 s while Redis fails over, ...). */
const LATENCY_BOUND = [
  'test/e2e/chaos.test.ts',
  'test/integration/redis-ha-load.test.ts',
  'test/integration/shared-counters.test.ts',
  'test/integration/ws-flood.test.ts',
  'test/integration/compute-pool-latency.test.ts',
  // Its grace for keys and tokens ends when Redis is lost too: a machine loaded by parallel suites
  // timed out Redis commands and stood in for an outage of both.
  'test/e2e/database-outage.test.ts',
];

const shared = {
  globalSetup: ['test/helpers/global-setup.ts'],
  testTimeout: 30_000,
  hookTimeout: 60_000,
  pool: 'forks' as const,
  env: { MDS_TEST_LOG_DIR: runLogDir },
};

export default defineConfig({
  test: {
    projects: [
      {
        test: { ...shared, name: 'suite', include: ['test/**/*.test.ts'], exclude: [...LATENCY_BOUND, 'test/final/**'], maxWorkers: 2 },
      },
      {
        // These assert latency bounds under load they make themselves: they run alone, after the
        // rest, so the suite's own parallel load cannot stand in for the service's behaviour.
        test: { ...shared, name: 'chaos', include: [...LATENCY_BOUND], maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
      {
        // Reads the log lines every group above wrote, so it must come after all of them.
        test: { ...shared, name: 'log-scan', include: ['test/final/**/*.test.ts'], maxWorkers: 1, sequence: { groupOrder: 2 } },
      },
    ],
  },
});
