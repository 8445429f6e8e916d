// `ferroqueue/bull-board` as an ES module: the same class as the CommonJS entry.
import cjs from './bull-board.js'

export const { BullBoardAdapter } = cjs
export default cjs
