const { drizzle } = require('drizzle-orm/node-postgres')
const pg = require('pg')

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL })
module.exports = { db: drizzle({ client: pool }), close: () => pool.end() }
