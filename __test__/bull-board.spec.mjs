// bull-board in a real browser: an Express server with bull-board over three ferroqueue queues
// (`ferroqueue/bull-board`), jobs in every state, and Debian's Chromium driven headless with
// playwright-core. It checks what a user sees and that the buttons change the queues: the queue
// list, counts, job lists, a job's detail and logs, the Worker, Retry all, Promote all, Clean all
// and Pause. Screenshots go to a temporary folder (its path is printed). scripts/test.sh finds or
// installs Chromium (scripts/chromium.sh) and passes it as FERROQUEUE_CHROMIUM; without one the
// test skips and says why.
//
// The adapter is the same JS over every backend: this runs in the embedded pass; what it reads on
// PostgreSQL (metrics, Workers of every process) is tested in metrics.spec.mjs.
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import express from 'express'
import { createBullBoard } from '@bull-board/api'
import { ExpressAdapter } from '@bull-board/express'
import { chromium } from 'playwright-core'
import { Queue, Worker, FlowProducer } from '../index.mjs'
import { BullBoardAdapter } from '../bull-board.mjs'
import { waitFor, uniqueName, gate, backend, thrown, expectError } from './helpers.mjs'

const browserPath = process.env.FERROQUEUE_CHROMIUM || (existsSync('/usr/bin/chromium') ? '/usr/bin/chromium' : '')
const why = !browserPath
  ? 'no Chromium: scripts/chromium.sh installs Debian\'s chromium with apt-get (root), or set FERROQUEUE_CHROMIUM'
  : backend === 'postgres'
    ? 'the adapter is the same JS on PostgreSQL (metrics.spec.mjs tests what it reads there)'
    : ''
if (why) console.log(`bull-board browser test skipped: ${why}`)
const run = why ? describe.skip : describe

