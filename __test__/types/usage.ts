// Compile-only check of the public typings (`npm test` runs `tsc -p __test__/types`).
// Lines marked @ts-expect-error must stay errors: they prove the generics catch misuse.
import { createBullBoard } from '@bull-board/api'
import { BullBoardAdapter } from '../../bull-board.js'
import { Queue, Worker, QueueEvents, FlowProducer, Job, QueueError, UnrecoverableError, RateLimitError, DelayedError, WaitingChildrenError, MetricsTime, type JobsOptions, type JobNode } from '../../index.js'

interface Mail {
  to: string
}
interface Sent {
  id: number
}

async function main(): Promise<void> {
  const queue = new Queue<Mail, Sent, 'welcome' | 'reset'>('mail', { defaultJobOptions: { attempts: 3 }, dataPath: './q.db', durability: 'fsync' })
  const shared = new Queue<Mail>('mail', { connection: 'postgresql://app@db:5432/app' })
  const sharedToo = new Queue<Mail>('mail', { connection: { connectionString: 'postgresql://app@db/app', schema: 'jobs', max: 8 } })
  // @ts-expect-error: a connection is a URL or { connectionString }
  new Queue('mail', { connection: { host: 'db' } })
  void shared
  void sharedToo
  // @ts-expect-error not a durability
  void new Queue('x', { durability: 'sometimes' })
  // @ts-expect-error not an option (no index signature lets a typo through)
  void new Queue('x', { prefx: 'a' })
  // @ts-expect-error not a job option
  void queue.add('welcome', { to: 'a' }, { priorty: 1 })
  void new Queue('x', { prefix: 'tenant-a' })
  const opts: JobsOptions = { priority: 1, delay: 10, backoff: { type: 'exponential', delay: 100, jitter: 0.5 }, removeOnComplete: { age: 60, count: 10 } }
  const job: Job<Mail, Sent, 'welcome' | 'reset'> = await queue.add('welcome', { to: 'a@b.c' }, opts)
  const to: string = job.data.to
  // @ts-expect-error wrong job name
  await queue.add('other', { to: 'x' })
  // @ts-expect-error wrong data shape
  await queue.add('reset', { email: 'x' })
  const jobs = await queue.addBulk([{ name: 'reset', data: { to: 'y' } }])
  const found = await queue.getJob(jobs[0].id)
  if (found) {
    const state: string = await found.getState()
    await found.updateProgress({ pct: 50 })
    await found.changePriority({ priority: 3, lifo: true })
    void state
  }
  const counts = await queue.getJobCounts('waiting', 'failed')
  const waiting: number | undefined = counts.waiting
  const page = await queue.getJobs(['waiting', 'delayed'], 0, 9, true)
  const n: number = await queue.count()
  await queue.clean(1000, 10, 'completed')
  await queue.obliterate({ force: true })

  const worker = new Worker<Mail, Sent>(
    'mail',
    async (j, token, signal) => {
      signal?.throwIfAborted()
      if (!j.data.to) throw new UnrecoverableError('no address')
      void token
      return { id: 1 }
    },
    { concurrency: 10, removeOnFail: 100, settings: { backoffStrategy: (made, type) => (type === 'linear' ? made * 1000 : -1) } },
  )
  const resumed: Promise<void> = worker.resume()
  const limited = new Worker<Mail>('mail', async () => {
    await limited.rateLimit(1000)
    throw Worker.RateLimitError()
  }, { limiter: { max: 10, duration: 1000 } })
  const rle: RateLimitError = Worker.RateLimitError()
  await queue.setGlobalRateLimit(5, 1000)
  const rate = await queue.getGlobalRateLimit()
  const perWindow: number | undefined = rate?.max
  await queue.setGlobalConcurrency(3)
  const cap: number | null = await queue.getGlobalConcurrency()
  const ttl: number = await queue.getRateLimitTtl()
  const once = await queue.add('welcome', { to: 'a@b.c' }, { deduplication: { id: 'welcome:a', ttl: 60_000, extend: true } })
  const holderId: string | null = await queue.getDeduplicationJobId('welcome:a')
  const dropped: number = await queue.removeDeduplicationKey('welcome:a')
  const dedupId: string | undefined = once.deduplicationId
  const freed: boolean = await once.removeDeduplicationKey()
  new QueueEvents('mail').on('deduplicated', ({ jobId, deduplicationId, deduplicatedJobId }) => void [jobId, deduplicationId, deduplicatedJobId])
  // @ts-expect-error a deduplication needs its id
  await queue.add('welcome', { to: 'a@b.c' }, { deduplication: { ttl: 5 } })
  // @ts-expect-error a limiter needs its duration
  new Worker('mail', async () => {}, { limiter: { max: 10 } })
  worker.on('completed', (j, result) => {
    const id: number = result.id
    void j
    void id
  })
  worker.on('failed', (_j, err) => void err.message)
  worker.on('stalled', (jobId, prev) => void [jobId.length, prev])
  const events = new QueueEvents('mail')
  events.on('completed', ({ jobId, returnvalue }) => void [jobId, returnvalue])
  events.on('delayed', ({ delay }) => void (delay + 1))
  events.on('drained', (id) => void id.length)
  events.on(`completed:${job.id}`, ({ jobId }) => void jobId)
  const running: Promise<void> = new QueueEvents('mail', { autorun: false, lastEventId: '$' }).run()
  const result: Sent = await job.waitUntilFinished(events, 1000)
  const e = new QueueError('ERR_X', 'x')
  const code: string = e.code
  await worker.close(true)
  await events.close()
  await queue.close()
  const flow = new FlowProducer()
  const node: JobNode = await flow.add(
    { name: 'p', queueName: 'mail', children: [{ name: 'c', queueName: 'mail', opts: { failParentOnFailure: true } }] },
    { queuesOptions: { mail: { defaultJobOptions: { attempts: 2 } } } },
  )
  const values: Record<string, number> = await node.job.getChildrenValues<number>()
  const deps = await node.job.getDependencies({ unprocessed: { cursor: 0, count: 10 } })
  const next: number | undefined = deps.nextUnprocessedCursor
  const parentKey: string | undefined = node.children?.[0].job.parentKey
  await queue.add('welcome', { to: 'x' }, { parent: { id: node.job.id, queue: queue.qualifiedName }, ignoreDependencyOnFailure: true })
  // @ts-expect-error a parent needs its queue
  await queue.add('welcome', { to: 'x' }, { parent: { id: '1' } })
  const tree: JobNode | undefined = await flow.getFlow({ id: node.job.id, queueName: 'mail', depth: 2 })
  await flow.close()
  await queue.setGroupConcurrency('tenant', 2)
  await queue.add('welcome', { to: 'y' }, { group: { id: 'tenant', priority: 1 } })
  const paused: boolean = await queue.pauseGroup('tenant')
  new Worker('mail', async () => {}, { group: { concurrency: 1, limit: { max: 5, duration: 1000 } } })
  // @ts-expect-error a group needs its id
  await queue.add('welcome', { to: 'y' }, { group: { priority: 1 } })
  // Processor files: worker threads or child processes.
  new Worker<Mail, Sent>('mail', './processor.mjs', { useWorkerThreads: true, threads: 2, concurrency: 4 })
  new Worker('mail', new URL('file:///srv/processor.mjs'), { workerForkOptions: { execArgv: ['--max-old-space-size=256'] } })
  new Worker('mail', './processor.mjs', { useWorkerThreads: true, workerThreadsOptions: { resourceLimits: { maxOldGenerationSizeMb: 64 } } })
  // @ts-expect-error threads is a number
  new Worker('mail', './processor.mjs', { threads: 'two' })
  // Manual processing and step jobs.
  const manual = new Worker<Mail, Sent>('mail', null, { lockDuration: 60_000, maxStalledCount: 2 })
  const fetched: Job<Mail, Sent> | undefined = await manual.getNextJob('token', { block: false })
  const after: Job<Mail, Sent> | undefined = await fetched?.moveToCompleted({ id: 1 }, 'token', true)
  // @ts-expect-error the return value is the worker's ReturnType
  await fetched?.moveToCompleted('not sent', 'token')
  const extended: number = await manual.extendJobLocks(['1'], ['token'], 30_000)
  new Worker<Mail>('mail', async (job) => {
    const by: string | undefined = job.processedBy
    return by
  }, { name: 'mailer-1' })
  // @ts-expect-error a Worker's name is a string
  new Worker('mail', async () => {}, { name: 1 })
  new Worker<Mail, Sent>('mail', async (job, token) => {
    if (await job.moveToWaitingChildren(token ?? '')) throw new WaitingChildrenError()
    await job.moveToDelayed(Date.now() + 1000, token ?? '')
    throw new DelayedError()
  })
  // Job schedulers.
  const scheduled: Job<Mail, Sent> = await queue.upsertJobScheduler('daily', { pattern: '0 9 * * *', tz: 'Europe/Paris' }, { name: 'welcome', data: { to: 'x' } })
  const key: string | undefined = scheduled.repeatJobKey
  const sched = await queue.getJobScheduler('daily')
  const nextRun: number | undefined = sched?.next
  // @ts-expect-error template data is the queue's DataType
  await queue.upsertJobScheduler('bad', { every: 1000 }, { data: { nope: 1 } })
  await queue.add('welcome', { to: 'y' }, { repeat: { every: 60_000 } })
  // The dead-letter queue.
  const dead = await queue.getDlq({ reason: 'timeout', olderThan: 60_000, limit: 10 })
  const deadTo: string = dead[0].job.data.to
  const tries: number = dead[0].attempts.length
  const expires: number = dead[0].expiresAt
  // @ts-expect-error reasons are the spec's names
  await queue.getDlq({ reason: 'lost' })
  const stats = await queue.getDlqStats()
  const timeouts: number = stats.byReason.timeout
  const retried: number = (await queue.retryDlq()) + (await queue.retryDlq('1')) + (await queue.retryDlqByFilter({ reason: 'stalled' }))
  const config = await queue.setDlqConfig({ autoRetry: true, maxEntries: 100 })
  const maxAge: number = config.maxAge + (await queue.getDlqConfig()).maxEntries
  const gone: number = await queue.purgeDlq()
  const removedDead: boolean = await queue.removeDlqJob('2')
  // Metrics.
  new Worker<Mail, Sent>('mail', async () => ({ id: 1 }), { metrics: { maxDataPoints: MetricsTime.ONE_HOUR } })
  const perMinute: number[] = (await queue.getMetrics('completed', 0, 59)).data
  const finishedTotal: number = (await queue.getMetrics('failed')).meta.count
  // @ts-expect-error only completed and failed are counted
  await queue.getMetrics('active')
  const workerPids: number[] = (await queue.getWorkers()).map((w) => w.pid)
  const workerCount: number = await queue.getWorkersCount()
  const prometheus: string = await queue.exportPrometheusMetrics({ env: 'prod' })
  const waitKey: string = queue.toKey('wait')
  // bull-board.
  const serverAdapter = null as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter']
  createBullBoard({ queues: [new BullBoardAdapter(queue, { readOnlyMode: true, displayName: 'Mail' })], serverAdapter })
  // @ts-expect-error the adapter takes a ferroqueue Queue
  new BullBoardAdapter({ name: 'mail' })
  void [to, waiting, page, n, result, code, resumed, running, rle, perWindow, cap, ttl, holderId, dropped, dedupId, freed, values, next, parentKey, tree, paused, after, extended, key, nextRun, deadTo, tries, expires, timeouts, retried, maxAge, gone, removedDead, perMinute, finishedTotal, workerPids, workerCount, prometheus, waitKey]
}
void main
