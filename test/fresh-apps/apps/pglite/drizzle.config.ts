import { defineConfig } from 'drizzle-kit'

// drizzle-kit migrates the app's PGlite directory through PGlite itself.
export default defineConfig({
  dialect: 'postgresql',
  driver: 'pglite',
  schema: './src/schema.ts',
  out: './drizzle',
  dbCredentials: { url: './data' },
})
