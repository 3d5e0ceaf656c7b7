// The app's database on PGlite, in a directory of its own, as docs/postgres.md opens it.
import { PGlite } from '@electric-sql/pglite'
import { drizzle } from 'drizzle-orm/pglite'

const client = new PGlite('./data')
export const db = drizzle({ client })
export const close = () => client.close()
