import { defineConfig } from 'vitest/config'

/**
 * The fresh-app installs (test/fresh-apps/), run after the main suite and on their own: they install from npm
 * and compile better-sqlite3, which would slow the timing of the suite's other files. The apps install at once
 * (test.concurrent, five at a time: vitest's default maxConcurrency): one's compile overlaps the others' downloads.
 */
export default defineConfig({
  test: {
    include: ['test/fresh-apps/**/*.test.ts'],
    globalSetup: ['test/helpers/pg-global.ts'],
    testTimeout: 900_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
  },
})
