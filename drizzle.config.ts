import { defineConfig } from 'drizzle-kit'

/** The project's own migrations of the queue tables, used by its tests and examples. */
export default defineConfig({
  dialect: 'sqlite',
  schema: './src/schema/index.ts',
  out: './drizzle',
})
