// The package required from CommonJS: a job added and run to its end.
const Database = require('better-sqlite3')
const { drizzle } = require('drizzle-orm/better-sqlite3')
const { defineQueue, enqueue, getJob, work } = require('drizzle-jobs')

const client = new Database('app.db')
const db = drizzle({ client })
const queue = defineQueue('from-commonjs')
enqueue(db, queue, { n: 1 }, { id: 'cjs' })
const worker = work(db, queue, ({ n }) => ({ doubled: n * 2 }))
const timer = setInterval(async () => {
  const job = getJob(db, queue, 'cjs')
  if (job.state !== 'done') return
  clearInterval(timer)
  await worker.stop()
  client.close()
  console.log(`commonjs ${job.state} ${JSON.stringify(job.result)}`)
}, 20)
