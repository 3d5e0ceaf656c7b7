// The app's database on node-postgres, as the README's PostgreSQL section opens it.
import { drizzle } from 'drizzle-orm/node-postgres'
import pg from 'pg'

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL })
export const db = drizzle({ client: pool })
export const close = () => pool.end()
