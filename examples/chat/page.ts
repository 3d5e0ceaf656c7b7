/**
 * The chat page: plain HTML and a little script, no build step. Each reply
 * is followed with an EventSource on its job: "N ahead" while it waits,
 * "waiting for the model's rate limit" while the queue's rate holds it back,
 * "thinking" (with the words so far) while it runs, "trying again" after a
 * failure or a "slow down", then the reply.
 */
export const CHAT_PAGE = /* html */ `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>drizzle-jobs chat</title>
<style>
  :root { font: 16px/1.45 system-ui, sans-serif; color: #1d2330; background: #f3f4f7; }
  body { max-width: 44rem; margin: 0 auto; padding: 1.5rem 1rem 6rem; }
  h1 { font-size: 1.2rem; margin: 0 0 1rem; }
  h1 small { color: #6b7280; font-weight: normal; }
  ol { list-style: none; padding: 0; margin: 0; display: grid; gap: .75rem; }
  .bubble { padding: .6rem .85rem; border-radius: .8rem; max-width: 85%; white-space: pre-wrap; }
  .user { background: #2f6fed; color: white; justify-self: end; margin-left: auto; }
  .reply { background: white; border: 1px solid #dfe3ea; }
  .status { display: block; font-size: .8rem; color: #6b7280; }
  .status:empty { display: none; }
  .reply[data-state="failed"] { border-color: #e5484d; }
  .reply[data-state="failed"] .status { color: #c4282d; }
  form { position: fixed; bottom: 0; left: 0; right: 0; padding: .75rem; background: #f3f4f7; border-top: 1px solid #dfe3ea; }
  form div { max-width: 44rem; margin: 0 auto; display: flex; gap: .5rem; }
  input { flex: 1; font: inherit; padding: .55rem .75rem; border: 1px solid #c9ced8; border-radius: .6rem; }
  button { font: inherit; padding: .55rem 1rem; border: 0; border-radius: .6rem; background: #2f6fed; color: white; }
</style>
</head>
<body>
<h1>drizzle-jobs chat <small>replies are background jobs, watched live</small></h1>
<ol id="log"></ol>
<form id="ask"><div>
  <input id="text" name="text" autocomplete="off" placeholder="Ask something (try !fail or !slow)" required maxlength="2000">
  <button>Send</button>
</div></form>
<script type="module">
const chat = localStorage.getItem('chat') ?? crypto.randomUUID()
localStorage.setItem('chat', chat)
const log = document.getElementById('log')

function add(message) {
  const item = document.createElement('li')
  item.dataset.message = message.id
  const asked = document.createElement('p')
  asked.className = 'bubble user'
  asked.textContent = message.text
  const reply = document.createElement('p')
  reply.className = 'bubble reply'
  reply.dataset.replyTo = message.id
  reply.innerHTML = '<span class="status"></span><span class="text"></span>'
  item.append(asked, reply)
  log.append(item)
  if (message.reply !== null && message.reply !== undefined) show(reply, { state: 'done', result: { text: message.reply } })
  else follow(message.jobId, reply)
  item.scrollIntoView({ block: 'end' })
}

function follow(jobId, reply) {
  const events = new EventSource('/api/replies/' + encodeURIComponent(jobId) + '/events')
  events.onmessage = (event) => {
    const job = JSON.parse(event.data)
    show(reply, job)
    // The stream ends with the job; without this, EventSource would reconnect.
    if (job.state === 'done' || job.state === 'failed' || job.state === 'canceled') events.close()
  }
}

function show(reply, job) {
  const status = reply.querySelector('.status')
  const text = reply.querySelector('.text')
  reply.dataset.state = job.state
  clearTimeout(reply.rateTick)
  if (job.state === 'waiting') {
    const ahead = job.ahead === 0 ? 'next up · 0 ahead' : (job.ahead >= 10000 ? '10,000+' : job.ahead) + ' ahead'
    if (job.rateLimitedUntil) {
      const seconds = Math.max(0, Math.ceil((new Date(job.rateLimitedUntil).getTime() - Date.now()) / 1000))
      status.textContent = "waiting for the model's rate limit (" + seconds + ' s) · ' + ahead
      // The count goes down each second until the next snapshot comes.
      if (seconds > 0) reply.rateTick = setTimeout(() => show(reply, job), 1000)
    } else {
      status.textContent = ahead
    }
  } else if (job.state === 'running') {
    const thinking = job.progress && job.progress.step === 'thinking'
    status.textContent = thinking ? 'thinking…' : 'starting…'
    text.textContent = thinking && job.progress.text ? job.progress.text : ''
  } else if (job.state === 'scheduled') {
    const seconds = Math.max(0, Math.round((new Date(job.runAt).getTime() - Date.now()) / 1000))
    status.textContent = job.error
      ? 'attempt ' + job.attempt + ' of ' + job.attempts + ' failed (' + job.error + '); trying again in ' + seconds + ' s'
      : 'the model said slow down; trying again in ' + seconds + ' s'
    text.textContent = ''
  } else if (job.state === 'done') {
    status.textContent = ''
    text.textContent = job.result.text
  } else {
    status.textContent = job.state === 'failed' ? 'no reply: ' + job.error : 'canceled'
    text.textContent = ''
  }
}

document.getElementById('ask').addEventListener('submit', async (event) => {
  event.preventDefault()
  const input = document.getElementById('text')
  const text = input.value.trim()
  if (!text) return
  input.value = ''
  const response = await fetch('/api/chats/' + chat + '/messages', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text }),
  })
  if (!response.ok) return alert((await response.json()).error)
  const { id, jobId } = await response.json()
  add({ id, text, jobId, reply: null })
})

const earlier = await (await fetch('/api/chats/' + chat + '/messages')).json()
for (const message of earlier) add(message)
document.body.dataset.ready = 'true'
</script>
</body>
</html>
`
