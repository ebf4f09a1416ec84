import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// Every log line of this run lands under its own directory (test/helpers/log-files.ts), for the leak
// scan that runs last; the directories of earlier runs are dropped first.
const LOGS_ROOT = join(import.meta.dirname, 'test-results', 'logs');
rmSync(LOGS_ROOT, { recursive: true, force: true });
const runLogDir = join(LOGS_ROOT, `run-${Date.now()}`);

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
        test: { ...shared, name: 'suite', include: ['test/**/*.test.ts'], exclude: ['test/e2e/chaos.test.ts', 'test/final/**'], maxWorkers: 2 },
      },
      {
        // The chaos test asserts latency bounds under load it makes itself: it runs alone, after the
        // rest, so the suite's own parallel load cannot stand in for the service's behaviour.
        test: { ...shared, name: 'chaos', include: ['test/e2e/chaos.test.ts'], maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
      {
        // Reads the log lines every group above wrote, so it must come after all of them.
        test: { ...shared, name: 'log-scan', include: ['test/final/**/*.test.ts'], maxWorkers: 1, sequence: { groupOrder: 2 } },
      },
    ],
  },
});
