const { drizzle } = require('drizzle-orm/postgres-js')
// postgres.js 4 is an ES module: required as one (Node 20.19 and later).
const postgresModule = require('postgres')
const postgres = postgresModule.default ?? postgresModule

const sql = postgres(process.env.DATABASE_URL, { onnotice: () => {} })
module.exports = { db: drizzle({ client: sql }), close: () => sql.end({ timeout: 5 }) }
