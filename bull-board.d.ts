// Typings of `ferroqueue/bull-board` (needs @bull-board/api, an optional peer dependency).
import type { BaseAdapter } from '@bull-board/api/dist/queueAdapters/base.js'
import type { QueueAdapterOptions } from '@bull-board/api/dist/types.js'
import type { Queue } from './index'

/** bull-board's adapter options, as its own adapters take them. */
export type BullBoardAdapterOptions = Partial<QueueAdapterOptions & { allowCompletedRetries: boolean }>

/**
 * bull-board over a ferroqueue Queue: `createBullBoard({ queues: [new BullBoardAdapter(queue)], serverAdapter })`.
 * Throws `ERR_PEER_MISSING` when @bull-board/api is not installed.
 */
export declare const BullBoardAdapter: new (queue: Queue<any, any, any>, options?: BullBoardAdapterOptions) => BaseAdapter
export type BullBoardAdapter = BaseAdapter
