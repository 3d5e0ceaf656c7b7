// The app's database on postgres.js, as the README's PostgreSQL section opens it.
import { drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'

const sql = postgres(process.env.DATABASE_URL!, { onnotice: () => {} })
export const db = drizzle({ client: sql })
export const close = () => sql.end({ timeout: 5 })
