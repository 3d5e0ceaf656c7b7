import { defineConfig } from 'drizzle-kit'

// drizzle-kit migrates the app's local file through libsql.
export default defineConfig({ dialect: 'turso', schema: './src/schema.ts', out: './drizzle', dbCredentials: { url: 'file:./app.db' } })
