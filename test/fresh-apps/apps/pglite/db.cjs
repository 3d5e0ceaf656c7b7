const { PGlite } = require('@electric-sql/pglite')
const { drizzle } = require('drizzle-orm/pglite')

const client = new PGlite('./data')
module.exports = { db: drizzle({ client }), close: () => client.close() }
