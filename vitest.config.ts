import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts', 'examples/**/*.test.ts'],
    // The fresh-app installs run after the suite, on their own: vitest.fresh.config.ts.
    exclude: ['test/fresh-apps/**', '**/node_modules/**'],
    // One PostgreSQL server for the whole run: DATABASE_URL, or a private cluster started here.
    globalSetup: ['test/helpers/pg-global.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: true,
    // Three files at once on 2 cores: most of a file's time is spent waiting (child processes, timers, the server).
    maxWorkers: 3,
  },
})
