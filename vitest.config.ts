import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// Test files are mostly I/O-bound (Redis, local HTTP servers), so run at least two files at once
// even on a 2-core CI machine (vitest's default there would be a single worker), and cap the
// number so parallel files do not starve each other's timers on small machines.
const workers = Math.max(2, Math.min(4, availableParallelism()));

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'demo/**/*.test.ts'],
    globalSetup: ['test/setup/redis.ts', 'test/setup/databases.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: workers,
  },
});
