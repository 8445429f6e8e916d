// The processor file app.mjs runs in worker threads.
module.exports = async (job) => job.data.n * 2
