import { defineConfig } from 'drizzle-kit'

/** The example's migrations, made with `npx drizzle-kit generate --config examples/pglite/drizzle.config.ts`. */
export default defineConfig({
  dialect: 'postgresql',
  driver: 'pglite',
  schema: './examples/pglite/schema.ts',
  out: './examples/pglite/drizzle',
  dbCredentials: { url: './examples/pglite/data' },
})