run('bull-board over ferroqueue queues, in Chromium', () => {
  const shots = mkdtempSync(join(tmpdir(), 'ferroqueue-board-'))
  const names = { mail: uniqueName('mail'), reports: uniqueName('reports'), images: uniqueName('images') }
  const held = gate()
  let mail, reports, images, worker, flows, server, browser, page, base

  /** The tab of a status on the queue's page, and its count badge ('' when none). */
  const tabCount = async (queue, status) => {
    const text = await page.locator(`a[href$="/queue/${queue}?status=${status}"]`).first().innerText()
    return (text.match(/\d+/) ?? [''])[0]
  }
  const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true })
  const open = async (path) => {
    await page.goto(`${base}${path}`)
    await page.waitForLoadState('networkidle')
  }
  const confirm = async (button) => {
    await page.getByRole('button', { name: button, exact: true }).click()
    await page.getByRole('button', { name: 'Confirm' }).click()
  }

  beforeAll(async () => {
    mail = new Queue(names.mail)
    reports = new Queue(names.reports)
    images = new Queue(names.images)
    // Finished jobs, a failure with logs, and one held active by a named Worker with metrics.
    await mail.addBulk([
      { name: 'welcome', data: { to: 'ada' } },
      { name: 'receipt', data: { to: 'alan' } },
      { name: 'bounce', data: { to: 'nobody' } },
      { name: 'bounce', data: { to: 'noone' } },
      { name: 'slow', data: { to: 'grace' } },
    ])
    worker = new Worker(
      names.mail,
      async (job) => {
        await job.log(`sending to ${job.data.to}`)
        if (job.name === 'bounce') throw new Error(`mailbox of ${job.data.to} is full`)
        if (job.name === 'slow') await held.p
        return { sent: true }
      },
      { name: 'mailer', concurrency: 5, metrics: {} },
    )
    await waitFor(async () => {
      const c = await mail.getJobCounts('completed', 'failed', 'active')
      return c.completed === 2 && c.failed === 2 && c.active === 1
    }, 10_000)
    // The Worker takes nothing more: what is added now stays where it is put.
    await worker.pause(true)
    await mail.add('later', {}, { delay: 3_600_000 })
    await mail.add('later', {}, { delay: 7_200_000 })
    await mail.add('digest', {})
    await mail.add('urgent', {}, { priority: 1 })
    flows = new FlowProducer()
    await flows.add({ name: 'report', queueName: names.mail, children: [{ name: 'page', queueName: names.reports, data: { n: 1 } }] })
    await reports.add('weekly', {})

    const serverAdapter = new ExpressAdapter()
    serverAdapter.setBasePath('/ui')
    createBullBoard({
      queues: [new BullBoardAdapter(mail), new BullBoardAdapter(reports), new BullBoardAdapter(images, { displayName: 'Thumbnails' })],
      serverAdapter,
    })
    const app = express()
    app.use('/ui', serverAdapter.getRouter())
    server = await new Promise((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s))
    })
    base = `http://127.0.0.1:${server.address().port}/ui`
    browser = await chromium.launch({ executablePath: browserPath, args: ['--no-sandbox'] })
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
    console.log(`bull-board screenshots: ${shots}`)
  }, 60_000)

  afterAll(async () => {
    held.open()
    await browser?.close()
    await new Promise((resolve) => (server ? server.close(resolve) : resolve()))
    await worker?.close()
    await flows?.close()
    for (const q of [mail, reports, images]) await q?.close()
  })

  it('lists the queues with their counts and the Worker', async () => {
    await open('/')
    const body = await page.innerText('body')
    for (const name of [names.mail, names.reports]) expect(body).toContain(name)
    expect(body).toContain('Thumbnails') // the adapter's displayName
    await shot('queues')

    await open(`/queue/${names.mail}`)
    const counts = await mail.getJobCounts()
    expect(counts).toMatchObject({ completed: 2, failed: 2, active: 1, delayed: 2, waiting: 1, prioritized: 1, 'waiting-children': 1 })
    for (const status of ['completed', 'failed', 'active', 'delayed', 'waiting', 'prioritized', 'waiting-children']) {
      expect(await tabCount(names.mail, status), status).toBe(String(counts[status]))
    }
    // The Worker is listed (by bull-board's reading of getWorkers), not "No workers".
    expect(await page.innerText('body')).not.toContain('No workers')
    await shot('mail')
  })

  it('shows job lists, a job\'s detail and its logs', async () => {
    await open(`/queue/${names.mail}?status=failed`)
    const failed = await page.innerText('body')
    expect(failed).toContain('mailbox of nobody is full')
    expect(failed).toContain('mailbox of noone is full')
    expect(failed).toContain('by mailer') // processedBy
    await shot('failed')

    const [job] = await mail.getJobs(['failed'], 0, 0)
    await open(`/queue/${names.mail}/${job.id}?status=failed`)
    await page.getByText('Logs', { exact: true }).first().click()
    await page.getByText(`sending to ${job.data.to}`).waitFor()
    await page.getByText('Data', { exact: true }).first().click()
    await page.getByText(job.data.to).first().waitFor()
    await shot('job')

    await open(`/queue/${names.mail}?status=waiting-children`)
    expect(await page.innerText('body')).toContain('report')
  })

  it('Retry all, Promote all, Clean all and Pause change the queue', async () => {
    await open(`/queue/${names.mail}?status=failed`)
    await confirm('Retry all')
    await waitFor(async () => (await mail.getFailedCount()) === 0, 5000)
    expect(await mail.getWaitingCount()).toBe(3)

    await open(`/queue/${names.mail}?status=delayed`)
    await confirm('Promote all')
    await waitFor(async () => (await mail.getDelayedCount()) === 0, 5000)

    // bull-board cleans jobs that finished more than 5 s ago.
    const [done] = await mail.getJobs(['completed'], 0, 0)
    await waitFor(() => Date.now() - done.finishedOn > 5_200, 10_000, 100)
    await open(`/queue/${names.mail}?status=completed`)
    await confirm('Clean all')
    await waitFor(async () => (await mail.getCompletedCount()) === 0, 5000)

    await open(`/queue/${names.mail}`)
    await page.locator('[aria-haspopup="menu"]').first().click()
    await page.getByRole('menuitem', { name: 'Pause' }).click()
    await page.getByRole('button', { name: 'Confirm' }).click()
    await waitFor(() => mail.isPaused(), 5000)
    await page.getByText('[ Paused ]').waitFor()
    await shot('paused')
  }, 30_000)

  it('refuses what is not a ferroqueue Queue', () => {
    expectError(thrown(() => new BullBoardAdapter({ name: 'x' })), TypeError, 'ERR_INVALID_OPTION', /^queue must be a ferroqueue Queue/)
  })
})
