import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// Test files are mostly I/O-bound (Redis, local HTTP servers), so run at least two files at once
// even on a 2-core CI machine (vitest's default there would be a single worker), and cap the
// number so parallel files do not starve each other's timers on small machines.
const workers = Math.max(2, Math.min(4, availableParallelism()));

/**
 * `unit`: what needs no service (no Redis, database, browser, and no sluice or Redis started as a
 * process): the modules' own tests beside them in src/, the relay stand-in's, and the checks that
 * only read the repository's files. Loopback sockets inside the test process are allowed. It runs
 * in seconds with nothing else on the machine (`npm run test:unit`).
 */
const UNIT = ['src/**/*.test.ts', 'demo/**/*.test.ts', 'test/support/*.test.ts', 'test/docs.test.ts', 'test/deploy/dockerfile.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: workers,
    projects: [
      { extends: true, test: { name: 'unit', include: UNIT } },
      {
        extends: true,
        // `integration`: everything else. Its global setups find a Redis and the PostgreSQL and
        // MariaDB servers (or fail the run: these tests are never skipped).
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: UNIT,
          globalSetup: ['test/setup/redis.ts', 'test/setup/databases.ts'],
        },
      },
    ],
  },
});
