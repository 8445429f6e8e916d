// ESM entry: the same classes as the CommonJS entry.
import cjs from './index.js'

export const { Queue, Worker, QueueEvents, FlowProducer, Job, QueueError, UnrecoverableError, RateLimitError, DelayedError, WaitingChildrenError, MetricsTime } = cjs
export default cjs
