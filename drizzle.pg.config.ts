import { defineConfig } from 'drizzle-kit'

/** The project's own migrations of the queue tables on PostgreSQL, used by its tests. */
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/schema/pg.ts',
  out: './drizzle-pg',
})
