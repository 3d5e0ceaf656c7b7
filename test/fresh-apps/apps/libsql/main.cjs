// The package required from CommonJS on libsql: a job added and run to its end.
const { createClient } = require('@libsql/client')
const { drizzle } = require('drizzle-orm/libsql')
const { defineQueue, enqueue, getJob, work } = require('drizzle-jobs')

const client = createClient({ url: 'file:app.db' })
const db = drizzle({ client })
const queue = defineQueue('from-commonjs')
async function main() {
  await enqueue(db, queue, { n: 1 }, { id: 'cjs' })
  const worker = work(db, queue, ({ n }) => ({ doubled: n * 2 }))
  let job
  while ((job = await getJob(db, queue, 'cjs')).state !== 'done') await new Promise((resolve) => setTimeout(resolve, 20))
  await worker.stop()
  client.close()
  console.log(`commonjs ${job.state} ${JSON.stringify(job.result)}`)
}
main().catch((error) => {
  console.error(error)
  process.exit(1)
})
