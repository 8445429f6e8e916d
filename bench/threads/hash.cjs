// A CPU-bound processor file (for ferroqueue and BullMQ alike): hashes a 64 KiB block
// `job.data.rounds` times with SHA-256, each round over the block and the previous digest.
const { createHash } = require('node:crypto')

const block = Buffer.alloc(64 * 1024, 7)

module.exports = async (job) => {
  let digest = Buffer.alloc(0)
  for (let i = 0; i < job.data.rounds; i++) digest = createHash('sha256').update(block).update(digest).digest()
  return digest.toString('hex').slice(0, 16)
}
