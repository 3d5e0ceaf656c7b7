import { defineConfig } from 'drizzle-kit'

/** The chat's own migrations on PostgreSQL (queue tables and messages), made with `npx drizzle-kit generate --config examples/chat/drizzle.pg.config.ts`. */
export default defineConfig({
  dialect: 'postgresql',
  schema: './examples/chat/schema-pg.ts',
  out: './examples/chat/drizzle-pg',
})
