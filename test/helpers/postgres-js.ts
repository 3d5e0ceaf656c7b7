/**
 * The postgres.js majors the package supports, for the tests and the child processes that open them: 3.4 as
 * `postgres`, and 4.x installed beside it under the alias `postgres4`.
 */
import postgres from 'postgres'
import postgres4 from 'postgres4'

/** Every major a `[postgres.js]` test runs on, each by the name its tests carry: `postgres.js` (3.4) and `postgres.js 4`. */
export const POSTGRES_JS = ['postgres.js', 'postgres.js 4'] as const
export type PostgresJsMajor = (typeof POSTGRES_JS)[number]

/**
 * A postgres.js client of the given major on `url`. Both majors take these options and answer the calls the
 * tests make; the client is typed as 3.4's, which drizzle-orm's postgres-js driver names.
 */
export function openPostgresJs(
  major: PostgresJsMajor,
  url: string,
  options: postgres.Options<Record<string, postgres.PostgresType>> = {},
): postgres.Sql {
  const open = major === 'postgres.js 4' ? (postgres4 as unknown as typeof postgres) : postgres
  return open(url, { onnotice: () => {}, ...options })
}
