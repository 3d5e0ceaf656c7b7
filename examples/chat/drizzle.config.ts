import { defineConfig } from 'drizzle-kit'

/** The chat's own migrations (queue tables and messages), made with `npx drizzle-kit generate --config examples/chat/drizzle.config.ts`. */
export default defineConfig({
  dialect: 'sqlite',
  schema: './examples/chat/schema.ts',
  out: './examples/chat/drizzle',
})
