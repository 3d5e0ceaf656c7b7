// The package required from CommonJS: a job added and run to its end.
const { defineQueue, enqueue, getJob, work } = require('drizzle-jobs')
const { db, close } = require('./db.cjs')

const queue = defineQueue('from-commonjs')
async function main() {
  await enqueue(db, queue, { n: 1 }, { id: 'cjs' })
  const worker = work(db, queue, ({ n }) => ({ doubled: n * 2 }))
  let job
  while ((job = await getJob(db, queue, 'cjs')).state !== 'done') await new Promise((resolve) => setTimeout(resolve, 20))
  await worker.stop()
  await close()
  console.log(`commonjs ${job.state} ${JSON.stringify(job.result)}`)
}
main().catch((error) => {
  console.error(error)
  process.exit(1)
})
