import { defineConfig } from 'vitest/config';

const shared = {
  globalSetup: ['test/helpers/global-setup.ts'],
  testTimeout: 30_000,
  hookTimeout: 60_000,
  pool: 'forks' as const,
};

export default defineConfig({
  test: {
    projects: [
      {
        test: { ...shared, name: 'suite', include: ['test/**/*.test.ts'], exclude: ['test/e2e/chaos.test.ts'], maxWorkers: 2 },
      },
      {
        // The chaos test asserts latency bounds under load it makes itself: it runs alone, after the
        // rest, so the suite's own parallel load cannot stand in for the service's behaviour.
        test: { ...shared, name: 'chaos', include: ['test/e2e/chaos.test.ts'], maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
